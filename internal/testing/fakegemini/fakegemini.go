// Package fakegemini is a scripted Gemini API server (models/NAME:streamGenerateContent?alt=sse, :generateContent, :countTokens, :embedContent and the model list) that stands in for the LLM of a real agent such as gemini-cli.
//
// Each response is chosen from the request's contents, the way a test
// wants a model to behave:
//
//   - the last user turn holds a functionResponse part: the model answers
//     with a sentence quoting the tool's output (see [ToolAnswer]);
//   - the last user text contains the word "slowly": the model streams
//     [SlowChunks] chunks of text (Options.Delay apart) and then keeps the
//     stream open until the client goes away, so that the turn can only end
//     by the client cancelling it;
//   - the last user text contains the word "run" and the request offers
//     the shell tool [ShellTool]: the model calls it to run [ShellCommand];
//   - the request asks for a JSON answer (generationConfig.responseMimeType
//     application/json, as gemini-cli's next-speaker check does): the model
//     answers {"next_speaker": "user", ...};
//   - anything else: a short answer that quotes the prompt (see [Answer]).
//
// Streamed responses are SSE with CRLF line breaks, as the real API sends
// them, each chunk with the usage so far, the model version and the
// response's fresh random responseId. Options.Faults has the first
// requests answered with 429 (out of quota, or with Options.NoCapacity out
// of capacity) or 5xx errors, for retry tests. The API key (x-goog-api-key header
// or ?key=) is accepted whatever it is. Every request is kept for tests to
// inspect.
package fakegemini

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acptap/acptap/internal/testing/fakellm"
)

// ShellTool is the name of gemini-cli's shell tool.
const ShellTool = "run_shell_command"

// ShellCommand is the command the model asks the shell tool to run.
const ShellCommand = "touch ran.txt && echo hello-from-gemini"

// ShellDescription is the description the model gives the shell call.
const ShellDescription = "Create ran.txt and print a greeting."

// ShellOutput is what ShellCommand prints.
const ShellOutput = "hello-from-gemini"

// SlowChunks is the number of text chunks a "slowly" answer streams before
// it stalls.
const SlowChunks = 3

// Models are the models GET /v1beta/models lists; any other name is
// served as well.
var Models = []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"}

// Options configure a Server. The zero value works.
type Options struct {
	// Delay is the pause before each chunk of a "slowly" answer.
	Delay time.Duration
	// Variant, when not empty, is put at the start of every text answer: a
	// model that answers differently from the usual one.
	Variant string
	// Faults are the HTTP statuses, such as 429 or 503, with which the
	// first len(Faults) generateContent and streamGenerateContent requests
	// are answered, in order, each with the real API's error body (a 429
	// with a RetryInfo of RetryDelay), before the script answers.
	Faults []int
	// RetryDelay is the retryDelay of a 429's RetryInfo; zero means 1s.
	RetryDelay time.Duration
	// NoCapacity makes each 429 of Faults say that the server has no
	// capacity for the model (an ErrorInfo of reason
	// MODEL_CAPACITY_EXHAUSTED, as Google's servers answer when a model is
	// overloaded) rather than that the caller's quota is exhausted.
	// gemini-cli retries that after the RetryInfo delay, where it waits
	// at least 5s before retrying any other 429 or 5xx.
	NoCapacity bool
}

// Server is the scripted Gemini API, an http.Handler.
type Server struct {
	fakellm.Log[Request] // the requests, and the end of stalled streams
	opts                 Options

	mu     sync.Mutex // guards faults
	faults int        // faults answered so far
}

// Request is one request the server got.
type Request struct {
	// Step is "text", "shell", "tool-answer", "slow", "json",
	// "count-tokens", "embed", "models", "model", "fault" for one of
	// Options.Faults, or "error" for a request it refused. Encoding is
	// not set: bodies are read as they come.
	fakellm.Request
	RawQuery string
	// Model and Call are the model name and method of a models/NAME:METHOD
	// path, such as "gemini-2.5-pro" and "streamGenerateContent".
	Model, Call string
}

// New returns a Server.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// NextSpeaker is the answer to a request for a JSON answer.
const NextSpeaker = `{"reasoning": "The model has answered; it is the user's turn.", "next_speaker": "user"}`

// request is the part of a generateContent request the script reads.
type request struct {
	Contents []content `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType string `json:"responseMimeType"`
	} `json:"generationConfig"`
}

type content struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

var (
	runWord    = regexp.MustCompile(`(?i)\brun\b`)
	slowlyWord = regexp.MustCompile(`(?i)\bslowly\b`)
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Request{Request: fakellm.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Step: "error"}, RawQuery: r.URL.RawQuery}
	body, err := io.ReadAll(r.Body)
	rec.Body = body
	if err != nil {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	_, rest, ok := strings.Cut(r.URL.Path, "/models")
	if !ok {
		s.Keep(rec)
		apiError(w, http.StatusNotFound, "fakegemini serves .../models and .../models/NAME:METHOD only, not "+r.Method+" "+r.URL.Path)
		return
	}
	rest = strings.TrimPrefix(rest, "/")
	model, call, _ := strings.Cut(rest, ":")
	rec.Model, rec.Call = model, call
	switch {
	case r.Method == http.MethodGet && rest == "":
		rec.Step = "models"
		s.Keep(rec)
		list := []any{}
		for _, m := range Models {
			list = append(list, modelInfo(m))
		}
		writeJSON(w, map[string]any{"models": list})
		return
	case r.Method == http.MethodGet && call == "":
		rec.Step = "model"
		s.Keep(rec)
		writeJSON(w, modelInfo(model))
		return
	case r.Method != http.MethodPost || model == "":
		s.Keep(rec)
		apiError(w, http.StatusNotFound, "no method "+r.Method+" "+r.URL.Path)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		s.Keep(rec)
		apiError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			rec.Tools = append(rec.Tools, f.Name)
		}
	}
	switch call {
	case "countTokens":
		rec.Step = "count-tokens"
		s.Keep(rec)
		writeJSON(w, map[string]any{"totalTokens": tokens(body), "promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": tokens(body)}}})
		return
	case "embedContent":
		rec.Step = "embed"
		s.Keep(rec)
		values := make([]float64, 8)
		for i := range values {
			values[i] = float64((len(body)*(i+1))%97) / 97
		}
		writeJSON(w, map[string]any{"embedding": map[string]any{"values": values}})
		return
	case "streamGenerateContent", "generateContent":
	default:
		s.Keep(rec)
		apiError(w, http.StatusNotFound, "fakegemini does not serve the method "+call)
		return
	}
	s.generate(w, r, &rec, model, call, req)
}

// generate answers a generateContent or streamGenerateContent request of
// model, as the script says, or with an injected fault; rec is what is
// kept of it.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, rec *Request, model, call string, req request) {
	if status, ok := s.fault(); ok {
		rec.Step = "fault"
		s.Keep(*rec)
		faultError(w, status, model, s.opts.RetryDelay, s.opts.NoCapacity)
		return
	}
	if len(req.Contents) == 0 {
		s.Keep(*rec)
		apiError(w, http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	out := s.newOutput(w, r, model, call == "streamGenerateContent", req.Contents)
	last := req.Contents[len(req.Contents)-1]
	prompt, fr := lastTurn(last)
	switch {
	case fr != "":
		rec.Step = "tool-answer"
		s.Keep(*rec)
		out.text(s.opts.Variant + fakellm.ToolAnswer(fr, ShellOutput))
	case slowlyWord.MatchString(prompt) && out.streamed && !out.array:
		rec.Step = "slow"
		s.Keep(*rec)
		out.slow(s.Done(), s.opts.Delay)
	case runWord.MatchString(prompt) && slices.Contains(rec.Tools, ShellTool):
		rec.Step = "shell"
		s.Keep(*rec)
		out.functionCall(ShellTool, map[string]any{"command": ShellCommand, "description": ShellDescription})
	case req.GenerationConfig.ResponseMimeType == "application/json":
		rec.Step = "json"
		s.Keep(*rec)
		out.text(NextSpeaker)
	case runWord.MatchString(prompt):
		rec.Step = "text"
		s.Keep(*rec)
		out.text(s.opts.Variant + "I have no shell tool to run it with; the tools offered are: " + strings.Join(rec.Tools, ", "))
	default:
		rec.Step = "text"
		s.Keep(*rec)
		out.text(s.opts.Variant + fakellm.Answer(prompt))
	}
}

// fault returns the status of the next fault to answer, if any is left.
func (s *Server) fault() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults >= len(s.opts.Faults) {
		return 0, false
	}
	s.faults++
	return s.opts.Faults[s.faults-1], true
}

// faultError answers as the real API does when it is out of quota or out
// of capacity for model (429), or unwell (5xx).
func faultError(w http.ResponseWriter, status int, model string, retry time.Duration, noCapacity bool) {
	e := map[string]any{"code": status}
	switch {
	case status == http.StatusTooManyRequests:
		if retry <= 0 {
			retry = time.Second
		}
		retryInfo := map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.FormatFloat(retry.Seconds(), 'f', -1, 64) + "s"}
		e["message"] = "Resource has been exhausted (e.g. check quota)."
		e["status"] = "RESOURCE_EXHAUSTED"
		e["details"] = []any{retryInfo}
		if noCapacity {
			e["message"] = "No capacity available for model " + model + " on the server"
			e["details"] = []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "MODEL_CAPACITY_EXHAUSTED", "domain": "generativelanguage.googleapis.com", "metadata": map[string]any{"model": model}},
				retryInfo,
			}
		}
	case status == http.StatusServiceUnavailable:
		e["message"] = "The model is overloaded. Please try again later."
		e["status"] = "UNAVAILABLE"
	default:
		e["message"] = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
		e["status"] = "INTERNAL"
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	w.Write(marshal(map[string]any{"error": e}))
	w.Write([]byte("\n"))
}

// lastTurn returns the prompt of a turn, its last text part (thoughts left
// out), and the output of the tool calls it answers, if it holds
// functionResponse parts. gemini-cli puts a <session_context> part (the
// date, the paths, the workspace's files) before the user's text in the
// first turn: an answer quoting it would quote all that.
func lastTurn(c content) (text, toolOutput string) {
	var o strings.Builder
	for _, p := range c.Parts {
		switch {
		case p.FunctionResponse != nil:
			o.WriteString(responseText(p.FunctionResponse.Response))
			if o.Len() == 0 {
				o.WriteString("(no output)")
			}
		case !p.Thought && p.Text != "":
			text = p.Text
		}
	}
	return text, o.String()
}

// responseText returns a functionResponse's output: its "output" or
// "error" field (gemini-cli's), or the whole object.
func responseText(raw json.RawMessage) string {
	var o struct {
		Output any `json:"output"`
		Error  any `json:"error"`
	}
	if json.Unmarshal(raw, &o) == nil {
		for _, v := range []any{o.Output, o.Error} {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
	}
	return string(raw)
}

// tokens is a rough token count of a request body.
func tokens(body []byte) int { return 1 + len(body)/4 }

func modelInfo(name string) map[string]any {
	return map[string]any{
		"name": "models/" + name, "version": "001", "displayName": name, "description": "A scripted stand-in for " + name,
		"inputTokenLimit": 1048576, "outputTokenLimit": 65536,
		"temperature": 1, "topP": 0.95, "topK": 64, "maxTemperature": 2, "thinking": true,
		"supportedGenerationMethods": []string{"generateContent", "countTokens", "createCachedContent", "batchGenerateContent"},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	w.Write(marshal(v))
	w.Write([]byte("\n"))
}

// apiError answers as the Gemini API does, with a google.rpc.Status.
func apiError(w http.ResponseWriter, status int, msg string) {
	s := map[int]string{http.StatusBadRequest: "INVALID_ARGUMENT", http.StatusNotFound: "NOT_FOUND"}[status]
	b := marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": s}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	w.Write(b)
}

// output writes one response, streamed as SSE chunks or as a JSON array
// of them (streamGenerateContent without alt=sse), or as one JSON
// document.
type output struct {
	w        http.ResponseWriter
	r        *http.Request
	streamed bool
	array    bool // streamed as a JSON array
	id       string
	model    string
	prompt   int // prompt token count
	out      int // candidate tokens so far
	parts    []any
	started  bool
}

func (s *Server) newOutput(w http.ResponseWriter, r *http.Request, model string, streamed bool, contents []content) *output {
	prompt := 0
	for _, c := range contents {
		for _, p := range c.Parts {
			prompt += 1 + len(p.Text)/4
		}
	}
	array := streamed && r.URL.Query().Get("alt") != "sse"
	return &output{w: w, r: r, streamed: streamed, array: array, id: responseID(), model: model, prompt: prompt}
}

// chunk is a GenerateContentResponse, its fields in the real API's order.
type chunk struct {
	Candidates    []candidate `json:"candidates"`
	UsageMetadata usage       `json:"usageMetadata"`
	ModelVersion  string      `json:"modelVersion"`
	ResponseID    string      `json:"responseId"`
}

type candidate struct {
	Content      turn   `json:"content"`
	FinishReason string `json:"finishReason,omitempty"`
	Index        int    `json:"index"`
}

type turn struct {
	Parts []any  `json:"parts"`
	Role  string `json:"role"`
}

type usage struct {
	PromptTokenCount     int          `json:"promptTokenCount"`
	CandidatesTokenCount int          `json:"candidatesTokenCount"`
	TotalTokenCount      int          `json:"totalTokenCount"`
	PromptTokensDetails  []tokenCount `json:"promptTokensDetails"`
}

type tokenCount struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

// send sends (streamed) or collects parts, with finishReason if not empty.
func (o *output) send(parts []any, tokens int, finish string) {
	o.out += tokens
	if !o.streamed {
		o.parts = append(o.parts, parts...)
		if finish == "" {
			return
		}
		parts = o.parts
	}
	c := chunk{
		Candidates: []candidate{{Content: turn{Parts: parts, Role: "model"}, FinishReason: finish}},
		UsageMetadata: usage{
			PromptTokenCount: o.prompt, CandidatesTokenCount: o.out, TotalTokenCount: o.prompt + o.out,
			PromptTokensDetails: []tokenCount{{Modality: "TEXT", TokenCount: o.prompt}},
		},
		ModelVersion: o.model, ResponseID: o.id,
	}
	if !o.streamed {
		writeJSON(o.w, c)
		return
	}
	if o.array {
		sep := ",\r\n"
		if !o.started {
			o.started = true
			o.w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			o.w.WriteHeader(http.StatusOK)
			sep = "["
		}
		fmt.Fprintf(o.w, "%s%s", sep, marshal(c))
		if finish != "" {
			io.WriteString(o.w, "]")
		}
		o.w.(http.Flusher).Flush()
		return
	}
	if !o.started {
		o.started = true
		o.w.Header().Set("Content-Type", "text/event-stream")
		o.w.Header().Set("Content-Disposition", "attachment")
		o.w.WriteHeader(http.StatusOK)
	}
	fmt.Fprintf(o.w, "data: %s\r\n\r\n", marshal(c))
	o.w.(http.Flusher).Flush()
}

// text sends an answer a few words per chunk, the last one with
// finishReason STOP.
func (o *output) text(answer string) {
	words := strings.SplitAfter(answer, " ")
	for i := 0; i < len(words); i += 4 {
		end := min(i+4, len(words))
		finish := ""
		if end == len(words) {
			finish = "STOP"
		}
		o.send([]any{map[string]any{"text": strings.Join(words[i:end], "")}}, end-i, finish)
	}
}

// functionCall sends one call of tool name, after a sentence saying so.
func (o *output) functionCall(name string, args map[string]any) {
	o.send([]any{map[string]any{"text": "I will run the command."}}, 5, "")
	o.send([]any{map[string]any{"functionCall": map[string]any{"name": name, "args": args}}}, 20, "STOP")
}

// slow streams SlowChunks words of SlowAnswer, each after delay, and then
// keeps the response open, as a model still thinking does, until the
// client goes away or done is closed.
func (o *output) slow(done <-chan struct{}, delay time.Duration) {
	words := strings.SplitAfter(fakellm.SlowAnswer, " ")
	for i := range SlowChunks {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-o.r.Context().Done():
				t.Stop()
				panic(http.ErrAbortHandler)
			case <-done:
				t.Stop()
				panic(http.ErrAbortHandler)
			}
		}
		o.send([]any{map[string]any{"text": words[i%len(words)]}}, 1, "")
	}
	select {
	case <-o.r.Context().Done():
	case <-done:
	}
	// The stream never ended: a clean return would end the chunked body
	// as if the response were complete.
	panic(http.ErrAbortHandler)
}

// marshal encodes v as the API does: without escaping <, > and &.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// responseID returns a fresh id in the real API's shape: 23 characters of
// unpadded URL-safe base64.
func responseID() string {
	b := make([]byte, 17)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:23]
}

// Listener is a running fake: a Server at an Endpoint.
type Listener struct {
	*Server
	fakellm.Endpoint
}

// Start starts a plain HTTP fake on a loopback port.
func Start(opts Options) *Listener {
	s := New(opts)
	return &Listener{Server: s, Endpoint: fakellm.Serve(s, "")}
}

// StartTLS starts an HTTPS fake on a loopback port (see fakellm.ServeTLS),
// writing its CA file in dir.
func StartTLS(opts Options, dir string) (*Listener, error) {
	s := New(opts)
	ep, err := fakellm.ServeTLS(s, "", dir, "fakegemini")
	if err != nil {
		return nil, err
	}
	return &Listener{Server: s, Endpoint: ep}, nil
}

// Close stops the fake: stalled streams end, then the server closes.
func (l *Listener) Close() {
	l.Server.Close()
	l.HTTP.Close()
}
