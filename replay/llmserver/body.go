package llmserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/sse"
)

// framing is how a response body divides into events.
type framing uint8

const (
	framingWhole  framing = iota // one document: the body is one event
	framingSSE                   // text/event-stream
	framingNDJSON                // one JSON value a line
)

// framingOf returns the framing of a response body with header h.
func framingOf(h http.Header) framing {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		return framingSSE
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines":
		return framingNDJSON
	}
	return framingWhole
}

// eventEnds returns the offsets in body just past the end of each event.
// For NDJSON, an event is a line that is not blank, and a last line
// without a line break counts.
func eventEnds(body []byte, fr framing) []int {
	switch fr {
	case framingSSE:
		var s sse.Scanner
		ends := s.Feed(body)
		if s.Flush() {
			ends = append(ends, len(body))
		}
		return ends
	case framingNDJSON:
		var ends []int
		for from := 0; from < len(body); {
			end := len(body)
			if i := bytes.IndexByte(body[from:], '\n'); i >= 0 {
				end = from + i + 1
			}
			if len(bytes.Trim(body[from:end], " \t\r\n")) > 0 {
				ends = append(ends, end)
			}
			from = end
		}
		return ends
	}
	if len(body) == 0 {
		return nil
	}
	return []int{len(body)}
}

// afterEvents returns the length of the first k events of body, or of all
// of it if it has fewer; a negative k means half the events.
func afterEvents(body []byte, fr framing, k int) int {
	ends := eventEnds(body, fr)
	if k < 0 {
		k = len(ends) / 2
	}
	switch {
	case k == 0:
		return 0
	case k > len(ends):
		return len(body)
	}
	return ends[k-1]
}

// garbleRange returns the bytes of body that a malformed fault removes:
// the second half of the JSON payload of the middle event among those
// with one (the first data line of an SSE event, an NDJSON line), or of
// the whole body. ok is false when there is nothing to garble.
func garbleRange(body []byte, fr framing) (from, to int, ok bool) {
	type payload struct{ from, to int }
	var found []payload
	switch fr {
	case framingSSE:
		start := 0
		for _, end := range eventEnds(body, fr) {
			if from, to, ok := dataPayload(body[start:end]); ok {
				found = append(found, payload{start + from, start + to})
			}
			start = end
		}
	case framingNDJSON:
		start := 0
		for _, end := range eventEnds(body, fr) {
			seg := body[start:end]
			value := bytes.Trim(seg, " \t\r\n")
			from := start + len(seg) - len(bytes.TrimLeft(seg, " \t\r\n"))
			found = append(found, payload{from, from + len(value)})
			start = end
		}
	default:
		found = append(found, payload{0, len(body)})
	}
	var cands []payload
	for _, p := range found {
		if p.to-p.from >= 2 {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return 0, 0, false
	}
	p := cands[len(cands)/2]
	return p.from + (p.to-p.from)/2, p.to, true
}

// dataPayload returns where the value of the first data line of an SSE
// event is, without the space after the colon and the line break.
func dataPayload(ev []byte) (from, to int, ok bool) {
	for i := 0; i < len(ev); {
		end := len(ev)
		if j := bytes.IndexAny(ev[i:], "\r\n"); j >= 0 {
			end = i + j
		}
		if v, found := bytes.CutPrefix(ev[i:end], []byte("data:")); found {
			from := end - len(v)
			if len(v) > 0 && v[0] == ' ' {
				from++
			}
			return from, end, true
		}
		i = end + 1
		if end+1 < len(ev) && ev[end] == '\r' && ev[end+1] == '\n' {
			i++
		}
	}
	return 0, 0, false
}

// cutOut returns chunks without the body bytes [from, to), keeping the
// other bytes in their chunks and dropping chunks left empty. The result
// shares no memory with chunks.
func cutOut(chunks []exchange.Chunk, from, to int) []exchange.Chunk {
	var out []exchange.Chunk
	pos := 0
	for _, c := range chunks {
		start, end := pos, pos+len(c.Data)
		pos = end
		var d []byte
		if start < from {
			d = append(d, c.Data[:min(end, from)-start]...)
		}
		if end > to {
			d = append(d, c.Data[max(start, to)-start:]...)
		}
		if len(d) > 0 {
			out = append(out, exchange.Chunk{At: c.At, Data: d})
		}
	}
	return out
}

// bodyLen returns the length of the body made of chunks.
func bodyLen(chunks []exchange.Chunk) int {
	n := 0
	for _, c := range chunks {
		n += len(c.Data)
	}
	return n
}

// body is a replayed response body. Each Read returns at most one recorded
// chunk, once its time has come, and then the end: io.EOF, an error, or
// a wait for the request to end.
type body struct {
	ctx      context.Context // the request's
	s        *Server
	number   int       // the exchange's
	start    time.Time // when the request arrived
	chunks   []exchange.Chunk
	i        int   // the chunk to return next
	off      int   // bytes of chunks[i] returned
	sent     int   // bytes returned
	endErr   error // returned after the chunks; nil for io.EOF
	endHangs bool  // after the chunks, wait for the request to end

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

func (b *body) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, errBodyClosed
	default:
	}
	for b.i < len(b.chunks) && b.off == len(b.chunks[b.i].Data) {
		b.i++
		b.off = 0
	}
	if h := b.s.hooks.read; h != nil {
		if err := h(b.ctx, b.number, b.sent); err != nil {
			return 0, err
		}
	}
	if b.i == len(b.chunks) {
		switch {
		case b.endHangs:
			if h := b.s.hooks.wait; h != nil {
				h(b.number)
			}
			select {
			case <-b.ctx.Done():
				return 0, fmt.Errorf("replaying llm #%d: the agent left this response when recording: %w", b.number, context.Cause(b.ctx))
			case <-b.closed:
				return 0, errBodyClosed
			}
		case b.endErr != nil:
			return 0, b.endErr
		}
		return 0, io.EOF
	}
	c := b.chunks[b.i]
	if b.off == 0 {
		if err := b.s.sleepUntil(b.ctx, b.closed, b.number, b.start, c.At); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.Data[b.off:])
	b.off += n
	b.sent += n
	return n, nil
}

func (b *body) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

// sleepUntil waits until at after start, scaled by the speed, or until ctx
// ends or closed is closed, for exchange number. With no speed set it
// returns at once.
func (s *Server) sleepUntil(ctx context.Context, closed <-chan struct{}, number int, start time.Time, at time.Duration) error {
	if s.speed <= 0 || at <= 0 {
		return nil
	}
	if s.hooks.sleep != nil {
		s.hooks.sleep(number)
	}
	scaled := float64(at) / s.speed
	if scaled > math.MaxInt64 {
		scaled = math.MaxInt64
	}
	d := time.Until(start.Add(time.Duration(scaled)))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-closed:
		return errBodyClosed
	}
}
