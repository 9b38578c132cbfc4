package testagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The agent's own HTTP, which is not its LLM, as real agents have it: a
// server of its own on loopback that it calls (a front end and its
// backend in one process), a lookup at start-up (a package registry for
// its plugins), and telemetry. Every call goes through the agent's HTTP
// client, which honours HTTP_PROXY and NO_PROXY as Node's clients do
// (proxyFromEnv): loopback is proxied unless NO_PROXY names it.

// ownHTTP is the agent's own HTTP: nil when no flag asks for any.
type ownHTTP struct {
	client *http.Client
	log    *log.Logger

	// server is the agent's own server, and base its URL (http://ADDR);
	// nil and "" without --own-server.
	server *http.Server
	base   string
	// token is minted per process: an answer from another process's
	// server, replayed from a recording, has another.
	token string
	calls int // guarded by mu: the calls of the own server so far
	mu    sync.Mutex

	// startup is closed when the start-up calls (--lookup, --telemetry)
	// are done; lookup is then the line the turns show.
	startup chan struct{}
	lookup  string
}

// ownState is the answer of the agent's own server.
type ownState struct {
	Token string `json:"token"`
}

// startOwnHTTP starts what cfg asks for of the agent's own HTTP: its
// server, and the start-up calls, which run in the background until the
// first turn waits for them. It returns nil when cfg asks for nothing.
func startOwnHTTP(cfg *config, getenv func(string) string, logger *log.Logger) (*ownHTTP, error) {
	if cfg.ownServer == "" && cfg.lookup == "" && cfg.telemetry == "" {
		return nil, nil
	}
	client, err := newHTTPClient(cfg, getenv)
	if err != nil {
		return nil, err
	}
	o := &ownHTTP{client: client, log: logger, token: randHex(16), startup: make(chan struct{})}
	if cfg.ownServer != "" {
		ln, err := net.Listen("tcp", cfg.ownServer)
		if err != nil {
			return nil, fmt.Errorf("--own-server: %w", err)
		}
		host, _, _ := net.SplitHostPort(cfg.ownServer)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		o.base = "http://" + net.JoinHostPort(host, port)
		o.server = &http.Server{Handler: http.HandlerFunc(o.serveState), ReadHeaderTimeout: time.Minute}
		go o.server.Serve(ln)
	}
	go func() {
		defer close(o.startup)
		var wg sync.WaitGroup
		if cfg.lookup != "" {
			wg.Go(func() { o.lookup = o.doLookup(cfg.lookup) })
		}
		if cfg.telemetry != "" {
			wg.Go(func() { o.sendTelemetry(cfg.telemetry) })
		}
		wg.Wait()
	}()
	return o, nil
}

// close stops the agent's own server, if it runs one.
func (o *ownHTTP) close() {
	if o != nil && o.server != nil {
		o.server.Close()
	}
}

// serveState answers GET /state with the process's token.
func (o *ownHTTP) serveState(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/state" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ownState{Token: o.token})
}

// beforeTurn does what the agent's own HTTP does before each turn: it
// waits for the start-up calls and shows the lookup's answer, then checks
// the agent's own server, whose failure, or answer from another process,
// breaks the turn visibly. It returns false when the turn cannot go on.
func (a *agent) beforeTurn(ctx context.Context, s *session) bool {
	o := a.own
	if o == nil {
		return true
	}
	select {
	case <-o.startup:
	case <-ctx.Done():
		return false
	}
	if o.lookup != "" {
		a.messageChunk(s, o.lookup+"\n")
	}
	if o.base == "" {
		return true
	}
	if err := o.checkServer(ctx); err != nil {
		a.log.Printf("own server: %v", err)
		a.messageChunk(s, "error: own server: "+err.Error()+"\n")
		return false
	}
	a.messageChunk(s, "own server: ok\n")
	return true
}

// checkServer calls the agent's own server and checks that the answer is
// this process's.
func (o *ownHTTP) checkServer(ctx context.Context) error {
	o.mu.Lock()
	o.calls++
	n := o.calls
	o.mu.Unlock()
	u := o.base + "/state?call=" + strconv.Itoa(n)
	body, err := o.get(ctx, u)
	if err != nil {
		return err
	}
	var st ownState
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("GET %s: the answer %.100q is not JSON: %w", u, body, err)
	}
	if st.Token != o.token {
		return fmt.Errorf("GET %s answered token %q, this process's is %q: a stale answer from another process", u, st.Token, o.token)
	}
	return nil
}

// doLookup makes the start-up lookup of rawURL and returns the line the
// turns show: "lookup: " and the answer, or an error.
func (o *ownHTTP) doLookup(rawURL string) string {
	// As registries and update checks are asked: with a cache buster and
	// a request id, which differ on every run.
	u := rawURL + sep(rawURL) + "ts=" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "&request=" + newUUID()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, err := o.get(ctx, u)
	if err != nil {
		return "lookup: error: " + err.Error()
	}
	return "lookup: " + strings.TrimSpace(string(body))
}

// sendTelemetry posts a start-up event to rawURL; its answer, or failure,
// is only logged, as telemetry is.
func (o *ownHTTP) sendTelemetry(rawURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	event, _ := json.Marshal(map[string]any{"event": "start", "pid": os.Getpid(), "time": time.Now().UTC().Format(time.RFC3339Nano)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(event))
	if err != nil {
		o.log.Printf("telemetry: %v", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		o.log.Printf("telemetry: %v", err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	o.log.Printf("telemetry: %s", resp.Status)
}

// get GETs u and returns the body of a 200 answer.
func (o *ownHTTP) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// sep returns what goes between rawURL and a query parameter added to it.
func sep(rawURL string) string {
	if strings.Contains(rawURL, "?") {
		return "&"
	}
	return "?"
}

// checkOwnHTTPFlags checks the flags of the agent's own HTTP.
func checkOwnHTTPFlags(cfg *config) error {
	if cfg.ownServer != "" {
		host, _, err := net.SplitHostPort(cfg.ownServer)
		if err != nil {
			return fmt.Errorf("--own-server %q: want HOST:PORT: %w", cfg.ownServer, err)
		}
		if host == "" {
			return errors.New("--own-server: want a host, such as 127.0.0.1:0 or localhost:0")
		}
	}
	for name, v := range map[string]string{"--lookup": cfg.lookup, "--telemetry": cfg.telemetry} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q is not an http(s) URL", name, v)
		}
	}
	return nil
}
