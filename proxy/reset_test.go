package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/proxy"
)

// transportFunc is an http.RoundTripper made of a function.
type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resetBody returns first, then waits until the client has received it and
// fails with an error wrapping proxy.ErrReset.
type resetBody struct {
	r     *http.Request
	first string
	ack   *ackStream
	sent  bool
}

func (b *resetBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, b.first), nil
	}
	if !b.ack.waitReceived(b.r.Context(), len(b.first)) {
		return 0, errors.New("the client did not receive the first event")
	}
	return 0, fmt.Errorf("injected: %w", proxy.ErrReset)
}

func (b *resetBody) Close() error { return nil }

// TestTransportReset: a response body whose Read fails with ErrReset has
// the agent's connection reset after the bytes read so far, with a TCP RST
// on HTTP/1 and a stream reset on HTTP/2; the exchange is recorded as cut,
// and the tap serves the next request.
func TestTransportReset(t *testing.T) {
	first := "data: {\"delta\":\"Hel\"}\n\n"
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			ack := newAckStream()
			calls := 0
			tr := transportFunc(func(r *http.Request) (*http.Response, error) {
				calls++ // the client sends its requests one after the other
				resp := &http.Response{
					Status:     "200 OK",
					StatusCode: http.StatusOK,
					Proto:      "HTTP/1.1",
					ProtoMajor: 1,
					ProtoMinor: 1,
					Header:     http.Header{"Content-Type": {"text/event-stream"}},
					Request:    r,
				}
				if calls == 1 {
					resp.Body, resp.ContentLength = &resetBody{r: r, first: first, ack: ack}, -1
				} else {
					resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader("still here")), int64(len("still here"))
				}
				return resp, nil
			})
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Errorf("the upstream got %s %s; the Transport should have answered", r.Method, r.URL)
			})
			s := setup(t, rt, upstream, "/v1/chat", proxy.Config{Transport: tr})
			resp, err := s.client.Get(s.url)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAcking(resp.Body, ack.received)
			resp.Body.Close()
			if string(got) != first {
				t.Errorf("client got %q before the reset, want %q", got, first)
			}
			h2 := resp.ProtoMajor == 2
			switch {
			case err == nil:
				t.Errorf("the client read the reset stream to a clean end; want an error")
			case !h2 && !errors.Is(err, syscall.ECONNRESET):
				t.Errorf("the client's read failed with %v, want a connection reset (ECONNRESET)", err)
			}
			x := s.rec.finished(t, 1)[0]
			if !strings.Contains(x.Error, proxy.ErrReset.Error()) || string(x.Body()) != first {
				t.Errorf("recorded body %q, error %q; want %q and %q", x.Body(), x.Error, first, proxy.ErrReset)
			}
			if x.End != exchange.EndCut {
				t.Errorf("recorded end %v, want cut", x.End)
			}

			resp, err = s.client.Get(s.url)
			if err != nil {
				t.Fatalf("the tap no longer serves: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "still here" {
				t.Errorf("after the reset, got %q, %v; want %q", body, err, "still here")
			}
		})
	}
}
