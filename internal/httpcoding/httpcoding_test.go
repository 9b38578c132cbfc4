package httpcoding

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

func encode(t testing.TB, coding string, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&b)
	case "deflate":
		w = zlib.NewWriter(&b)
	case "raw-deflate":
		w, _ = flate.NewWriter(&b, flate.BestSpeed)
	case "zstd":
		w, _ = zstd.NewWriter(&b)
	case "br":
		w = brotli.NewWriter(&b)
	default:
		t.Fatalf("no encoder for %q", coding)
	}
	w.Write(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestParse(t *testing.T) {
	h := http.Header{"Content-Encoding": {"gzip, Identity", " ZSTD "}}
	sent, codings := Parse(h)
	if sent != "gzip, Identity,  ZSTD " || !slices.Equal(codings, []string{"gzip", "zstd"}) {
		t.Errorf("Parse = %q %q, want the header as sent and [gzip zstd]", sent, codings)
	}
	if sent, codings := Parse(http.Header{}); sent != "" || codings != nil {
		t.Errorf("Parse(no header) = %q %q, want nothing", sent, codings)
	}
}

func TestDecode(t *testing.T) {
	body := []byte(strings.Repeat(`{"model":"gpt","input":"hello"}`, 100))
	for _, c := range []struct{ name, coding string }{
		{"gzip", "gzip"}, {"zlib deflate", "deflate"}, {"raw deflate", "raw-deflate"}, {"zstd", "zstd"}, {"br", "br"},
	} {
		coding := c.coding
		if coding == "raw-deflate" {
			coding = "deflate" // what the header says; the bytes are raw
		}
		got, err := Decode(encode(t, c.coding, body), []string{coding}, 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: Decode = %d bytes, %v; want the body back", c.name, len(got), err)
		}
	}
	// Stacked codings are undone last applied first.
	stacked := encode(t, "zstd", encode(t, "gzip", body))
	if got, err := Decode(stacked, []string{"gzip", "zstd"}, 1<<20); err != nil || !bytes.Equal(got, body) {
		t.Errorf("gzip then zstd: Decode = %d bytes, %v; want the body back", len(got), err)
	}
	if got, err := Decode(body, nil, 1); err != nil || &got[0] != &body[0] {
		t.Errorf("no codings: Decode did not return the body itself (%v)", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := Decode([]byte("x"), []string{"compress"}, 10); !errors.Is(err, ErrUnsupported) {
		t.Errorf("compress: err = %v, want ErrUnsupported", err)
	}
	if _, err := Decode([]byte("not gzip"), []string{"gzip"}, 10); err == nil {
		t.Errorf("corrupt gzip: no error")
	}
	bomb := encode(t, "zstd", make([]byte, 1<<20))
	if _, err := Decode(bomb, []string{"zstd"}, 1<<10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("1 MiB of zeros with a 1 KiB limit: err = %v, want ErrTooLarge", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x1f, 0x8b, 0x08}, uint8(0))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd}, uint8(2))
	f.Add([]byte{0x78, 0x9c}, uint8(1))
	codings := []string{"gzip", "deflate", "zstd", "br"}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		out, err := Decode(data, []string{codings[int(which)%len(codings)]}, 1<<20)
		if err == nil && len(out) > 1<<20 {
			t.Fatalf("decoded %d bytes past the limit", len(out))
		}
	})
}
