package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/acptap/acptap/internal/readbuf"
	"github.com/acptap/acptap/internal/testing/testkit"
)

// readAll reads every event from r and returns them with the Reader's
// remainder.
func readAll(t testing.TB, r io.Reader) ([]Event, []byte) {
	t.Helper()
	sr := NewReader(r)
	var evs []Event
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return evs, bytes.Clone(sr.Rest())
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		evs = append(evs, ev)
	}
}

// chunkReader returns its chunks one per Read call.
type chunkReader struct{ chunks [][]byte }

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	return n, nil
}

// split cuts b at the given offsets, which must be increasing.
func split(b []byte, cuts ...int) [][]byte {
	var chunks [][]byte
	prev := 0
	for _, c := range cuts {
		chunks = append(chunks, b[prev:c])
		prev = c
	}
	return append(chunks, b[prev:])
}

// want is the part of an Event a spec test states.
type want struct {
	Type, Data, ID string
	HasID          bool
	Retry          int
}

func summarize(evs []Event) []want {
	var ws []want
	for _, ev := range evs {
		ws = append(ws, want{ev.Type, ev.Data, ev.ID, ev.HasID, ev.Retry})
	}
	return ws
}

func TestSpec(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []want
		rest string
	}{
		{
			// The standard's stock ticker example.
			name: "multi-line data",
			in:   "data: YHOO\ndata: +2\ndata: 10\n\n",
			want: []want{{"message", "YHOO\n+2\n10", "", false, -1}},
		},
		{
			// The standard's example of comments, ids and leading spaces.
			name: "ids and spaces",
			in:   ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
			want: []want{
				{"message", "first event", "1", true, -1},
				{"message", "second event", "", true, -1},
				{"message", " third event", "", false, -1},
			},
		},
		{
			// The standard's example of empty data and an incomplete
			// last block.
			name: "empty data",
			in:   "data\n\ndata\ndata\n\ndata:",
			want: []want{
				{"message", "", "", false, -1},
				{"message", "\n", "", false, -1},
			},
			rest: "data:",
		},
		{
			// The standard's example of two identical events.
			name: "optional space",
			in:   "data:test\n\ndata: test\n\n",
			want: []want{{"message", "test", "", false, -1}, {"message", "test", "", false, -1}},
		},
		{
			// The standard's example of event types.
			name: "event types",
			in:   "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
			want: []want{{"add", "73857293", "", false, -1}, {"remove", "2153", "", false, -1}, {"add", "113411", "", false, -1}},
		},
		{
			name: "crlf",
			in:   "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n",
			want: []want{{"a", "1\n2", "", false, -1}},
		},
		{
			name: "cr",
			in:   "event: a\rdata: 1\rdata: 2\r\rdata: 3\r\r",
			want: []want{{"a", "1\n2", "", false, -1}, {"message", "3", "", false, -1}},
		},
		{
			// CR LF is one line break, but LF CR is two.
			name: "lf cr",
			in:   "data: 1\n\rdata: 2\n\r\n",
			want: []want{{"message", "1", "", false, -1}, {"message", "2", "", false, -1}},
		},
		{
			name: "mixed line breaks",
			in:   "data: 1\rdata: 2\ndata: 3\r\n\n",
			want: []want{{"message", "1\n2\n3", "", false, -1}},
		},
		{
			name: "bom",
			in:   "\xEF\xBB\xBFdata: x\n\n",
			want: []want{{"message", "x", "", false, -1}},
		},
		{
			// Only one BOM is stripped: the second one makes the field
			// name "\uFEFFdata", which is ignored.
			name: "two boms",
			in:   "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n",
			want: []want{{"message", "y", "", false, -1}},
		},
		{
			name: "partial bom",
			in:   "\xEF\xBBdata: x\n\ndata: y\n\n",
			want: []want{{"message", "y", "", false, -1}},
		},
		{
			name: "comments",
			in:   ":hi\ndata: x\n: in between\ndata: y\n:\n\n",
			want: []want{{"message", "x\ny", "", false, -1}},
		},
		{
			name: "field without colon",
			in:   "data\nevent\ndata\n\n",
			want: []want{{"message", "\n", "", false, -1}},
		},
		{
			name: "only the first space is removed",
			in:   "event:  two\ndata:\tx \n\n",
			want: []want{{" two", "\tx ", "", false, -1}},
		},
		{
			name: "unknown fields and case",
			in:   "Data: no\nDATA: no\ndat: no\ndatas: no\nfoo: bar\ndata: yes\n\n",
			want: []want{{"message", "yes", "", false, -1}},
		},
		{
			name: "id persists and resets",
			in:   "id: 7\ndata: a\n\ndata: b\n\nid:\ndata: c\n\n",
			want: []want{{"message", "a", "7", true, -1}, {"message", "b", "7", false, -1}, {"message", "c", "", true, -1}},
		},
		{
			name: "id with nul is ignored",
			in:   "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
			want: []want{{"message", "a", "1", true, -1}, {"message", "b", "1", false, -1}},
		},
		{
			// A block without data dispatches nothing but still sets
			// the last event ID.
			name: "id in a block without data",
			in:   "id: 5\n\ndata: a\n\n",
			want: []want{{"message", "a", "5", true, -1}},
		},
		{
			name: "event type does not leak past a block without data",
			in:   "event: x\n\ndata: a\n\n",
			want: []want{{"message", "a", "", false, -1}},
		},
		{
			name: "retry",
			in:   "retry: 1500\ndata: a\n\nretry: 15x\ndata: b\n\nretry:\ndata: c\n\nretry: -1\nretry: 99999999999999999999999\ndata: d\n\nretry: 20\n\ndata: e\n\n",
			want: []want{
				{"message", "a", "", false, 1500},
				{"message", "b", "", false, -1},
				{"message", "c", "", false, -1},
				{"message", "d", "", false, -1},
				{"message", "e", "", false, 20},
			},
		},
		{
			name: "incomplete last event",
			in:   "data: a\n\ndata: b\n",
			want: []want{{"message", "a", "", false, -1}},
			rest: "data: b\n",
		},
		{
			name: "trailing blocks without data",
			in:   "data: a\n\n: ping\n\nid: 3\n\n",
			want: []want{{"message", "a", "", false, -1}},
			rest: ": ping\n\nid: 3\n\n",
		},
		{
			name: "invalid utf-8",
			in:   "event: \xff\ndata: a\xe2\x82b\xed\xa0\x80c\xf0\x9f\n\n",
			want: []want{{"\uFFFD", "a\uFFFDb\uFFFD\uFFFD\uFFFDc\uFFFD", "", false, -1}},
		},
		{
			name: "empty",
			in:   "",
		},
		{
			name: "blank lines only",
			in:   "\n\r\n\r\n\n",
			rest: "\n\r\n\r\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, rest := readAll(t, strings.NewReader(tt.in))
			if got := summarize(evs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\ngot  %+v\nwant %+v", got, tt.want)
			}
			if string(rest) != tt.rest {
				t.Errorf("Rest() = %q, want %q", rest, tt.rest)
			}
			checkRoundTrip(t, []byte(tt.in), evs, rest)
			checkChunkings(t, []byte(tt.in))
		})
	}
}

// TestRaw checks where events begin and end: blocks without data belong to
// the next event, and the LF of a CR LF is never split from its CR.
func TestRaw(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}},
		{": c\n\nid: 1\n\ndata: a\n\n", []string{": c\n\nid: 1\n\ndata: a\n\n"}},
		{"data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}},
		{"data: a\r\rdata: b\r\r", []string{"data: a\r\r", "data: b\r\r"}},
		{"\xEF\xBB\xBFdata: a\n\n", []string{"\xEF\xBB\xBFdata: a\n\n"}},
	}
	for _, tt := range tests {
		evs, _ := readAll(t, strings.NewReader(tt.in))
		var got []string
		for _, ev := range evs {
			got = append(got, string(ev.Raw))
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Raw of %q:\ngot  %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func checkRoundTrip(t *testing.T, in []byte, evs []Event, rest []byte) {
	t.Helper()
	var got []byte
	for _, ev := range evs {
		got = append(got, ev.Raw...)
	}
	got = append(got, rest...)
	if !bytes.Equal(got, in) {
		t.Errorf("Raw bytes + Rest:\ngot  %q\nwant %q", got, in)
	}
}

// checkChunkings checks that reading in one byte at a time, and in two
// chunks split at every offset, gives the same events and remainder as
// reading in one piece, and that a Scanner finds the same event ends.
func checkChunkings(t *testing.T, in []byte) {
	t.Helper()
	want, wantRest := readAll(t, bytes.NewReader(in))
	check := func(how string, evs []Event, rest []byte) {
		t.Helper()
		if !reflect.DeepEqual(evs, want) || !bytes.Equal(rest, wantRest) {
			t.Fatalf("%s: got %d events, Rest %q; want %d events, Rest %q\ngot  %+v\nwant %+v",
				how, len(evs), rest, len(want), wantRest, evs, want)
		}
	}
	evs, rest := readAll(t, iotest.OneByteReader(bytes.NewReader(in)))
	check("one byte at a time", evs, rest)
	wantEnds := rawEnds(want)
	if got := scanEnds(split(in)); !reflect.DeepEqual(got, wantEnds) {
		t.Fatalf("Scanner in one chunk: ends %v, want %v", got, wantEnds)
	}
	for k := 0; k <= len(in); k++ {
		chunks := split(in, k)
		evs, rest := readAll(t, &chunkReader{chunks: split(in, k)})
		check("split at "+strconv.Itoa(k), evs, rest)
		if got := scanEnds(chunks); !reflect.DeepEqual(got, wantEnds) {
			t.Fatalf("Scanner split at %d: ends %v, want %v", k, got, wantEnds)
		}
	}
}

// rawEnds returns the stream offsets at which the events end.
func rawEnds(evs []Event) []int {
	var ends []int
	off := 0
	for _, ev := range evs {
		off += len(ev.Raw)
		ends = append(ends, off)
	}
	return ends
}

// scanEnds feeds chunks to a Scanner and returns the event ends it reports
// as stream offsets.
func scanEnds(chunks [][]byte) []int {
	var s Scanner
	var ends []int
	off := 0
	for _, c := range chunks {
		for _, e := range s.Feed(c) {
			if e < 0 || e > len(c) {
				panic("Scanner.Feed returned an offset outside the chunk")
			}
			ends = append(ends, off+e)
		}
		off += len(c)
	}
	if s.Flush() {
		ends = append(ends, off)
	}
	return ends
}

func TestScannerCRAtChunkEnd(t *testing.T) {
	var s Scanner
	if got := s.Feed([]byte("data: a\r\n\r")); len(got) != 0 {
		t.Errorf("Feed before the final LF = %v, want no ends yet", got)
	}
	if got := s.Feed([]byte("\ndata: b\r\n\r")); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("Feed starting with LF = %v, want [1]", got)
	}
	if got := s.Feed([]byte("data: c\r\r")); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("Feed starting without LF = %v, want [0]", got)
	}
	if got := s.Feed(nil); len(got) != 0 {
		t.Errorf("Feed(nil) = %v, want no ends", got)
	}
	if !s.Flush() {
		t.Errorf("Flush() = false, want true for the event held back")
	}
	if s.Flush() {
		t.Errorf("second Flush() = true, want false")
	}
}

func TestReaderError(t *testing.T) {
	errBoom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(errBoom)))
	ev, err := r.Next()
	if err != nil || ev.Data != "a" {
		t.Fatalf("Next() = %q, %v; want event a", ev.Data, err)
	}
	if _, err := r.Next(); err != errBoom {
		t.Fatalf("Next() error = %v, want %v", err, errBoom)
	}
	if got := string(r.Rest()); got != "data: b" {
		t.Errorf("Rest() = %q, want %q", got, "data: b")
	}
}

func TestReaderNoProgress(t *testing.T) {
	r := NewReader(emptyReader{})
	if _, err := r.Next(); err != io.ErrNoProgress {
		t.Fatalf("Next() error = %v, want io.ErrNoProgress", err)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestLargeEvent(t *testing.T) {
	data := strings.Repeat("x", 3*readbuf.MinRead+17)
	in := "data: " + data + "\n\ndata: y\n\n"
	evs, _ := readAll(t, strings.NewReader(in))
	if len(evs) != 2 || evs[0].Data != data || evs[1].Data != "y" {
		t.Fatalf("got %d events, want the large one and y", len(evs))
	}
}

// CR-only streams must not make the scanner look for an LF at every line.
func TestCROnlyLinear(t *testing.T) {
	in := bytes.Repeat([]byte("data: x\r"), 1<<16)
	in = append(in, '\r')
	var s Scanner
	ends := s.Feed(in)
	if len(ends) != 0 || !s.Flush() {
		t.Fatalf("got ends %v and no held-back event, want one event at the end", ends)
	}
}

func samples(t testing.TB) map[string][]byte {
	t.Helper()
	return testkit.WireSamples(t, "*.sse")
}

func TestSamples(t *testing.T) {
	for name, in := range samples(t) {
		t.Run(name, func(t *testing.T) {
			evs, rest := readAll(t, bytes.NewReader(in))
			// Each sample is a sequence of complete blocks, each with a
			// data field, so every blank line dispatches an event.
			blank := "\n\n"
			if bytes.Contains(in, []byte("\r\n")) {
				blank = "\r\n\r\n"
			}
			if got, want := len(evs), bytes.Count(in, []byte(blank)); got != want {
				t.Errorf("got %d events, want %d", got, want)
			}
			if len(rest) != 0 {
				t.Errorf("Rest() = %q, want empty", rest)
			}
			for i, ev := range evs {
				if !bytes.HasSuffix(ev.Raw, []byte(blank)) {
					t.Errorf("event %d: Raw %q does not end with %q", i, ev.Raw, blank)
				}
				if strings.ContainsAny(ev.Data, "\r\n") {
					t.Errorf("event %d: Data %q has a line break", i, ev.Data)
				}
				if !bytes.Contains(ev.Raw, []byte(ev.Data)) {
					t.Errorf("event %d: Data %q is not in Raw %q", i, ev.Data, ev.Raw)
				}
			}
			checkRoundTrip(t, in, evs, rest)
			checkChunkings(t, in)
		})
	}
}

// TestAnthropicPadding checks that the padding Anthropic puts inside its
// JSON survives in Data and Raw.
func TestAnthropicPadding(t *testing.T) {
	in := samples(t)["anth_text.sse"]
	evs, _ := readAll(t, bytes.NewReader(in))
	last := evs[len(evs)-1]
	if last.Type != "message_stop" {
		t.Fatalf("last event type = %q, want message_stop", last.Type)
	}
	if want := `{"type":"message_stop"       }`; last.Data != want {
		t.Errorf("Data = %q, want %q", last.Data, want)
	}
	if want := "event: message_stop\ndata: {\"type\":\"message_stop\"       }\n\n"; string(last.Raw) != want {
		t.Errorf("Raw = %q, want %q", last.Raw, want)
	}
}

func TestReference(t *testing.T) {
	for name, in := range samples(t) {
		compareWithReference(t, name, in)
	}
}

// compareWithReference checks the Reader against refParse.
func compareWithReference(t *testing.T, name string, in []byte) {
	t.Helper()
	evs, rest := readAll(t, bytes.NewReader(in))
	ref, refEnds := refParse(in)
	if got := summarize(evs); !reflect.DeepEqual(got, ref) {
		t.Fatalf("%s: Reader and reference disagree:\nReader    %+v\nreference %+v", name, got, ref)
	}
	if got := rawEnds(evs); !reflect.DeepEqual(got, refEnds) {
		t.Fatalf("%s: event ends %v, reference %v", name, got, refEnds)
	}
	checkRoundTrip(t, in, evs, rest)
}

// refParse is a direct transcription of the standard's algorithm, kept
// simple rather than fast, as an oracle: it splits the whole stream into
// lines first, then decodes each line and processes its field.
func refParse(in []byte) (evs []want, ends []int) {
	type line struct {
		text string
		end  int // offset just past the line break
	}
	var lines []line
	start := 0
	if bytes.HasPrefix(in, bom[:]) {
		start = len(bom)
	}
	for i := start; i < len(in); i++ {
		switch in[i] {
		case '\n':
			lines = append(lines, line{refDecode(in[start:i]), i + 1})
			start = i + 1
		case '\r':
			end := i + 1
			if end < len(in) && in[end] == '\n' {
				end++
			}
			lines = append(lines, line{refDecode(in[start:i]), end})
			start = end
			i = end - 1
		}
	}
	// A trailing line without a line break is discarded at EOF.
	var data, typ, lastID string
	hasID, retry := false, -1
	for _, l := range lines {
		if l.text == "" {
			if data == "" {
				typ = ""
				continue
			}
			ev := want{Type: "message", Data: strings.TrimSuffix(data, "\n"), ID: lastID, HasID: hasID, Retry: retry}
			if typ != "" {
				ev.Type = typ
			}
			evs = append(evs, ev)
			ends = append(ends, l.end)
			data, typ, hasID, retry = "", "", false, -1
			continue
		}
		if strings.HasPrefix(l.text, ":") {
			continue
		}
		field, value, found := strings.Cut(l.text, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			data += value + "\n"
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID, hasID = value, true
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				if n, err := strconv.Atoi(value); err == nil {
					retry = n
				}
			}
		}
	}
	return evs, ends
}

// refDecode is the standard's UTF-8 decoder in replacement mode, written
// out step by step.
func refDecode(in []byte) string {
	var out []rune
	var cp rune
	needed, seen := 0, 0
	lower, upper := byte(0x80), byte(0xBF)
	for i := 0; i < len(in); i++ {
		b := in[i]
		if needed == 0 {
			switch {
			case b <= 0x7F:
				out = append(out, rune(b))
			case 0xC2 <= b && b <= 0xDF:
				needed, cp = 1, rune(b&0x1F)
			case 0xE0 <= b && b <= 0xEF:
				if b == 0xE0 {
					lower = 0xA0
				}
				if b == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(b&0xF)
			case 0xF0 <= b && b <= 0xF4:
				if b == 0xF0 {
					lower = 0x90
				}
				if b == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(b&0x7)
			default:
				out = append(out, 0xFFFD)
			}
			continue
		}
		if b < lower || b > upper {
			cp, needed, seen = 0, 0, 0
			lower, upper = 0x80, 0xBF
			out = append(out, 0xFFFD)
			i-- // The byte is processed again.
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(b&0x3F)
		seen++
		if seen == needed {
			out = append(out, cp)
			cp, needed, seen = 0, 0, 0
		}
	}
	if needed != 0 {
		out = append(out, 0xFFFD)
	}
	return string(out)
}

func FuzzSSE(f *testing.F) {
	for _, in := range samples(f) {
		f.Add(in, []byte{7, 1, 200, 3})
	}
	f.Add([]byte("data: a\r\n\r\ndata: b\r\r\n\n"), []byte{9, 2, 1})
	f.Add([]byte("\xEF\xBB\xBFid: 1\x00\nretry: 12\ndata\n\n"), []byte{1, 1, 1})
	f.Add([]byte(": c\rdata:x\r\r\n"), []byte{8, 0, 2})
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		evs, rest := readAll(t, bytes.NewReader(in))
		checkRoundTrip(t, in, evs, rest)

		ref, refEnds := refParse(in)
		if got := summarize(evs); !reflect.DeepEqual(got, ref) {
			t.Fatalf("Reader and reference disagree:\nReader    %+v\nreference %+v", got, ref)
		}
		ends := rawEnds(evs)
		if !reflect.DeepEqual(ends, refEnds) {
			t.Fatalf("event ends %v, reference %v", ends, refEnds)
		}

		// Chunk the input with sizes taken from cuts.
		var chunks [][]byte
		for rem, i := in, 0; len(rem) > 0; i++ {
			n := len(rem)
			if len(cuts) > 0 {
				// At least a byte: cuts of 0 made this loop endless
				// (found by the fuzzer, which ran out of memory).
				n = min(n, max(1, int(cuts[i%len(cuts)])))
			}
			chunks = append(chunks, rem[:n])
			rem = rem[n:]
		}
		cevs, crest := readAll(t, &chunkReader{chunks: append([][]byte(nil), chunks...)})
		if !reflect.DeepEqual(cevs, evs) || !bytes.Equal(crest, rest) {
			t.Fatalf("chunked read differs:\ngot  %+v, Rest %q\nwant %+v, Rest %q", cevs, crest, evs, rest)
		}
		if got := scanEnds(chunks); !reflect.DeepEqual(got, ends) {
			t.Fatalf("Scanner ends %v, Reader ends %v", got, ends)
		}
	})
}

func benchInput(b *testing.B) []byte {
	var in []byte
	for _, s := range samples(b) {
		in = append(in, s...)
	}
	return bytes.Repeat(in, 64)
}

func BenchmarkReader(b *testing.B) {
	in := benchInput(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

func BenchmarkScanner(b *testing.B) {
	in := benchInput(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		var s Scanner
		for c := in; len(c) > 0; {
			n := min(len(c), 1500) // about one TCP segment per chunk
			s.Feed(c[:n])
			c = c[n:]
		}
	}
}
