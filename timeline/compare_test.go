package timeline

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acptap/acptap/internal/testing/browsertest"
	"github.com/acptap/acptap/mismatch"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// twoSamples stores the sample twice, asking about two cities: the agent
// streams differ in the prompt's answer, the LLM requests in their
// messages.
func twoSamples(t *testing.T) (*store.Store, *replay.DiffResult) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sampleInto(t, st, "florence", "Florence")
	sampleInto(t, st, "siena", "Siena")
	res, err := replay.Diff(st, "florence", "siena", replay.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st, res
}

// TestDiffGolden: the data of the page of two recordings compared.
func TestDiffGolden(t *testing.T) {
	st, res := twoSamples(t)
	p, err := Diff(st, res)
	if err != nil {
		t.Fatal(err)
	}
	if p.Compare.First == nil || p.Compare.First.A < 0 || p.Compare.First.B < 0 {
		t.Errorf("first divergence %+v, want it placed on both sides", p.Compare.First)
	}
	if n := len(p.Compare.Requests); n != 2 || len(p.Compare.Requests[0].Paths) == 0 {
		t.Errorf("requests %+v, want 2, the first differing", p.Compare.Requests)
	}
	golden(t, "diff.json", p)
}

// TestDiffPageInBrowser: the comparison opens on its first divergence,
// marked at the differing member, and the differing requests are open
// with their differing spots marked.
func TestDiffPageInBrowser(t *testing.T) {
	st, res := twoSamples(t)
	p, err := Diff(st, res)
	if err != nil {
		t.Fatal(err)
	}
	pg := browsertest.Open(t, writePage(t, p))
	checkFirstDivergence(t, pg, "Florence", "Siena")
	if n := browsertest.Eval[int](pg, `document.querySelectorAll('details.request.differs[open] mark.diff').length`); n == 0 {
		t.Errorf("no differing spot marked in the open requests")
	}
	pg.Screenshot("diff.png")
}

// checkFirstDivergence checks that the page shows its comparison, that
// the first divergence's row is in view and marks the differing values,
// left and right.
func checkFirstDivergence(t *testing.T, pg *browsertest.Page, left, right string) {
	t.Helper()
	if !browsertest.Eval[bool](pg, `document.getElementById('view-compare').classList.contains('on')`) {
		t.Errorf("the page does not open on the comparison")
	}
	inView := browsertest.Eval[bool](pg, `(() => { const r = document.getElementById('first-divergence').getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight; })()`)
	if !inView {
		t.Errorf("the first divergence is not scrolled into view")
	}
	marks := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#first-divergence mark.diff')].map(m => m.textContent)`)
	if len(marks) != 2 || !contains(marks[0], left) || !contains(marks[1], right) {
		t.Errorf("the first divergence marks %q, want the %s and %s values", marks, left, right)
	}
}

// TestCompareMissingFrameInBrowser: a frame the replay lacks shows as
// removed, the frames after it, whose ids shifted, pair with their twins
// (the frames whose members they share, not the frames of their ids), and
// only their ids are marked: "jsonrpc": "2.0" and the rest of each value
// are not.
func TestCompareMissingFrameInBrowser(t *testing.T) {
	frame := func(id, n int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":"<agentRpc:%d>","jsonrpc":"2.0","method":"fs/read_text_file","params":{"limit":%d,"line":%d,"path":"/w/file%d.txt","sessionId":"<session:1>"}}`, id, 100+n, 10+n, n))
	}
	var want, got []json.RawMessage
	for n := 1; n <= 6; n++ {
		want = append(want, frame(n, n))
		switch {
		case n < 3:
			got = append(got, frame(n, n))
		case n > 3:
			got = append(got, frame(n-1, n))
		}
	}
	div := replay.Divergence{Kind: replay.OutputDiffers, Mismatch: mismatch.Mismatch{Path: "$[2]", Recorded: "x", Live: normalize.Missing{}}, Message: "frame 3 is missing"}
	p := &Page{Kind: "diff", Title: "missing", Status: "DIFFERENT", Compare: compare("recorded", "replayed", want, got, []replay.Divergence{div}, nil)}
	pg := browsertest.Open(t, writePage(t, p))
	// The folded runs of equal values opened, every row is there.
	classes := browsertest.Eval[[]string](pg, `(() => { document.querySelectorAll('#side tr.gap').forEach(g => g.click()); return [...document.querySelectorAll('#side tr[data-k]')].map(r => r.className.split(' ')[0]); })()`)
	wantClasses := []string{"eq", "eq", "left", "changed", "changed", "changed"}
	if !slices.Equal(classes, wantClasses) {
		t.Errorf("the rows are %q, want %q", classes, wantClasses)
	}
	marks := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#side tr.changed mark.diff')].map(m => m.textContent)`)
	wantMarks := []string{`"<agentRpc:4>"`, `"<agentRpc:3>"`, `"<agentRpc:5>"`, `"<agentRpc:4>"`, `"<agentRpc:6>"`, `"<agentRpc:5>"`}
	if !slices.Equal(marks, wantMarks) {
		t.Errorf("the changed rows mark %q, want their ids alone: %q", marks, wantMarks)
	}
	if !browsertest.Eval[bool](pg, `document.getElementById('first-divergence').classList.contains('left')`) {
		t.Errorf("the first divergence is not the removed frame")
	}
}
