// Package httpcoding undoes HTTP content codings: gzip, deflate (zlib or raw), zstd and br.
package httpcoding

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// ErrUnsupported is a content coding this package cannot undo.
var ErrUnsupported = errors.New("unsupported content encoding")

// Parse returns the Content-Encoding of h as sent (lines joined
// with ", ") and the codings to undo, in the order they were applied,
// lower-cased and without "identity".
func Parse(h http.Header) (sent string, codings []string) {
	vals := h.Values("Content-Encoding")
	if len(vals) == 0 {
		return "", nil
	}
	sent = strings.Join(vals, ", ")
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	return sent, codings
}

// byteReader is what the flate decoders read from without a buffer of
// their own: a decoder pulling byte by byte consumes no more input than it
// needs for the output it returns.
type byteReader interface {
	io.Reader
	io.ByteReader
}

func asByteReader(r io.Reader) byteReader {
	if br, ok := r.(byteReader); ok {
		return br
	}
	return bufio.NewReader(r)
}

// NewReader returns a reader of r with codings undone, last applied
// first, and a function releasing the decoders' resources.
func NewReader(r io.Reader, codings []string) (io.Reader, func(), error) {
	var closers []func()
	release := func() {
		for _, c := range closers {
			c()
		}
	}
	for i := len(codings) - 1; i >= 0; i-- {
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			r, err = gzip.NewReader(asByteReader(r))
		case "deflate":
			r, err = newDeflateReader(asByteReader(r))
		case "zstd":
			var d *zstd.Decoder
			// One goroutine-free decoder: it decodes a block once all of
			// it has arrived and never reads ahead.
			d, err = zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
			if err == nil {
				closers = append(closers, d.Close)
				r = d
			}
		case "br":
			r = brotli.NewReader(r)
		default:
			err = fmt.Errorf("%w %q", ErrUnsupported, codings[i])
		}
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("decoding %s: %w", codings[i], err)
		}
	}
	return r, release, nil
}

// newDeflateReader undoes HTTP's "deflate", which is meant to be zlib
// (RFC 9110) but which some servers send as raw deflate.
func newDeflateReader(r byteReader) (io.Reader, error) {
	var hdr [2]byte
	n := 0
	for ; n < len(hdr); n++ {
		b, err := r.ReadByte()
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
		hdr[n] = b
	}
	pr := &prefixReader{prefix: hdr[:], r: r}
	if hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
		return zlib.NewReader(pr)
	}
	return flate.NewReader(pr), nil
}

// prefixReader reads prefix, then r.
type prefixReader struct {
	prefix []byte
	r      byteReader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.r.Read(b)
}

func (p *prefixReader) ReadByte() (byte, error) {
	if len(p.prefix) > 0 {
		b := p.prefix[0]
		p.prefix = p.prefix[1:]
		return b, nil
	}
	return p.r.ReadByte()
}

// Decode undoes codings on a whole body, refusing to produce more than max
// bytes (a compression bomb). body itself is returned when there is
// nothing to undo.
func Decode(body []byte, codings []string, max int64) ([]byte, error) {
	if len(codings) == 0 || len(body) == 0 {
		return body, nil
	}
	r, release, err := NewReader(bytes.NewReader(body), codings)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", strings.Join(codings, ", "), err)
	}
	if int64(len(out)) > max {
		return nil, fmt.Errorf("decoding %s: %w: more than %d bytes", strings.Join(codings, ", "), ErrTooLarge, max)
	}
	return out, nil
}

// ErrTooLarge is a body that decodes to more than the limit given.
var ErrTooLarge = errors.New("decoded body too large")
