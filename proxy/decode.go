package proxy

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/httpcoding"
)

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
	r, release, err := httpcoding.NewReader(cr, codings)
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
