package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// checkStillServes makes a request through rt on tap to a healthy upstream
// and checks that it is answered and recorded as the n-th exchange.
func checkStillServes(t *testing.T, tap *proxy.Tap, ca *proxy.CA, upCA *testCA, rt route, rec *fakeRecorder, n int) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "still here") })
	var srv *httptest.Server
	if rt.tls {
		srv = upCA.startTLS(t, h, false)
	} else {
		srv = httptest.NewServer(h)
		t.Cleanup(srv.Close)
	}
	client, u := rt.via(t, tap, ca, srv.URL, "/v1/ok")
	resp, err := client.Get(u)
	if err != nil {
		t.Fatalf("the tap no longer serves: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "still here" {
		t.Fatalf("the tap no longer serves: got %s %q", resp.Status, body)
	}
	if x := rec.finished(t, n)[n-1]; x.Error != "" || x.Status != http.StatusOK || x.End != exchange.EndComplete {
		t.Errorf("the next exchange was recorded with status %d, end %v, error %q; want 200, complete and no error", x.Status, x.End, x.Error)
	}
}

// TestUpstreamFailures: an unreachable upstream and one whose certificate
// the tap does not trust are answered 502 with the cause, recorded with an
// error, and the tap serves the next request.
func TestUpstreamFailures(t *testing.T) {
	// httptest's own certificate, which neither the system nor the tap trust.
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the untrusted upstream got a request")
	}))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	untrusted.StartTLS()
	defer untrusted.Close()
	// A certificate of a trusted CA, for another host.
	upCA := newTestCA(t)
	wrongHost := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the upstream with a certificate for another host got a request")
	}))
	wrongHost.Config.ErrorLog = log.New(io.Discard, "", 0)
	wrongHost.TLS = &tls.Config{Certificates: []tls.Certificate{upCA.serverCert(t, "api.example.com")}}
	wrongHost.StartTLS()
	defer wrongHost.Close()
	cases := []struct {
		name      string
		tls       bool
		base      func(t *testing.T) string
		wantCause string
	}{
		{"down/http", false, func(t *testing.T) string { return "http://" + deadAddr(t) }, "connection refused"},
		{"down/https", true, func(t *testing.T) string { return "https://" + deadAddr(t) }, "connection refused"},
		{"untrusted-cert", true, func(*testing.T) string { return untrusted.URL }, "certificate signed by unknown authority"},
		{"wrong-host-cert", true, func(*testing.T) string { return wrongHost.URL }, "cannot validate certificate for 127.0.0.1"},
	}
	for _, c := range cases {
		for _, rt := range routes {
			if rt.tls != c.tls {
				continue
			}
			t.Run(c.name+"/"+rt.name, func(t *testing.T) {
				ca := newCA(t)
				rec := newFakeRecorder()
				tap := newTap(t, proxy.Config{CA: ca, Recorder: rec, UpstreamCAs: upCA.pool})
				base := c.base(t)
				client, u := rt.via(t, tap, ca, base, "/v1/chat/completions")
				resp, err := client.Post(u, "application/json", strings.NewReader(`{}`))
				if err != nil {
					t.Fatalf("the client got %v, want a 502 response", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				host := strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
				if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), host) || !strings.Contains(string(body), c.wantCause) {
					t.Errorf("client got %s %q; want 502 naming %s and %q", resp.Status, body, host, c.wantCause)
				}
				x := rec.finished(t, 1)[0]
				if x.Status != 0 || !strings.Contains(x.Error, "no response") || !strings.Contains(x.Error, c.wantCause) {
					t.Errorf("recorded status %d, error %q; want 0 and a %q error", x.Status, x.Error, c.wantCause)
				}
				if x.End != exchange.EndUpstreamFailed {
					t.Errorf("recorded end %v, want upstream-failed", x.End)
				}
				if string(x.RequestBody) != "{}" {
					t.Errorf("recorded request body %q, want {}", x.RequestBody)
				}
				checkStillServes(t, tap, ca, upCA, rt, rec, 2)
			})
		}
	}
}

// TestResetMidStream: an upstream that breaks off a stream leaves the
// client with a broken stream, not a clean end, and the exchange recorded
// with what arrived and an error.
func TestResetMidStream(t *testing.T) {
	first := "data: {\"delta\":\"Hel\"}\n\n"
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			ack := newAckStream()
			h := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, first)
				w.(http.Flusher).Flush()
				if !ack.waitReceived(r.Context(), len(first)) {
					t.Errorf("the client did not receive the first event")
				}
				panic(http.ErrAbortHandler) // the server drops the connection or resets the stream
			}
			upCA := newTestCA(t)
			ca := newCA(t)
			rec := newFakeRecorder()
			tap := newTap(t, proxy.Config{CA: ca, Recorder: rec, UpstreamCAs: upCA.pool})
			var srv *httptest.Server
			if rt.tls {
				srv = upCA.startTLS(t, http.HandlerFunc(h), false)
			} else {
				srv = httptest.NewServer(http.HandlerFunc(h))
				defer srv.Close()
			}
			client, u := rt.via(t, tap, ca, srv.URL, "/v1/chat")
			resp, err := client.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAcking(resp.Body, ack.received)
			resp.Body.Close()
			if err == nil {
				t.Errorf("the client read the cut stream to a clean end; want an error")
			}
			if string(got) != first {
				t.Errorf("client got %q before the cut, want %q", got, first)
			}
			x := rec.finished(t, 1)[0]
			if cut := fmt.Sprintf("response cut after %d bytes", len(first)); !strings.Contains(x.Error, cut) || string(x.Body()) != first || x.Status != http.StatusOK {
				t.Errorf("recorded status %d, body %q, error %q; want 200, %q and %q", x.Status, x.Body(), x.Error, first, cut)
			}
			if x.End != exchange.EndCut {
				t.Errorf("recorded end %v, want cut", x.End)
			}
			checkStillServes(t, tap, ca, upCA, rt, rec, 2)
		})
	}
}

// TestClientGoesAway: when the client leaves mid-stream, the tap cancels
// the upstream request and records why the exchange ended.
func TestClientGoesAway(t *testing.T) {
	first := "data: 1\n\n"
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			cancelled := make(chan bool, 1)
			h := func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, first)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					cancelled <- true
				case <-time.After(hangGuard):
					cancelled <- false
				}
				// Drop the stream, as a server does whose client is gone;
				// returning would end it cleanly.
				panic(http.ErrAbortHandler)
			}
			s := setup(t, rt, http.HandlerFunc(h), "/v1/chat", proxy.Config{})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(first))
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatal(err)
			}
			cancel()
			resp.Body.Close()
			if !<-cancelled {
				t.Errorf("the upstream request was not cancelled after the client went away")
			}
			x := s.rec.finished(t, 1)[0]
			if !strings.Contains(x.Error, "the client went away") || string(x.Body()) != first {
				t.Errorf("recorded body %q, error %q; want %q and the client going away", x.Body(), x.Error, first)
			}
			if x.End != exchange.EndClientGone {
				t.Errorf("recorded end %v, want client-gone", x.End)
			}
		})
	}
}

// TestCloseInFlight: Close ends the exchanges in flight, has them recorded
// with an error before it returns, and is idempotent; the closed tap
// refuses new routes and environments.
func TestCloseInFlight(t *testing.T) {
	for _, rt := range []route{routes[0], routes[4]} {
		t.Run(rt.name, func(t *testing.T) {
			first := "data: 1\n\n"
			upstreamDone := make(chan error, 1)
			h := func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, first)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(hangGuard):
				}
				upstreamDone <- r.Context().Err()
				panic(http.ErrAbortHandler) // drop the stream, as a server does whose client is gone
			}
			s := setup(t, rt, http.HandlerFunc(h), "/v1/chat", proxy.Config{})
			resp, err := s.client.Get(s.url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, len(first))
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatal(err)
			}
			if err := s.tap.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			finals := endedCalls(s.rec.all())
			if len(finals) != 1 {
				t.Fatalf("after Close, %d exchanges are recorded as finished, want 1", len(finals))
			}
			x := s.rec.finished(t, 1)[0]
			if !strings.Contains(x.Error, proxy.ErrClosed.Error()) || string(x.Body()) != first {
				t.Errorf("recorded body %q, error %q; want %q and %q", x.Body(), x.Error, first, proxy.ErrClosed)
			}
			if x.End != exchange.EndTapClosed {
				t.Errorf("recorded end %v, want tap-closed", x.End)
			}
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Errorf("the client read the stream to a clean end after Close; want an error")
			}
			if err := <-upstreamDone; err == nil {
				t.Errorf("the upstream request was not cancelled by Close")
			}
			if err := s.tap.Close(); err != nil {
				t.Errorf("second Close: %v, want nil", err)
			}
			if _, err := s.tap.AddBaseURL("X", "http://127.0.0.1:1"); !errors.Is(err, proxy.ErrClosed) {
				t.Errorf("AddBaseURL after Close: %v, want ErrClosed", err)
			}
			if _, err := s.tap.Env(nil, proxy.EnvOptions{}); !errors.Is(err, proxy.ErrClosed) {
				t.Errorf("Env after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestIncompleteFirst: the exchange is recorded as incomplete, with its
// request, before the upstream answers, so that a crash leaves the request
// in the recording.
func TestIncompleteFirst(t *testing.T) {
	for _, rt := range []route{routes[0], routes[4]} {
		t.Run(rt.name, func(t *testing.T) {
			var rec *fakeRecorder
			h := func(w http.ResponseWriter, r *http.Request) {
				rec.waitFor(t, "the exchange in flight", func(calls []call) bool { return len(calls) > 0 })
				io.WriteString(w, "answer")
			}
			rec = newFakeRecorder()
			s := setup(t, rt, http.HandlerFunc(h), "/v1/chat", proxy.Config{Recorder: rec})
			resp, err := s.client.Post(s.url, "application/json", strings.NewReader(`{"q":1}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			rec.finished(t, 1)
			calls := rec.all()
			if len(calls) != 2 || calls[0].ID != calls[1].ID || calls[0].Ended || !calls[1].Ended {
				t.Fatalf("recorded %d calls; want Started and Ended of one exchange", len(calls))
			}
			if calls[0].At != calls[1].At {
				t.Errorf("the two calls are at %v and %v, want the request's start in both", calls[0].At, calls[1].At)
			}
			x := decode(t, calls[0])
			if x.Status != 0 || len(x.Chunks) != 0 || string(x.RequestBody) != `{"q":1}` || x.URL != s.upstream {
				t.Errorf("incomplete exchange: %s, status %d, %d chunks, request body %q; want %s, 0, 0, {\"q\":1}", x.URL, x.Status, len(x.Chunks), x.RequestBody, s.upstream)
			}
		})
	}
}

// TestGetBodyRecordedEmpty: a request without a body is recorded with an
// empty one, not with none, as the tap always recorded it.
func TestGetBodyRecordedEmpty(t *testing.T) {
	rec := newFakeRecorder()
	s := setup(t, routes[4], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), "/v1/models", proxy.Config{Recorder: rec})
	resp, err := s.client.Get(s.url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	rec.finished(t, 1)
	for _, c := range rec.all() {
		if !bytes.Contains(c.Data, []byte(`"request_body":""`)) {
			t.Errorf("recorded %s; want \"request_body\":\"\"", c.Data)
		}
	}
}

// TestIncompleteWhileStreaming: a stream that has sent its first bytes and
// goes on is recorded in flight, with its request and without its
// response, while it streams: the recording waits for no end.
func TestIncompleteWhileStreaming(t *testing.T) {
	for _, rt := range []route{routes[0], routes[4]} {
		t.Run(rt.name, func(t *testing.T) {
			var rec *fakeRecorder
			h := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: 1\n\n")
				w.(http.Flusher).Flush()
				rec.waitFor(t, "the exchange in flight", func(calls []call) bool { return len(calls) > 0 })
				io.WriteString(w, "data: 2\n\n")
			}
			rec = newFakeRecorder()
			s := setup(t, rt, http.HandlerFunc(h), "/v1/chat", proxy.Config{Recorder: rec})
			resp, err := s.client.Post(s.url, "application/json", strings.NewReader(`{"q":2}`))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "data: 1\n\ndata: 2\n\n" {
				t.Fatalf("the client read %q, %v; want both events", body, err)
			}
			x := rec.finished(t, 1)[0]
			if string(x.Body()) != string(body) || x.End != exchange.EndComplete {
				t.Errorf("recorded body %q, end %v; want %q, complete", x.Body(), x.End, body)
			}
			calls := rec.all()
			inFlight := decode(t, calls[0])
			if calls[0].Ended || inFlight.Status != 0 || len(inFlight.Chunks) != 0 || string(inFlight.RequestBody) != `{"q":2}` {
				t.Errorf("first call: ended %v, status %d, %d chunks, request body %q; want Started with the request only", calls[0].Ended, inFlight.Status, len(inFlight.Chunks), inFlight.RequestBody)
			}
		})
	}
}

// TestUpgradeRefused: protocol upgrades other than WebSocket are
// answered 501 and recorded.
func TestUpgradeRefused(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the upstream got an upgrade request")
	})
	s := setup(t, routes[4], h, "/v1/realtime", proxy.Config{})
	req, _ := http.NewRequest(http.MethodGet, s.url, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "h2c")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("got %s, want 501", resp.Status)
	}
	if x := s.rec.finished(t, 1)[0]; !strings.Contains(x.Error, "not supported") || x.End != exchange.EndRefused {
		t.Errorf("recorded end %v, error %q; want refused, and an error saying upgrades are not supported", x.End, x.Error)
	}
}

// TestClientLeavesAfterTheFinalEvent: an agent that hangs up as soon as it
// has the final event of a response (before the upstream ends the body)
// leaves a complete exchange, not a failed one; one that leaves earlier
// does not.
func TestClientLeavesAfterTheFinalEvent(t *testing.T) {
	full := testkit.WireSample(t, "resp_text.sse")
	for _, cut := range []struct {
		name     string
		body     []byte
		complete bool
	}{
		{"after response.completed", full, true},
		{"mid-stream", full[:len(full)/2], false},
	} {
		t.Run(cut.name, func(t *testing.T) {
			h := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(cut.body)
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the end of body never comes
				panic(http.ErrAbortHandler)
			}
			s := setup(t, routes[4], http.HandlerFunc(h), "/v1/responses", proxy.Config{})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(`{"model":"m","stream":true}`))
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, len(cut.body))); err != nil {
				t.Fatal(err)
			}
			cancel()
			resp.Body.Close()
			x := s.rec.finished(t, 1)[0]
			if complete := x.Error == ""; complete != cut.complete {
				t.Errorf("recorded error %q; want complete = %v", x.Error, cut.complete)
			}
			if want := map[bool]exchange.End{true: exchange.EndComplete, false: exchange.EndClientGone}[cut.complete]; x.End != want {
				t.Errorf("recorded end %v, want %v", x.End, want)
			}
			if !bytes.Equal(x.Body(), cut.body) {
				t.Errorf("recorded %d body bytes, want the %d forwarded", len(x.Body()), len(cut.body))
			}
		})
	}
}
