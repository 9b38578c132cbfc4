package exchange

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEndWords: each End is recorded as its word, and read back from it.
// The words are part of the stored format: changing one makes recordings
// unreadable.
func TestEndWords(t *testing.T) {
	want := map[End]string{
		EndInFlight:       "in-flight",
		EndComplete:       "complete",
		EndUpstreamFailed: "upstream-failed",
		EndCut:            "cut",
		EndClientGone:     "client-gone",
		EndTapClosed:      "tap-closed",
		EndRefused:        "refused",
	}
	if len(want) != len(endWords) {
		t.Fatalf("%d ends have words, the test knows %d", len(endWords), len(want))
	}
	for e, word := range want {
		if e.String() != word {
			t.Errorf("End(%d).String() = %q, want %q", uint8(e), e, word)
		}
		b, err := e.MarshalText()
		if err != nil || string(b) != word {
			t.Errorf("End(%d).MarshalText() = %q, %v; want %q", uint8(e), b, err, word)
		}
		var got End
		if err := got.UnmarshalText([]byte(word)); err != nil || got != e {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", word, got, err, e)
		}
	}
	bad := End(len(endWords))
	if _, err := bad.MarshalText(); !errors.Is(err, ErrUnknownEnd) {
		t.Errorf("End(%d).MarshalText() error %v, want ErrUnknownEnd", uint8(bad), err)
	}
	if s := bad.String(); s != "end(7)" {
		t.Errorf("End(7).String() = %q, want end(7)", s)
	}
}

// TestMarshalWritesEnd: every exchange is written with its end, the one in
// flight too, so that none is taken for a format-2 one; an end that is
// written is read as it is, whatever the error text says.
func TestMarshalWritesEnd(t *testing.T) {
	b, err := Marshal(&Exchange{Method: "POST", URL: "http://x/"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"end":"in-flight"`)) {
		t.Errorf("Marshal of an exchange in flight = %s, want \"end\":\"in-flight\"", b)
	}
	if _, err := Marshal(&Exchange{End: End(200)}); !errors.Is(err, ErrUnknownEnd) {
		t.Errorf("Marshal of End(200): error %v, want ErrUnknownEnd", err)
	}
	x, err := Unmarshal([]byte(`{"status":200,"end":"complete","error":"response cut after 3 bytes: the client went away"}`))
	if err != nil {
		t.Fatal(err)
	}
	if x.End != EndComplete {
		t.Errorf("End = %v, want complete, as written", x.End)
	}
}

// TestUnmarshalUnknownEnd: an end this package does not know is refused,
// not guessed.
func TestUnmarshalUnknownEnd(t *testing.T) {
	for _, in := range []string{`{"end":"exploded"}`, `{"end":""}`, `{"end":3}`} {
		_, err := Unmarshal([]byte(in))
		if err == nil {
			t.Errorf("Unmarshal(%s) succeeded, want an error", in)
			continue
		}
		if strings.Contains(in, `"exploded"`) && !errors.Is(err, ErrUnknownEnd) {
			t.Errorf("Unmarshal(%s): %v, want ErrUnknownEnd", in, err)
		}
	}
}

// TestUnmarshalFormat2: exchanges as the tap wrote them in format-2
// recordings, without an end, one for each way an exchange could end
// (testdata/format-2, written by the tap of that format), are read with
// the end their error text and status tell, and with everything else as
// it was.
func TestUnmarshalFormat2(t *testing.T) {
	cases := []struct {
		file   string
		end    End
		status int
		error  string // a part of it
	}{
		{"complete.in-flight.json", EndInFlight, 0, ""},
		{"complete.json", EndComplete, 200, ""},
		{"client-gone-after-final.json", EndComplete, 200, ""},
		{"upstream-down.json", EndUpstreamFailed, 0, "no response: dial tcp"},
		{"cut.json", EndCut, 200, "response cut after 3178 bytes: unexpected EOF"},
		{"client-gone.json", EndClientGone, 200, "response cut after 3178 bytes: the client went away"},
		{"client-gone-no-response.json", EndClientGone, 0, "no response: the client went away"},
		{"tap-closed.json", EndTapClosed, 200, "response cut after 100 bytes: tap closed"},
		{"tap-closed-no-response.json", EndTapClosed, 0, "no response: tap closed"},
		{"request-unreadable.json", EndRefused, 0, "reading the request body: invalid byte in chunk length"},
		{"upgrade-refused.json", EndRefused, 0, "protocol upgrades and tunnels within tunnels are not supported"},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "format-2", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(cases) {
		t.Errorf("testdata/format-2 has %d files, the test knows %d", len(files), len(cases))
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "format-2", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(data, []byte(`"end"`)) {
				t.Fatalf("%s has an end: it is not of format 2", c.file)
			}
			x, err := Unmarshal(data)
			if err != nil {
				t.Fatal(err)
			}
			if x.End != c.end || x.Status != c.status || !strings.Contains(x.Error, c.error) || (c.error == "") != (x.Error == "") {
				t.Errorf("end %v, status %d, error %q; want %v, %d and an error with %q", x.End, x.Status, x.Error, c.end, c.status, c.error)
			}
			// Nothing else is lost: the exchange encodes as it was
			// written, with its end added.
			var before, after map[string]any
			if err := json.Unmarshal(data, &before); err != nil {
				t.Fatal(err)
			}
			b, err := Marshal(x)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &after); err != nil {
				t.Fatal(err)
			}
			if after["end"] != c.end.String() {
				t.Errorf("encoded again with end %v, want %q", after["end"], c.end)
			}
			delete(after, "end")
			if a, b := mustJSON(t, before), mustJSON(t, after); a != b {
				t.Errorf("encoded again without its end:\n%s\nwant\n%s", b, a)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
