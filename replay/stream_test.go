package replay

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/acptap/acptap/store"
)

// bigSession is a session of many turns, each with a file read (a
// permission request and an fs request the editor answers), non-JSON
// lines and an answer in many chunks: a few MiB of frames.
var bigSession = func() session {
	prompts := make([]string, 160)
	for i := range prompts {
		prompts[i] = "prompt " + strings.Repeat("p", i%7)
	}
	return session{
		args:    []string{"--read", "notes.txt", "--junk", "--junk-lines", "40", "--chunk-size", "512", "--message", strings.Repeat("The answer, at length. ", 360)},
		prompts: prompts,
	}
}()

// copyChanged copies recording from of st to to, the agent's n-th last
// message chunk changed.
func copyChanged(t *testing.T, st *store.Store, from, to string, n int) {
	t.Helper()
	meta, err := st.Get(from)
	if err != nil {
		t.Fatal(err)
	}
	var events []store.Event
	if err := st.Events(from, func(e store.Event) error {
		e.Data = bytes.Clone(e.Data)
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := len(events) - 1; i >= 0; i-- {
		e := &events[i]
		if e.Lane == store.LaneAgent && bytes.Contains(e.Data, []byte("agent_message_chunk")) {
			if n--; n == 0 {
				e.Data = bytes.Replace(e.Data, []byte(`"text":"`), []byte(`"text":"changed `), 1)
				break
			}
		}
	}
	meta.Name = to
	w, err := st.Create(meta, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		w.Append(store.Event{Kind: e.Kind, Lane: e.Lane, Offset: e.Offset, Flags: e.Flags, Data: e.Data})
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestDiscardBigRecording checks that a replay with Discard, which reads
// the frames back from its spool and compares digests first, finds a
// recording of many turns equal, as a replay keeping everything does,
// keeping none of the streams; and that it finds a divergence late in the
// recording and explains it in the same words and the same diff.
func TestDiscardBigRecording(t *testing.T) {
	st := openStore(t)
	recordSession(t, st, "big", bigSession)
	rec, err := load(st, "big")
	if err != nil {
		t.Fatal(err)
	}
	size := rec.frames.end
	frames, agent := rec.frames.Len(), agentCount(t, rec)
	rec.close()
	if size < 2<<20 {
		t.Fatalf("the recording has %d bytes of frames, want a few MiB", size)
	}
	copyChanged(t, st, "big", "changed", 3)

	opts := runOptions(t)
	kept := replayIt(t, st, "big", opts)
	if !kept.Equal() {
		t.Fatalf("replay keeping the streams diverged: %v\n%s", kept.Divergences, kept.Diff)
	}
	if len(kept.Live) != agent || len(kept.Expected) == 0 {
		t.Fatalf("replay keeping the streams: %d live lines, %d expected values; want %d and some", len(kept.Live), len(kept.Expected), agent)
	}
	opts.Discard = true
	res := replayIt(t, st, "big", opts)
	if !res.Equal() {
		t.Fatalf("replay with Discard diverged: %v\n%s", res.Divergences, res.Diff)
	}
	if res.Frames != frames || res.Live != nil || res.Timeline != nil || res.Expected != nil || res.Actual != nil || res.Diff != "" {
		t.Errorf("replay with Discard: %d frames, %d live lines, %d steps, %d expected, %d actual, diff %q; want %d frames and nothing else",
			res.Frames, len(res.Live), len(res.Timeline), len(res.Expected), len(res.Actual), res.Diff, frames)
	}

	var reports [2]string
	var divs [2][]Divergence
	for i, discard := range []bool{false, true} {
		opts.Discard = discard
		res := replayIt(t, st, "changed", opts)
		if got := kinds(res.Divergences); len(got) != 1 || got[0] != OutputDiffers {
			t.Fatalf("Discard %v: divergences %v, want the agent's output", discard, res.Divergences)
		}
		if d := res.Divergences[0]; d.Turn < len(bigSession.prompts)-1 || !strings.Contains(res.Diff, "changed ") {
			t.Errorf("Discard %v: divergence in turn %d, diff:\n%s\nwant one in the last turns, of the changed chunk", discard, d.Turn, res.Diff)
		}
		var b strings.Builder
		if err := WriteReport(&b, res, ReportOptions{}); err != nil {
			t.Fatal(err)
		}
		reports[i], divs[i] = b.String(), res.Divergences
		if discard {
			if err := res.Updatable(); err == nil || !strings.Contains(err.Error(), "Options.Discard") {
				t.Errorf("Updatable of a replay with Discard = %v, want ErrNotUpdatable naming Options.Discard", err)
			}
		}
	}
	if reports[1] != reports[0] {
		t.Errorf("report with Discard:\n%s\nwant the report without:\n%s", reports[1], reports[0])
	}
	if !reflect.DeepEqual(divs[1], divs[0]) {
		t.Errorf("divergences with Discard:\n%+v\nwant those without:\n%+v", divs[1], divs[0])
	}
}
