package testagent

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/acptap/acptap/internal/chatapi"
)

// maxToolRounds bounds the LLM requests of one turn, so that a model that
// keeps calling tools cannot keep a turn alive forever.
const maxToolRounds = 8

// maxRetryWait caps the wait before a retry, whatever Retry-After says.
const maxRetryWait = 30 * time.Second

// chatChunk is one event of a streamed Chat Completions response.
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readFileTool is the one tool offered to the model.
var readFileTool = map[string]any{
	"type": "function",
	"function": map[string]any{
		"name":        "read_file",
		"description": "Read a text file of the workspace.",
		"parameters": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{"type": "string", "description": "Path of the file, relative to the working directory."},
			},
			"required": []string{"path"},
		},
	},
}

// completion is the reassembled answer of one streamed request.
type completion struct {
	text         string
	toolCalls    []chatapi.ToolCall
	finishReason string
}

// llmClient makes streaming Chat Completions requests.
type llmClient struct {
	url     string      // {base}/chat/completions, with --query's parameters
	key     string      // bearer token, "" for none
	headers http.Header // --header's
	http    *http.Client
	retries int
	log     *log.Logger
	ws      *wsClient // --llm-ws: the Responses API over a WebSocket instead
}

func newLLMClient(cfg *config, getenv func(string) string, logger *log.Logger) (*llmClient, error) {
	client, err := newHTTPClient(cfg, getenv)
	if err != nil {
		return nil, err
	}
	c := &llmClient{
		url:     cfg.secrets.requestURL(strings.TrimRight(cfg.llm, "/") + "/chat/completions"),
		key:     cmp.Or(cfg.secrets.apiKey, getenv("OPENAI_API_KEY")),
		headers: cfg.secrets.headers,
		http:    client,
		retries: cfg.retries,
		log:     logger,
	}
	if cfg.llmWS {
		c.ws = &wsClient{url: wsURLOf(cfg.llm), http: client, key: c.key}
	}
	return c, nil
}

// newHTTPClient returns the agent's HTTP client: it goes through the
// proxies of the environment as Node's clients do (see proxyFromEnv), and
// trusts the system roots, $SSL_CERT_FILE's and --ca's.
func newHTTPClient(cfg *config, getenv func(string) string) (*http.Client, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	// Go reads SSL_CERT_FILE itself, but from the process environment;
	// getenv may say otherwise. An unreadable file is ignored, as Go does.
	if f := getenv("SSL_CERT_FILE"); f != "" {
		if pem, err := os.ReadFile(f); err == nil {
			roots.AppendCertsFromPEM(pem)
		}
	}
	if cfg.ca != "" {
		pem, err := os.ReadFile(cfg.ca)
		if err != nil {
			return nil, fmt.Errorf("reading --ca: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in it", cfg.ca)
		}
	}
	transport := &http.Transport{
		Proxy:                 proxyFromEnv(getenv),
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: transport}, nil
}

// proxyFromEnv is http.ProxyFromEnvironment without its exemption of
// loopback targets, reading the environment through getenv and also
// honouring ALL_PROXY: the proxy rules of Node's clients (undici's
// EnvHttpProxyAgent, proxy-from-env), which proxy loopback unless
// NO_PROXY names it, as a host without a port (localhost, 127.0.0.1,
// ::1) or with the target's port. Tests run their LLM upstreams on
// loopback and still want them proxied, and the agent's own server
// (--own-server) is proxied unless NO_PROXY names it.
func proxyFromEnv(getenv func(string) string) func(*http.Request) (*url.URL, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	httpsProxy := env("HTTPS_PROXY", "https_proxy")
	httpProxy := env("HTTP_PROXY", "http_proxy")
	allProxy := env("ALL_PROXY", "all_proxy")
	noProxy := env("NO_PROXY", "no_proxy")
	return func(req *http.Request) (*url.URL, error) {
		raw := httpProxy
		if req.URL.Scheme == "https" {
			raw = httpsProxy
		}
		if raw == "" {
			raw = allProxy
		}
		if raw == "" || bypassProxy(noProxy, req.URL) {
			return nil, nil
		}
		if !strings.Contains(raw, "://") {
			raw = "http://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("invalid proxy URL %q: %w", raw, err)
		}
		return u, nil
	}
}

// bypassProxy reports whether NO_PROXY (comma-separated "*", CIDRs, IPs
// and domains, each optionally with a port) exempts u.
func bypassProxy(noProxy string, u *url.URL) bool {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	ip := net.ParseIP(host)
	for entry := range strings.SplitSeq(noProxy, ",") {
		entry = strings.ToLower(strings.TrimSpace(entry))
		switch {
		case entry == "":
			continue
		case entry == "*":
			return true
		}
		if _, cidr, err := net.ParseCIDR(entry); err == nil {
			if ip != nil && cidr.Contains(ip) {
				return true
			}
			continue
		}
		name, entryPort := entry, ""
		if h, p, err := net.SplitHostPort(entry); err == nil {
			name, entryPort = h, p
		}
		if entryPort != "" && entryPort != port {
			continue
		}
		name = strings.TrimPrefix(name, "*")
		if e := net.ParseIP(name); e != nil {
			if ip != nil && e.Equal(ip) {
				return true
			}
			continue
		}
		name = strings.TrimPrefix(name, ".")
		if host == name || strings.HasSuffix(host, "."+name) {
			return true
		}
	}
	return false
}

// stream makes one streaming request and reassembles its answer, calling
// onText (when not nil) with each content delta as it arrives. A cut
// stream is an error unless it had already finished its choice.
func (c *llmClient) stream(ctx context.Context, req *chatapi.Request, onText func(string)) (*completion, error) {
	if c.ws != nil {
		return c.ws.stream(ctx, req, onText)
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	resp, err := c.post(ctx, body.Bytes())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	var comp completion
	var text strings.Builder
	err = readSSE(resp.Body, func(data []byte) error {
		var ch chatChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return fmt.Errorf("malformed stream event %.200q: %w", data, err)
		}
		if ch.Error != nil {
			return fmt.Errorf("error event in stream: %s", ch.Error.Message)
		}
		for _, choice := range ch.Choices {
			if choice.Index != 0 {
				continue
			}
			if d := choice.Delta.Content; d != "" {
				text.WriteString(d)
				if onText != nil {
					onText(d)
				}
			}
			for _, tc := range choice.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > 64 {
					return fmt.Errorf("tool call index %d out of range", tc.Index)
				}
				for len(comp.toolCalls) <= tc.Index {
					comp.toolCalls = append(comp.toolCalls, chatapi.ToolCall{Type: "function"})
				}
				t := &comp.toolCalls[tc.Index]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				if tc.Type != "" {
					t.Type = tc.Type
				}
				t.Function.Name += tc.Function.Name
				t.Function.Arguments += tc.Function.Arguments
			}
			if choice.FinishReason != "" {
				comp.finishReason = choice.FinishReason
			}
		}
		return nil
	})
	if errors.Is(err, errStreamEnded) && comp.finishReason != "" {
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the response of POST %s: %w", c.url, err)
	}
	comp.text = text.String()
	for i := range comp.toolCalls {
		if comp.toolCalls[i].ID == "" {
			comp.toolCalls[i].ID = "call_" + randHex(12)
		}
	}
	return &comp, nil
}

// post sends the request, retrying up to c.retries times on 429, 5xx and
// transport errors, and returns a response with a 2xx status.
func (c *llmClient) post(ctx context.Context, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("building request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("User-Agent", "acptap-testagent/1")
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		for k, vs := range c.headers {
			req.Header[k] = vs
		}
		resp, err := c.http.Do(req)
		wait := min(250*time.Millisecond<<min(attempt, 10), maxRetryWait) // without Retry-After
		if err == nil {
			if resp.StatusCode/100 == 2 {
				return resp, nil
			}
			snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			err = fmt.Errorf("POST %s: %s: %s", c.url, resp.Status, bytes.TrimSpace(snippet))
			if s := resp.StatusCode; s != http.StatusTooManyRequests && s/100 != 5 {
				return nil, err
			}
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After")); ok {
				wait = min(d, maxRetryWait)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt >= c.retries {
			return nil, err
		}
		c.log.Printf("llm request failed, retry %d of %d in %v: %v", attempt+1, c.retries, wait, err)
		if !sleep(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// errStreamEnded is returned by readSSE when the stream ends before its
// "data: [DONE]" event.
var errStreamEnded = fmt.Errorf("stream ended before data: [DONE]: %w", io.ErrUnexpectedEOF)

// readSSE reads a server-sent event stream, calling event with the data
// of each event as it completes, until "data: [DONE]" (nil) or the end of
// the stream (errStreamEnded; an event not terminated by a blank line is
// dropped, as the SSE spec says). Lines may end in "\n" or "\r\n".
func readSSE(r io.Reader, event func(data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	hasData := false
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return errStreamEnded
		}
		if err != nil {
			return err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if hasData {
				if string(data) == "[DONE]" {
					return nil
				}
				if err := event(data); err != nil {
					return err
				}
			}
			data, hasData = data[:0], false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) == "data" {
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(value, []byte(" "))...)
			hasData = true
		}
		// Comments (":..."), event, id and retry fields carry nothing a
		// Chat Completions client needs.
	}
}

// llmTurn is a turn answered by the LLM: stream its answer, run the tools
// it calls and ask again with their results, until it answers without
// tools. LLM failures are reported to the editor as an "error: ..."
// message and end the turn normally, as agents do.
func (a *agent) llmTurn(ctx context.Context, s *session, prompt string) string {
	var title sync.WaitGroup
	defer title.Wait() // the title call belongs to this turn; finish it before answering
	if a.cfg.titleCall && a.firstTurn() {
		title.Go(func() { a.generateTitle(ctx, prompt) })
	}

	s.history = append(s.history, chatapi.Message{Role: "user", Content: prompt})
	for range maxToolRounds {
		req := &chatapi.Request{
			Model:    a.cfg.model,
			Stream:   true,
			Messages: append([]chatapi.Message{a.systemMessage(s)}, s.history...),
			Tools:    append([]any{readFileTool}, s.mcpFunctions()...),
		}
		if a.noise != nil {
			req.Metadata = map[string]string{"run": a.noise.token}
		}
		if d := a.cfg.llmDelay[s.number]; d > 0 && !sleep(ctx, d) {
			return stopCancelled
		}
		comp, err := a.llm.stream(ctx, req, func(text string) { a.messageChunk(s, text) })
		a.chunksSent(s)
		if ctx.Err() != nil {
			return stopCancelled
		}
		if err != nil {
			a.messageChunk(s, "error: "+err.Error())
			return stopEndTurn
		}
		s.history = append(s.history, chatapi.Message{Role: "assistant", Content: comp.text, ToolCalls: comp.toolCalls})
		if len(comp.toolCalls) == 0 {
			return stopEndTurn
		}
		cancelled := false
		for _, tc := range comp.toolCalls {
			// Every tool call gets its result message, even after a
			// cancel, so that the history stays a valid conversation.
			result := "error: cancelled by the user"
			if !cancelled {
				var err error
				result, err = a.modelTool(ctx, s, tc)
				cancelled = errors.Is(err, errCancelled)
				if cancelled {
					result = "error: cancelled by the user"
				}
			}
			s.history = append(s.history, chatapi.Message{Role: "tool", ToolCallID: tc.ID, Content: result})
		}
		if cancelled {
			return stopCancelled
		}
	}
	a.messageChunk(s, fmt.Sprintf("error: the model still calls tools after %d requests; giving up", maxToolRounds))
	return stopEndTurn
}

// systemMessage is the system prompt. Like real agents' prompts it carries
// volatile data (the cwd and today's date) for normalization to handle.
func (a *agent) systemMessage(s *session) chatapi.Message {
	var noise string
	if a.noise != nil {
		noise = a.noise.systemText(s.cwd)
	}
	return chatapi.Message{Role: "system", Content: fmt.Sprintf(
		"You are acptap's test agent, a coding assistant. The working directory is %s. Today's date is %s.%s "+
			"Use the read_file tool to read files.%s",
		s.cwd, time.Now().Format(time.DateOnly), noise, a.modeWords(s)+a.cfg.system+a.echoText()+a.envText)}
}

// modelTool runs a tool call of the model and returns the result to send
// back to it. Only errCancelled is returned as an error; other failures are
// results the model gets to see.
func (a *agent) modelTool(ctx context.Context, s *session, tc chatapi.ToolCall) (string, error) {
	if result, ok, err := a.mcpFunction(ctx, s, tc.Function.Name, tc.Function.Arguments); ok {
		return result, err
	}
	if tc.Function.Name != "read_file" {
		return fmt.Sprintf("error: unknown tool %q", tc.Function.Name), nil
	}
	var args struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args.Path == "" {
		return fmt.Sprintf(`error: read_file wants arguments {"path": "..."}, not %s`, tc.Function.Arguments), nil
	}
	content, err := a.readTool(ctx, s, tc.ID, args.Path)
	if errors.Is(err, errCancelled) {
		return "", err
	}
	if err != nil {
		return "error: " + err.Error(), nil
	}
	return content, nil
}

// firstTurn reports whether this is the first call in the agent's life.
func (a *agent) firstTurn() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := !a.titled
	a.titled = true
	return first
}

// generateTitle is the title-generation call that some agents fire
// concurrently with the first turn's main call.
func (a *agent) generateTitle(ctx context.Context, prompt string) {
	req := &chatapi.Request{
		Model:  "title-model",
		Stream: true,
		Messages: []chatapi.Message{
			{Role: "system", Content: "Write a title of at most six words for the conversation that starts with the user's message. Answer with the title only."},
			{Role: "user", Content: prompt},
		},
	}
	comp, err := a.llm.stream(ctx, req, nil)
	if err != nil {
		a.log.Printf("title call failed: %v", err)
		return
	}
	a.log.Printf("title: %q", comp.text)
}
