package proxy

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

	"github.com/acptap/acptap/exchange"
)

// errUnsupportedEncoding is a Content-Encoding the tap cannot undo.
var errUnsupportedEncoding = errors.New("unsupported content encoding")

// contentEncoding returns the Content-Encoding of h as sent (lines joined
// with ", ") and the codings to undo, in the order they were applied,
// lower-cased and without "identity".
func contentEncoding(h http.Header) (sent string, codings []string) {
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

// newDecoder returns a reader of r with codings undone, last applied
// first, and a function releasing the decoders' resources.
func newDecoder(r io.Reader, codings []string) (io.Reader, func(), error) {
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
			err = fmt.Errorf("%w %q", errUnsupportedEncoding, codings[i])
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

// decodeBody undoes codings on a whole body.
func decodeBody(body []byte, codings []string) ([]byte, error) {
	if len(codings) == 0 || len(body) == 0 {
		return body, nil
	}
	r, release, err := newDecoder(bytes.NewReader(body), codings)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", strings.Join(codings, ", "), err)
	}
	return out, nil
}

// decodeChunks undoes codings on a body received in chunks. Each piece of
// output gets the arrival time of the chunk whose bytes produced it, as if
// it had been decoded as the chunks came in: the decoders pull input byte
// by byte and return output as soon as they have some, so the chunk being
// read when output appears is the one that completed it. If the body was
// cut (truncated), running out of input is no error: the output decoded
// up to the cut is returned.
func decodeChunks(chunks []exchange.Chunk, codings []string, truncated bool) ([]exchange.Chunk, error) {
	if len(codings) == 0 || len(chunks) == 0 {
		return chunks, nil
	}
	cr := &chunkReader{chunks: chunks, last: -1}
	r, release, err := newDecoder(cr, codings)
	if err != nil {
		if truncated && errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil
		}
		return nil, err
	}
	defer release()

	type piece struct {
		end int // in out
		src int // index of the raw chunk that produced it
	}
	var (
		out    []byte
		pieces []piece
		buf    = make([]byte, 32<<10)
	)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out = append(out, buf[:n]...)
			if k := len(pieces) - 1; k >= 0 && pieces[k].src == cr.last {
				pieces[k].end = len(out)
			} else {
				pieces = append(pieces, piece{end: len(out), src: cr.last})
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if truncated && errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			return nil, fmt.Errorf("decoding %s: %w", strings.Join(codings, ", "), err)
		}
	}
	decoded := make([]exchange.Chunk, len(pieces))
	start := 0
	for i, p := range pieces {
		decoded[i] = exchange.Chunk{At: chunks[max(p.src, 0)].At, Data: out[start:p.end:p.end]}
		start = p.end
	}
	return decoded, nil
}

// chunkReader reads the data of chunks in order, remembering which chunk
// the last byte read came from.
type chunkReader struct {
	chunks []exchange.Chunk
	i      int // the chunk being read
	off    int // bytes of chunks[i] read
	last   int // index of the chunk of the last byte read; -1 before any
}

// advance skips read and empty chunks and reports whether any data is left.
func (r *chunkReader) advance() bool {
	for r.i < len(r.chunks) && r.off == len(r.chunks[r.i].Data) {
		r.i++
		r.off = 0
	}
	return r.i < len(r.chunks)
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if !r.advance() {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[r.i].Data[r.off:])
	r.off += n
	r.last = r.i
	return n, nil
}

func (r *chunkReader) ReadByte() (byte, error) {
	if !r.advance() {
		return 0, io.EOF
	}
	b := r.chunks[r.i].Data[r.off]
	r.off++
	r.last = r.i
	return b, nil
}
