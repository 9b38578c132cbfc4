package timeline

import (
	"encoding/json"
	"strconv"
	"strings"

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

// maxAlign bounds the work of align's longest common subsequence; longer
// streams are aligned position by position.
const maxAlign = 4 << 20

// align pairs the values of two streams: equal values in their longest
// common subsequence, and between them the differing values of each side
// one to one, then the rest of the longer side alone.
func align(a, b []json.RawMessage) []Row {
	n, m := len(a), len(b)
	rows := make([]Row, 0, max(n, m))
	if n*m > maxAlign {
		for i := range max(n, m) {
			r := Row{A: -1, B: -1}
			if i < n {
				r.A = i
			}
			if i < m {
				r.B = i
			}
			r.Same = i < n && i < m && string(a[i]) == string(b[i])
			rows = append(rows, r)
		}
		return rows
	}
	// lcs[i][j] is the length of the common subsequence of a[i:], b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case string(a[i]) == string(b[j]):
				lcs[i][j] = lcs[i+1][j+1] + 1
			case lcs[i+1][j] >= lcs[i][j+1]:
				lcs[i][j] = lcs[i+1][j]
			default:
				lcs[i][j] = lcs[i][j+1]
			}
		}
	}
	var dels, ins []int
	flush := func() {
		for k := range max(len(dels), len(ins)) {
			r := Row{A: -1, B: -1}
			if k < len(dels) {
				r.A = dels[k]
			}
			if k < len(ins) {
				r.B = ins[k]
			}
			rows = append(rows, r)
		}
		dels, ins = dels[:0], ins[:0]
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && string(a[i]) == string(b[j]):
			flush()
			rows = append(rows, Row{A: i, B: j, Same: true})
			i, j = i+1, j+1
		case j >= m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			dels = append(dels, i)
			i++
		default:
			ins = append(ins, j)
			j++
		}
	}
	flush()
	return rows
}
