package timeline

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// Replay returns the page of one replay of a recording of st: the
// replay run as a sequence view (the editor frames in the order the
// replay sent them, the agent's lines as it wrote them, each LLM exchange
// served after the editor frame that preceded it when recorded, with its
// live request next to the recorded one when the replay kept them), and
// for a replay that diverged, the recorded and replayed normalized agent
// streams side by side and the request drift of each LLM exchange.
// status is PASS, FAIL or UPDATED.
func Replay(st *store.Store, res *replay.Result, status string) (*Page, error) {
	rec, err := st.Get(res.Name)
	if err != nil {
		return nil, err
	}
	recorded := newBuilder()
	if err := st.Lines(res.Name, recorded.add); err != nil {
		return nil, err
	}
	// The recorded editor frames, and the exchanges after each.
	var editor []Event
	after := map[int][]Event{} // editor frames before the exchange → exchanges
	for _, e := range recorded.events {
		switch e.Lane {
		case "editor":
			editor = append(editor, e)
		case "llm":
			after[len(editor)] = append(after[len(editor)], e)
		}
	}
	live := map[int]replay.RequestPair{}
	for _, rp := range res.Requests {
		live[rp.Number] = rp
	}
	faults := map[int]string{}
	for _, f := range res.LLM.Faulted {
		faults[f.Number] = f.Fault.String()
	}
	// The stdio faults applied, by the editor frame's ordinal; those of
	// frames the replay did not write (drop, close) have no step of
	// res.Timeline, and a row of their own where dropped says.
	stdio := map[int]string{}
	for _, o := range res.StdioFaults {
		k := slices.IndexFunc(editor, func(e Event) bool { return e.Seq == o.Seq })
		if o.Applied && k >= 0 {
			stdio[k] = o.Fault.String()
		}
	}
	dropped := unwritten(res.Timeline, stdio, editor, recorded.events)
	run := newBuilder()
	push := func(e Event) {
		e.Seq, e.T = uint64(len(run.events)+1), 0
		if x := e.Exchange; x != nil {
			if rp, ok := live[x.Number]; ok {
				x.Recorded, x.Live = present(rp.Recorded), present(rp.Live)
			}
			x.Fault = faults[x.Number]
		}
		run.events = append(run.events, e)
	}
	served := func(k int) {
		for _, e := range after[k] {
			push(e)
		}
		delete(after, k)
	}
	pushEditor := func(k int) {
		e := editor[k]
		e.Fault = stdio[k]
		push(e)
		served(k + 1)
	}
	served(0)
	for j, s := range res.Timeline {
		for _, k := range dropped[j] {
			pushEditor(k)
		}
		switch {
		case s.Lane == lane.Editor && s.Index < len(editor):
			pushEditor(s.Index)
		case s.Lane == lane.Agent && s.Index < len(res.Live):
			push(lineEvent(0, 0, store.LaneAgent, res.Live[s.Index]))
		}
	}
	for _, k := range dropped[len(res.Timeline)] {
		pushEditor(k)
	}
	p := &Page{Kind: "replay", Title: "acptap replay " + res.Name, Status: status, Info: info(rec)[:2], Start: start(rec)}
	p.Info = append(p.Info, fmt.Sprintf("replayed: %d frames, %d LLM exchanges served, %s; the agent %s", res.Frames, res.LLM.Served, res.Duration.Round(1e6), res.Exit))
	// Which stdio faults were applied, and which not, as the report
	// says.
	for _, o := range res.StdioFaults {
		p.Info = append(p.Info, o.String())
	}
	for _, d := range res.Divergences {
		p.Problems = append(p.Problems, d.Message)
	}
	for _, w := range res.Warnings {
		p.Warnings = append(p.Warnings, w.Message)
	}
	run.finish(p)
	if !res.Equal() {
		p.Compare = compare("recorded", "replayed", res.Expected, res.Actual, append(append([]replay.Divergence(nil), res.Divergences...), res.Warnings...), res.Requests)
	}
	return p, nil
}

// unwritten places the rows of the editor frames whose stdio fault the
// replay applied but that it never wrote (drop, close), which the
// replay's timeline lacks: it returns their ordinals among the recorded
// editor frames (editor), by the index in timeline before which each
// goes (len(timeline) for the end). The replay took such a frame after
// the editor frames before it were written and the agent's lines the
// recording has before it were seen, as it does any: the row goes after
// the last editor frame before it, and after as many of the agent's
// lines as the recording (events) has before it, but before the next
// editor frame written.
func unwritten(timeline []replay.Step, faults map[int]string, editor, events []Event) map[int][]int {
	written := map[int]bool{}
	for _, s := range timeline {
		if s.Lane == lane.Editor {
			written[s.Index] = true
		}
	}
	var ks []int
	for k := range faults {
		if !written[k] {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	out := map[int][]int{}
	for _, k := range ks {
		// How many agent lines the recording has before frame k.
		agents := 0
		for _, e := range events {
			if e.Seq == editor[k].Seq {
				break
			}
			if e.Lane == "agent" {
				agents++
			}
		}
		lo, seen := 0, 0 // after the last editor frame before k, and the agent lines before that
		for j, s := range timeline {
			if s.Lane == lane.Editor && s.Index < k {
				lo = j + 1
			}
		}
		for _, s := range timeline[:lo] {
			if s.Lane == lane.Agent {
				seen++
			}
		}
		at := lo
		for at < len(timeline) && seen < agents {
			s := timeline[at]
			if s.Lane == lane.Editor {
				break
			}
			seen++
			at++
		}
		out[at] = append(out[at], k)
	}
	return out
}

// IndexEntry is one recording of a replay run's index page.
type IndexEntry struct {
	Name    string
	Status  string // PASS, FAIL or UPDATED
	Page    string // the file of its page, relative to the index
	Message string // the first divergence, or what --update did
}

// WriteIndex writes the index page of a replay run: each recording with
// its verdict and a link to its page. It is plain HTML.
func WriteIndex(w io.Writer, title string, entries []IndexEntry) error {
	var b strings.Builder
	counts := map[string]int{}
	for _, e := range entries {
		counts[e.Status]++
		fmt.Fprintf(&b, "<tr class=\"%s\"><td><span class=\"status %s\">%s</span></td><td><a href=\"%s\">%s</a></td><td>%s</td></tr>\n",
			html.EscapeString(e.Status), html.EscapeString(e.Status), html.EscapeString(e.Status),
			html.EscapeString(e.Page), html.EscapeString(e.Name), html.EscapeString(e.Message))
	}
	_, err := fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>%s</title>
<style>%s
body{display:block;padding:12px}table{border-collapse:collapse}td{padding:3px 8px;border-bottom:1px solid #eee;vertical-align:top}
</style></head><body data-ready="1">
<h1>%s</h1>
<p class="info">%d passed, %d updated, %d failed</p>
<table id="recordings">
%s</table>
</body></html>
`, html.EscapeString(title), pageCSS, html.EscapeString(title), counts["PASS"], counts["UPDATED"], counts["FAIL"], b.String())
	return err
}
