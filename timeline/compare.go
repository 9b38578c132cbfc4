package timeline

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/textdiff"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// Diff returns the page of two recordings compared (replay.Diff): their
// normalized agent streams side by side, aligned, the first divergence
// marked, and their LLM requests pair by pair.
func Diff(st *store.Store, res *replay.DiffResult) (*Page, error) {
	p := &Page{Kind: "diff", Title: "acptap diff " + res.A + " " + res.B, Status: "SAME"}
	for _, name := range []string{res.A, res.B} {
		rec, err := st.Get(name)
		if err != nil {
			return nil, err
		}
		p.Info = append(p.Info, name+": "+strings.Join(info(rec)[:2], "; "))
	}
	if !res.Equal() {
		p.Status = "DIFFERENT"
	}
	for _, d := range res.Divergences {
		p.Problems = append(p.Problems, d.Message)
	}
	p.Compare = compare(res.A, res.B, res.Expected, res.Actual, res.Divergences, res.Requests)
	return p, nil
}

// compare lays out two normalized agent streams and the LLM requests of
// two runs side by side. divs are the comparison's divergences: the first
// OutputDiffers is marked, and each RequestDrift names its request's
// line.
func compare(left, right string, want, got []json.RawMessage, divs []replay.Divergence, pairs []replay.RequestPair) *Compare {
	c := &Compare{Left: left, Right: right, Want: nonNil(want), Got: nonNil(got), Rows: align(want, got)}
	drift := map[int]string{}
	for _, d := range divs {
		switch {
		case d.Kind == replay.OutputDiffers && c.First == nil:
			c.First = mark(d, c.Rows)
		case d.Kind == replay.RequestDrift:
			drift[d.Exchange] = d.Message
		}
	}
	for _, rp := range pairs {
		l, r := present(rp.Recorded), present(rp.Live)
		pair := RequestPair{Number: rp.Number, Left: l, Right: r, Message: drift[rp.Number]}
		for _, m := range normalize.Mismatches(l, r) {
			pair.Paths = append(pair.Paths, m.Path)
		}
		c.Requests = append(c.Requests, pair)
	}
	return c
}

func nonNil(v []json.RawMessage) []json.RawMessage {
	if v == nil {
		return []json.RawMessage{}
	}
	return v
}

// present is v, or nil for a value a side lacks.
func present(v any) any {
	if _, ok := v.(normalize.Missing); ok {
		return nil
	}
	return v
}

// mark places an OutputDiffers divergence in the aligned rows: its Path
// is $[i] and the path inside value i, of want, or of got for a value
// only got has.
func mark(d replay.Divergence, rows []Row) *Mark {
	m := &Mark{Message: d.Message, A: -1, B: -1, Path: "$"}
	idx, rest, ok := flatIndex(d.Path)
	if !ok {
		return m
	}
	m.Path = "$" + rest
	_, onlyGot := d.Recorded.(normalize.Missing)
	onlyGot = onlyGot && d.Field == ""
	for _, r := range rows {
		if (!onlyGot && r.A == idx) || (onlyGot && r.B == idx) {
			m.A, m.B = r.A, r.B
			break
		}
	}
	return m
}

// flatIndex splits "$[7].params.update" into 7 and ".params.update".
func flatIndex(path string) (int, string, bool) {
	rest, ok := strings.CutPrefix(path, "$[")
	if !ok {
		return 0, "", false
	}
	n, rest, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(n)
	if !ok || err != nil {
		return 0, "", false
	}
	return i, rest, true
}

// align pairs the values of two streams as the printed diff of them does
// (textdiff.Align): a value one side lacks is alone on its row, and the
// others pair with their twins, each pair that differs with the paths of
// its differing members, which the page marks rather than the whole
// value.
func align(a, b []json.RawMessage) []Row {
	pairs := textdiff.Align(a, b)
	rows := make([]Row, len(pairs))
	for k, p := range pairs {
		r := Row{A: p.A, B: p.B}
		if p.A >= 0 && p.B >= 0 {
			r.Same = string(a[p.A]) == string(b[p.B])
			if !r.Same {
				r.Paths = differing(a[p.A], b[p.B])
			}
		}
		rows[k] = r
	}
	return rows
}

// maxPaths bounds the paths marked in one value: a value changed all
// over is marked whole.
const maxPaths = 50

// differing returns the paths at which two JSON values differ, as
// normalize.Mismatches finds them; "$" for values that are not JSON or
// differ at too many places.
func differing(a, b json.RawMessage) []string {
	va, errA := decodeJSON(a)
	vb, errB := decodeJSON(b)
	if errA != nil || errB != nil {
		return []string{"$"}
	}
	var paths []string
	for _, m := range normalize.Mismatches(va, vb) {
		if len(paths) == maxPaths {
			return []string{"$"}
		}
		paths = append(paths, m.Path)
	}
	return paths
}

func decodeJSON(v json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var out any
	err := d.Decode(&out)
	return out, err
}
