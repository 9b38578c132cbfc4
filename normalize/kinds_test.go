package normalize

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// naiveBefore is before as it reads: frame by frame back from i.
func naiveBefore(seg *turnFrames, i int, skip string) string {
	for j := i - 1; j >= 0; j-- {
		c := seg.class(j)
		if c.state != "" || skip != "" && kindMatches(skip, c.what) {
			continue
		}
		return c.what
	}
	return ""
}

// TestBeforeIndex checks that before with its kindIndex says what a walk
// back frame by frame says, on random turns of few kinds, runs and
// state notifications among them.
func TestBeforeIndex(t *testing.T) {
	classes := []class{
		{what: "response session/prompt", requests: true},
		{what: "request fs/read_text_file", requests: true},
		{what: "update tool_call"},
		{what: "update tool_call completed"},
		{what: "update agent_message_chunk"},
		{what: "update usage_update", state: "usage_update"},
		{what: ""},
	}
	skips := []string{"", "update tool_call", "update agent_message_chunk", "response session/prompt", "request fs/read_text_file", "update usage_update"}
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		fi := &frameIndex{classes: classes}
		n := r.IntN(60)
		for range n {
			c := r.IntN(len(classes))
			run := 1 + r.IntN(5)
			for range run {
				fi.frames = append(fi.frames, placed{class: uint32(c)})
			}
		}
		seg := &turnFrames{frameIndex: fi, frames: fi.frames}
		x := newKindIndex(seg)
		for i := range seg.frames {
			for _, skip := range skips {
				if got, want := before(seg, x, i, skip), naiveBefore(seg, i, skip); got != want {
					t.Fatalf("trial %d, frame %d, skip %q: got %q, want %q", trial, i, skip, got, want)
				}
			}
		}
	}
}

// TestItemSplit checks that an item whose chunk had others joined to it
// early splits back into the items it was made of.
func TestItemSplit(t *testing.T) {
	c := &chunk{key: "k", rest: map[string]any{}}
	c.text.WriteString("Hello")
	c.pieces = append(c.pieces, piece{at: 4, start: c.text.Len()})
	c.text.WriteString(", ")
	c.pieces = append(c.pieces, piece{at: 9, start: c.text.Len()})
	c.text.WriteString("world")
	var got []string
	for _, it := range (item{at: 2, chunk: c}).split() {
		got = append(got, fmt.Sprintf("%d:%s", it.at, it.chunk.text.String()))
	}
	if want := "[2:Hello 4:,  9:world]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}
