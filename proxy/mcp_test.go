package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/proxy"
)

// TestAddMCP: an MCP server's route forwards the agent's requests, query
// and all, to the server, records them as the server's exchanges, and
// refuses requests outside its secret.
func TestAddMCP(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s-1")
		fmt.Fprintf(w, `{"path":%q,"query":%q,"auth":%q,"got":%s}`, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), body)
	}))
	defer upstream.Close()
	rec := newFakeRecorder()
	tap := newTap(t, proxy.Config{Recorder: rec})
	local, err := tap.AddMCP(2, upstream.URL+"/mcp?tenant=a")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(local)
	if u.Hostname() != "127.0.0.1" || !strings.HasSuffix(u.Path, "/mcp") || u.RawQuery != "tenant=a" {
		t.Fatalf("local URL %s; want a loopback URL ending /mcp?tenant=a", local)
	}
	req, _ := http.NewRequest("POST", local, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer sk-mcp-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"path":"/mcp","query":"tenant=a","auth":"Bearer sk-mcp-0123456789abcdef","got":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`; string(got) != want {
		t.Errorf("the agent got %s\nwant %s", got, want)
	}
	xs := rec.finished(t, 1)
	x := xs[0]
	if x.Route != exchange.RouteMCP || x.MCPServer != 2 || x.Method != "POST" || x.URL != upstream.URL+"/mcp?tenant=a" {
		t.Errorf("recorded route %q server %d %s %s; want mcp, server 2, POST %s/mcp?tenant=a", x.Route, x.MCPServer, x.Method, x.URL, upstream.URL)
	}
	if x.ResponseHeaders.Get("Mcp-Session-Id") != "s-1" || string(x.Body()) != string(got) {
		t.Errorf("recorded response %v %s; want the server's", x.ResponseHeaders, x.Body())
	}

	// Outside the secret: refused, not forwarded.
	outside := "http://" + u.Host + "/mcp?tenant=a"
	resp, err = http.Post(outside, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a request outside the secret got %d; want 404", resp.StatusCode)
	}

	// No variable is set for it.
	env, _, err := tap.Wire(nil, proxy.Routing{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "=") || strings.Contains(kv, u.Host) && !strings.HasPrefix(kv, "NO_PROXY") && !strings.HasPrefix(kv, "no_proxy") {
			t.Errorf("the agent's environment has %q; an MCP route sets no variable", kv)
		}
	}

	for _, bad := range []string{"ftp://x/mcp", "http://u:p@x/mcp", "http://x/mcp#frag"} {
		if _, err := tap.AddMCP(3, bad); err == nil {
			t.Errorf("AddMCP(%q) succeeded; want it refused", bad)
		}
	}
	if _, err := tap.AddMCP(0, upstream.URL); err == nil {
		t.Errorf("AddMCP(0, ...) succeeded; want server numbers from 1")
	}
}

// TestAddMCPEndpoint: a server of the HTTP+SSE transport names the URL
// of its messages in its stream's endpoint event; the agent gets it on
// the route, so that its messages come through the tap, and the
// recording keeps the server's event.
func TestAddMCPEndpoint(t *testing.T) {
	for _, c := range []struct{ name, endpoint string }{
		{"path", "/messages?sessionId=7"},
		{"url", "SELF/messages?sessionId=7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			posted := make(chan string, 1)
			var self string
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.Method {
				case "GET":
					w.Header().Set("Content-Type", "text/event-stream")
					endpoint := strings.Replace(c.endpoint, "SELF", self, 1)
					// The event in two writes: the route holds it until whole.
					fmt.Fprintf(w, "event: endpoint\n")
					w.(http.Flusher).Flush()
					fmt.Fprintf(w, "data: %s\n\n", endpoint)
					w.(http.Flusher).Flush()
					fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
				case "POST":
					b, _ := io.ReadAll(r.Body)
					posted <- r.URL.String() + " " + string(b)
					w.WriteHeader(http.StatusAccepted)
				}
			}))
			defer upstream.Close()
			self = upstream.URL
			rec := newFakeRecorder()
			tap := newTap(t, proxy.Config{Recorder: rec})
			local, err := tap.AddMCP(1, upstream.URL+"/sse")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Get(local)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			var endpoint string
			for endpoint == "" {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading the stream: %v", err)
				}
				if v, ok := strings.CutPrefix(line, "data: "); ok {
					endpoint = strings.TrimSpace(v)
				}
			}
			rest, _ := io.ReadAll(br)
			resp.Body.Close()
			if !strings.Contains(string(rest), `"id":1`) {
				t.Errorf("the rest of the stream %q; want the message event", rest)
			}
			target, err := url.Parse(local)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := url.Parse(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			post := target.ResolveReference(ref)
			if post.Host != target.Host {
				t.Fatalf("the agent was given endpoint %s; want one on the route %s", endpoint, target.Host)
			}
			resp, err = http.Post(post.String(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("POST to the endpoint got %d; want the server's 202", resp.StatusCode)
			}
			if got := <-posted; got != `/messages?sessionId=7 {"jsonrpc":"2.0","id":2,"method":"ping"}` {
				t.Errorf("the server got %q", got)
			}
			xs := rec.finished(t, 2)
			wantEndpoint := strings.Replace(c.endpoint, "SELF", self, 1)
			if body := string(xs[0].Body()); !strings.Contains(body, "data: "+wantEndpoint+"\n") {
				t.Errorf("recorded stream %q; want the server's endpoint %s", body, wantEndpoint)
			}
			if xs[1].URL != upstream.URL+"/messages?sessionId=7" || xs[1].MCPServer != 1 {
				t.Errorf("recorded POST %s of server %d; want %s/messages?sessionId=7 of server 1", xs[1].URL, xs[1].MCPServer, upstream.URL)
			}
		})
	}
}

// TestSameRunPassedOn: a request through the forward proxy for a
// loopback URL under the tap's secret, a route of the same run served
// by another tap (an MCP route of the recording process, a replay's
// stand-in), is passed there unrecorded, even when the tap's transport
// would not reach it; one without the secret is an ordinary exchange.
func TestSameRunPassedOn(t *testing.T) {
	secret := proxy.NewSecret()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "reached "+r.URL.Path)
	}))
	defer upstream.Close()
	other := newTap(t, proxy.Config{Secret: secret})
	local, err := other.AddMCP(1, upstream.URL+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	rec := newFakeRecorder()
	refusing := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("this transport reaches nothing") })
	ca := newCA(t)
	tap := newTap(t, proxy.Config{Secret: secret, Recorder: rec, Transport: refusing, CA: ca})
	client, _ := viaProxy(false)(t, tap, ca, "", "")
	resp, err := client.Post(local, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "reached /mcp" {
		t.Errorf("through the proxy to the same run's route: %d %q; want it passed on", resp.StatusCode, b)
	}
	resp, err = client.Get(upstream.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a loopback URL without the secret got %d; want the tap's transport to have it (502)", resp.StatusCode)
	}
	xs := rec.finished(t, 1)
	if xs[0].URL != upstream.URL+"/other" {
		t.Errorf("recorded %s; want only the request without the secret", xs[0].URL)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
