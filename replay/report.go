package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/acptap/acptap/normalize"
)

// A Part is a piece of a report, for colouring.
type Part int

const (
	PartPass    Part = iota // the PASS word
	PartFail                // the FAIL word
	PartUpdated             // the UPDATED word
	PartWarning             // the "warning:" word
	PartAdded               // a diff line the replay added (+)
	PartRemoved             // a diff line the replay lost (-)
	PartHunk                // a diff hunk header (@@)
)

// ReportOptions configure WriteReport. The zero value reports a replay
// made without --update, uncoloured.
type ReportOptions struct {
	// Updated says that Update rewrote the diverged recording, writing
	// UpdatedFrames agent frames: the report says UPDATED rather than
	// FAIL.
	Updated       bool
	UpdatedFrames int
	// NotUpdated is why Update left a diverged recording as it was.
	NotUpdated error
	// Paint, if not nil, colours each part of the report.
	Paint func(Part, string) string
}

// WriteReport writes the outcome of one replay in the words of `acptap
// replay`: a PASS, UPDATED or FAIL line, the warnings, the other
// divergences and the diff of the agent's output.
func WriteReport(w io.Writer, res *Result, opts ReportOptions) error {
	paint := opts.Paint
	if paint == nil {
		paint = func(_ Part, s string) string { return s }
	}
	var b strings.Builder
	updated := opts.Updated && !res.Equal()
	switch {
	case res.Equal():
		stats := fmt.Sprintf("%d frames, %d LLM exchanges served, %s", res.Frames, res.LLM.Served, res.Duration.Round(time.Millisecond))
		fmt.Fprintf(&b, "%s %s (%s)\n", paint(PartPass, "PASS"), res.Name, stats)
	case updated:
		fmt.Fprintf(&b, "%s %s (%s)\n", paint(PartUpdated, "UPDATED"), res.Name, UpdateSummary(opts.UpdatedFrames))
	default:
		fmt.Fprintf(&b, "%s %s: %s\n", paint(PartFail, "FAIL"), res.Name, res.Divergences[0].Message)
	}
	for _, f := range res.StdioFaults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(&b, "  %s %s\n", paint(PartWarning, "warning:"), warn.Message)
	}
	if !res.Equal() {
		if !updated {
			for _, d := range res.Divergences[1:] {
				fmt.Fprintf(&b, "  also: %s\n", d.Message)
			}
			if opts.NotUpdated != nil {
				fmt.Fprintf(&b, "  not updated: %v\n", opts.NotUpdated)
			}
			// What a broken editor side made differ is no noise.
			if len(res.StdioFaults) == 0 && slices.ContainsFunc(res.Divergences, noiseLike) {
				fmt.Fprintf(&b, "  hint: if this varies from run to run, `acptap calibrate %s` learns it as a rule\n", res.Name)
			}
		}
		writeDiff(&b, res.Diff, paint)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDiff writes a unified diff, its lines painted.
func writeDiff(b *strings.Builder, diff string, paint func(Part, string) string) {
	for _, line := range strings.SplitAfter(diff, "\n") {
		text, nl := strings.CutSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "+"):
			text = paint(PartAdded, text)
		case strings.HasPrefix(line, "-"):
			text = paint(PartRemoved, text)
		case strings.HasPrefix(line, "@@"):
			text = paint(PartHunk, text)
		}
		b.WriteString(text)
		if nl {
			b.WriteByte('\n')
		}
	}
}

// UpdateSummary says what Update did, having written frames agent frames.
func UpdateSummary(frames int) string {
	return fmt.Sprintf("expected agent stream rewritten: %d frames", frames)
}

// noiseLike reports whether d looks like what varies from run to run,
// which `acptap calibrate` learns, rather than a change of the agent: a
// state notification's value, a number, a word such as a random id or a
// per-run directory in a string otherwise the same, or an update or an
// agent request one side lacks after the first of its stream.
func noiseLike(d Divergence) bool {
	if d.Kind != OutputDiffers && d.Kind != RequestDrift {
		return false
	}
	if d.State {
		return true
	}
	_, recordedAbsent := d.Recorded.(normalize.Missing)
	_, liveAbsent := d.Live.(normalize.Missing)
	if recordedAbsent != liveAbsent {
		return d.Kind == OutputDiffers && d.Index > 1 && d.Field == ""
	}
	switch a := d.Recorded.(type) {
	case json.Number:
		_, ok := d.Live.(json.Number)
		return ok
	case string:
		b, ok := d.Live.(string)
		return ok && wordDiffers(a, b)
	}
	return false
}

// wordDiffers reports whether a and b differ only in one short run of
// letters, digits and the characters of ids and paths (._-/:), with a
// digit in it on either side: "agent-home.Z8qUtU" against
// "agent-home.Ab12Cd", not "fix the typo" against "something else".
func wordDiffers(a, b string) bool {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	// Widen to the whole word on each side.
	for pre > 0 && idByte(a[pre-1]) {
		pre--
	}
	for suf > 0 && idByte(a[len(a)-suf]) {
		suf--
	}
	mids := []string{a[pre : len(a)-suf], b[pre : len(b)-suf]}
	digit := false
	for _, m := range mids {
		if m == "" || len(m) > 200 {
			return false
		}
		for i := 0; i < len(m); i++ {
			if !idByte(m[i]) {
				return false
			}
			digit = digit || '0' <= m[i] && m[i] <= '9'
		}
	}
	return digit
}

// idByte reports whether c may be part of an id or a path.
func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-/:", c) >= 0
}
