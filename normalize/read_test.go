package normalize

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/acptap/acptap/lane"
)

// reader is lane.Lines over frames that hands out a copy of each line and
// scribbles over the previous copy, as a reader reusing one buffer would:
// a transcript that kept a line would show it.
type reader struct {
	frames []lane.Line
	buf    []byte
	reads  int
	failAt int // the read that fails, from 1; 0 for none
}

var errRead = errors.New("read failed")

func (r *reader) Len() int { return len(r.frames) }

func (r *reader) Line(i int) (lane.Line, error) {
	r.reads++
	if r.reads == r.failAt {
		return lane.Line{}, errRead
	}
	for k := range r.buf {
		r.buf[k] = 'x'
	}
	r.buf = append(r.buf[:0], r.frames[i].Data...)
	return lane.Line{Lane: r.frames[i].Lane, Data: r.buf}, nil
}

// digested returns t with each value replaced by its digest, and each
// stream's values folded into one, as DigestTranscript makes them.
func digested(t *Transcript) *Transcript {
	d := func(v json.RawMessage) json.RawMessage {
		if v == nil {
			return nil
		}
		sum := sha256.Sum256(v)
		return json.RawMessage(`"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`)
	}
	out := &Transcript{Order: t.Order}
	for _, turn := range t.Turns {
		tt := Turn{Session: turn.Session, Answered: turn.Answered}
		for _, s := range turn.Streams {
			ss := Stream{Name: s.Name, Session: s.Session, After: s.After}
			for _, v := range s.Values {
				ss.Values = append(ss.Values, d(v))
			}
			tt.Streams = append(tt.Streams, ss)
		}
		for _, st := range turn.State {
			tt.State = append(tt.State, State{Kind: st.Kind, Session: st.Session, Value: d(st.Value), Late: d(st.Late)})
		}
		fold(&tt)
		out.Turns = append(out.Turns, tt)
	}
	return out
}

// TestReadTranscript checks that ReadTranscript, reading the frames again
// turn by turn, makes the transcript Transcript makes of them in memory,
// placeholders numbered alike, and DigestTranscript the same with each
// value digested, for every test stream in both orders, with and without
// coalescing.
func TestReadTranscript(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.ndjson")
	if len(names) == 0 {
		t.Fatal("no test streams")
	}
	for _, name := range names {
		sf := readStream(t, filepath.Base(name))
		for _, order := range []Order{ByStream, Strict} {
			for _, noCoalesce := range []bool{false, true} {
				o := sf.opts
				o.Order, o.NoCoalesce = order, noCoalesce
				want := New(o).Transcript(sf.frames)
				got, err := New(o).ReadTranscript(&reader{frames: sf.frames})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s (%v, NoCoalesce %v): ReadTranscript\n got %s\nwant %s", name, order, noCoalesce, joinLines(got.Values()), joinLines(want.Values()))
				}
				dg, err := New(o).DigestTranscript(&reader{frames: sf.frames})
				if err != nil {
					t.Fatal(err)
				}
				if dw := digested(want); !reflect.DeepEqual(dg, dw) {
					t.Errorf("%s (%v, NoCoalesce %v): DigestTranscript\n got %s\nwant %s", name, order, noCoalesce, joinLines(dg.Values()), joinLines(dw.Values()))
				}
			}
		}
	}
}

// TestDigestCompare checks that digest transcripts compare equal when the
// transcripts do, and differ when they do.
func TestDigestCompare(t *testing.T) {
	sf := readStream(t, "edge.ndjson")
	changed := make([]lane.Line, len(sf.frames))
	copy(changed, sf.frames)
	last := len(changed) - 1
	changed[last].Data = bytes.Replace(changed[last].Data, []byte(`"`), []byte(`"changed `), 4)
	// A value of the middle of a stream of several (the junk lines)
	// dropped, doubled, swapped with the next: each stream folds into one
	// digest, which must still tell.
	junk := slices.IndexFunc(sf.frames, func(f lane.Line) bool { return bytes.HasPrefix(f.Data, []byte("[1,2]")) })
	if junk < 1 {
		t.Fatal("edge.ndjson: no [1,2] line")
	}
	dropped := slices.Delete(slices.Clone(sf.frames), junk, junk+1)
	doubled := slices.Insert(slices.Clone(sf.frames), junk, sf.frames[junk])
	swapped := slices.Clone(sf.frames)
	swapped[junk], swapped[junk+1] = swapped[junk+1], swapped[junk]
	for _, tc := range []struct {
		name   string
		got    []lane.Line
		differ bool
	}{{"same", sf.frames, false}, {"changed", changed, true}, {"dropped", dropped, true}, {"doubled", doubled, true}, {"swapped", swapped, true}} {
		whole := Compare(New(sf.opts).Transcript(sf.frames), New(sf.opts).Transcript(tc.got))
		if (whole.Diff != nil) != tc.differ {
			t.Fatalf("%s: Compare of the transcripts: diff %+v, want differ %v", tc.name, whole.Diff, tc.differ)
		}
		w, err := New(sf.opts).DigestTranscript(&reader{frames: sf.frames})
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(sf.opts).DigestTranscript(&reader{frames: tc.got})
		if err != nil {
			t.Fatal(err)
		}
		if c := Compare(w, g); (c.Diff != nil) != tc.differ {
			t.Errorf("%s: Compare of the digests: diff %+v, want differ %v", tc.name, c.Diff, tc.differ)
		}
	}
}

// TestReadTranscriptError checks that a frame that cannot be read fails
// ReadTranscript with its error, whether in the first reading or the
// second, under both orders.
func TestReadTranscriptError(t *testing.T) {
	sf := readStream(t, "edge.ndjson")
	n := len(sf.frames)
	for _, order := range []Order{ByStream, Strict} {
		for _, at := range []int{1, n, n + 1} {
			if order == Strict && at > n {
				continue // read once
			}
			o := sf.opts
			o.Order = order
			_, err := New(o).ReadTranscript(&reader{frames: sf.frames, failAt: at})
			if !errors.Is(err, errRead) {
				t.Errorf("%v, read %d failing: got %v, want %v", order, at, err, errRead)
			}
		}
	}
}
