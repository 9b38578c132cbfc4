package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/hop"
)

// target is where a request goes and how its exchange is recorded.
type target struct {
	url     *url.URL // the upstream URL
	host    string   // the Host header to send; "" for url.Host
	route   string   // exchange.RouteProxy, exchange.RouteBaseURL or exchange.RouteMCP
	varName string   // the variable of a RouteBaseURL route
	mcp     *route   // the route of a RouteMCP exchange
	// passOn is set for a request for a route of the same run served
	// elsewhere (see serveTarget): sent by a direct connection, and not
	// recorded.
	passOn bool
}

// errClientGone is why an exchange ended when the agent closed its
// connection or cancelled its request.
var errClientGone = errors.New("the client went away")

// readSize is the most a single read of a response body asks for; reads
// return what has arrived, so a stream is forwarded in the pieces in which
// it arrives.
const readSize = 32 << 10

// bufPool holds the buffers that response bodies are read into.
var bufPool = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// isUpgrade reports whether the request asks to switch protocols
// (WebSocket, h2c).
func isUpgrade(h http.Header) bool {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if strings.EqualFold(textproto.TrimString(sf), "upgrade") {
				return true
			}
		}
	}
	return false
}

// serveExchange forwards r to tg and streams the response back, recording
// the exchange.
func (t *Tap) serveExchange(w http.ResponseWriter, r *http.Request, tg target) {
	start := time.Now()
	if !t.begin() {
		http.Error(w, "acptap: "+ErrClosed.Error(), http.StatusServiceUnavailable)
		return
	}
	defer t.active.Done()
	if isWebSocket(r) && !tg.passOn {
		t.serveWebSocket(w, r, tg, start)
		return
	}
	var rec *record
	if !tg.passOn {
		rec = t.newRecord(start, r.Method, tg)
	}
	if rec != nil {
		start = rec.start // the Recorder's time for the exchange's place
	}

	upgrade := r.Method == http.MethodConnect || isUpgrade(r.Header)
	trailers := acceptsTrailers(r.Header)
	// The request's header is the handler's to change; it becomes the
	// upstream request's, and the recording's.
	header := r.Header
	hop.RemoveHeaders(header)
	body, err := readBody(r)
	rec.request(header, body)
	if err != nil {
		t.refuse(w, r, tg, rec, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
		return
	}
	if upgrade {
		t.refuse(w, r, tg, rec, http.StatusNotImplemented, errors.New("protocol upgrades other than WebSocket, and tunnels within tunnels, are not supported by the tap"))
		return
	}

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(t.ctx, func() { cancel(ErrClosed) })()
	transport := t.transport
	if tg.passOn {
		transport = sameRunTransport
	}
	resp, err := transport.RoundTrip(upstreamRequest(ctx, r.Method, tg, header, trailers, body))
	if err != nil {
		err = t.why(r, err)
		rec.end(endOf(err, exchange.EndUpstreamFailed), fmt.Errorf("no response: %w", err))
		t.notice(r.Method, tg.url, fmt.Errorf("no response: %w", err))
		if errors.Is(err, errClientGone) {
			// The agent left: a clean return would hand it an empty 200
			// should it still be reading.
			panic(http.ErrAbortHandler)
		}
		http.Error(w, fmt.Sprintf("acptap: no response from %s: %v", tg.url.Host, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	hop.RemoveHeaders(resp.Header)
	rec.response(resp, time.Since(start))

	t.forwardResponse(w, r, tg, rec, resp, start)
}

// refuse answers a request the tap does not forward with status and err,
// and records and notices why.
func (t *Tap) refuse(w http.ResponseWriter, r *http.Request, tg target, rec *record, status int, err error) {
	rec.end(exchange.EndRefused, err)
	t.notice(r.Method, tg.url, err)
	http.Error(w, "acptap: "+err.Error(), status)
}

// forwardResponse writes resp to the agent, flushing each piece as it
// arrives and recording it after the agent has it, then its trailers, and
// ends the exchange's record with how the response ended. start is the
// exchange's time 0.
func (t *Tap) forwardResponse(w http.ResponseWriter, r *http.Request, tg target, rec *record, resp *http.Response, start time.Time) {
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	if resp.ContentLength < 0 {
		// A stream: let the agent see the headers before the first event,
		// however long that takes. A body of known length follows its
		// headers closely and goes out with them.
		rc.Flush()
	}

	var endpoint *endpointRewriter
	if tg.mcp != nil && r.Method == http.MethodGet && isEventStream(resp.Header) {
		endpoint = &endpointRewriter{rt: tg.mcp}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var total int64
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			at := time.Since(start)
			out := buf[:n]
			if endpoint != nil {
				out = endpoint.rewrite(out)
			}
			var werr error
			if len(out) > 0 {
				_, werr = w.Write(out)
				if werr == nil {
					werr = rc.Flush()
				}
			}
			// Kept after forwarding, so that the copy comes after the
			// agent has the bytes.
			rec.chunk(buf[:n], at)
			if werr != nil {
				cause := t.interrupted(r)
				if cause != ErrClosed {
					cause = fmt.Errorf("%w: %w", errClientGone, werr)
				}
				err := fmt.Errorf("response cut after %d bytes: %w", total, cause)
				rec.end(endOf(cause, exchange.EndClientGone), err)
				t.notice(r.Method, tg.url, err)
				return
			}
			total += int64(n)
		}
		if rerr != nil && endpoint != nil {
			// What was held back for an endpoint event that never ended.
			if held := endpoint.flush(); len(held) > 0 {
				w.Write(held)
				rc.Flush()
			}
		}
		if rerr == io.EOF {
			// Complete, even if the agent has left meanwhile: it has every
			// byte (agents often stop reading at the last event).
			break
		}
		if rerr != nil {
			cause := t.why(r, rerr)
			err := fmt.Errorf("response cut after %d bytes: %w", total, cause)
			rec.end(endOf(cause, exchange.EndCut), err)
			t.notice(r.Method, tg.url, err)
			if errors.Is(rerr, ErrReset) && !errors.Is(cause, errClientGone) {
				resetConn(w)
				return
			}
			// A clean return would end the response as if complete; the
			// agent must see a broken stream, as it would without the tap.
			panic(http.ErrAbortHandler)
		}
	}
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
	rec.end(exchange.EndComplete, nil)
}

// resetConn resets the agent's connection of w, as a Transport asks with
// ErrReset: it takes the connection over and closes it with a TCP RST,
// discarding what TLS would send on close. A connection that cannot be
// taken over, an HTTP/2 one, has the response aborted, which resets its
// stream.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	tc := tcpConn(conn)
	if tc == nil {
		conn.Close()
		return
	}
	tc.SetLinger(0)
	tc.Close()
}

// tcpConn returns the TCP connection under c, through TLS and CONNECT
// tunnels, or nil if there is none.
func tcpConn(c net.Conn) *net.TCPConn {
	for {
		switch v := c.(type) {
		case *net.TCPConn:
			return v
		case *tls.Conn:
			c = v.NetConn()
		case *tunnelConn:
			c = v.Conn
		default:
			return nil
		}
	}
}

// isEventStream reports whether a response's Content-Type is
// text/event-stream.
func isEventStream(h http.Header) bool {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// acceptsTrailers reports whether the client's TE header accepts
// trailers, which is the one TE value that is forwarded.
func acceptsTrailers(h http.Header) bool {
	for _, v := range h.Values("Te") {
		for tv := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(tv), "trailers") {
				return true
			}
		}
	}
	return false
}

// upstreamRequest returns the request to send upstream: the target URL,
// the client's method, header (without hop-by-hop headers) and body as
// sent, with the route in its context (exchange.ContextWithRoute). header
// is not changed.
func upstreamRequest(ctx context.Context, method string, tg target, header http.Header, trailers bool, body []byte) *http.Request {
	out := &http.Request{
		Method:        method,
		URL:           tg.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Host:          tg.host,
		ContentLength: int64(len(body)),
	}
	if _, ok := header["User-Agent"]; !ok || trailers {
		out.Header = header.Clone()
		if !ok {
			// Keep the Transport from adding its own.
			out.Header["User-Agent"] = []string{""}
		}
		if trailers {
			out.Header.Set("Te", "trailers")
		}
	}
	if len(body) == 0 {
		out.Body = http.NoBody
		out.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	} else {
		out.Body = io.NopCloser(bytes.NewReader(body))
		// Lets the Transport send the request again on a fresh
		// connection when a kept-alive one turns out dead.
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return out.WithContext(exchange.ContextWithRoute(ctx, tg.route, tg.varName))
}

// interrupted returns why the exchange of r cannot go on, whatever the
// upstream does: ErrClosed, errClientGone, or nil if neither. Close cancels
// the tap's context before it closes connections, so that what it ends is
// put down to it.
func (t *Tap) interrupted(r *http.Request) error {
	switch {
	case t.ctx.Err() != nil:
		return ErrClosed
	case r.Context().Err() != nil:
		return errClientGone
	}
	return nil
}

// endOf returns how an exchange that failed with err ended: the tap
// closed, the client went away, or else otherwise.
func endOf(err error, otherwise exchange.End) exchange.End {
	switch {
	case errors.Is(err, ErrClosed):
		return exchange.EndTapClosed
	case errors.Is(err, errClientGone):
		return exchange.EndClientGone
	}
	return otherwise
}

// why says why the upstream request of r failed with err: the tap closed,
// the client went away, or err itself.
func (t *Tap) why(r *http.Request, err error) error {
	switch cause := t.interrupted(r); cause {
	case nil:
		return err
	case errClientGone:
		return fmt.Errorf("%w: %w", errClientGone, err)
	default:
		return cause
	}
}

// notice logs an exchange that failed for a reason the agent's user may
// want to know: not the tap closing, nor the agent cancelling a request.
// The URL is logged without its query, which may hold a key.
func (t *Tap) notice(method string, u *url.URL, err error) {
	if errors.Is(err, ErrClosed) || errors.Is(err, errClientGone) {
		return
	}
	t.logf("http tap: %s %s://%s%s: %v", method, u.Scheme, u.Host, u.EscapedPath(), err)
}

// readBody reads a request's body whole, into one buffer of the length
// it declares (up to maxPresize, then grown) rather than one grown as it comes: a
// conversation's requests are large, and growing was a tenth of a long
// replay's time.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == http.NoBody {
		// A GET's: nothing to read, nor a buffer to make for it. Empty,
		// not nil, as a body read whole is recorded.
		return []byte{}, nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0), maxPresize)+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}
