package replay

import (
	"fmt"
	"io"
	"strings"
	"time"
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
