// Package scenario reads scenario files and plays them against an ACP
// agent as a scripted editor would.
package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

// DefaultTimeout bounds a scenario whose file gives no timeout.
const DefaultTimeout = 5 * time.Minute

// Scenario is one scenario file, checked and with its paths resolved: an
// editor's side of an ACP connection, one or more sessions, each a list of
// prompts and the answers to the agent's permission requests.
type Scenario struct {
	// Path is the file the scenario was read from ("" for Parse).
	Path string
	// Source is the file's content.
	Source []byte
	// Name is the recording's name: the file's "name", else the file's
	// base name without its extension.
	Name string
	// Workspace is the directory the session's working directory is
	// seeded from, absolute; "" for an empty one.
	Workspace string
	// Timeout bounds the whole scenario, from initialize to the last
	// turn's end.
	Timeout time.Duration
	// Sessions are opened one after the other, then prompted at once,
	// each its prompts in order; most scenarios have one.
	Sessions []Session
}

// Session is one ACP session of a scenario.
type Session struct {
	// Prompts are the session's turns, in order.
	Prompts []Prompt
	// Permissions answer the session's permission requests in order, by
	// option kind (see Kinds). A request whose next answer the agent does
	// not offer is cancelled and fails the scenario; a request past the
	// end of the list is cancelled.
	Permissions []string
	// Mode, if not "", is set with session/set_mode once the session is
	// open; the agent must offer it.
	Mode string
	// MCPServers is the mcpServers array of session/new, as ACP has it;
	// nil sends an empty one.
	MCPServers json.RawMessage
}

// Prompt is one turn's prompt.
type Prompt struct {
	// Text is the prompt's text block; may be empty when files are given.
	Text string
	// Attach are workspace files sent as resource links.
	Attach []string
	// Embed are workspace files sent as embedded context (resource
	// blocks with the file's text); the agent must advertise
	// promptCapabilities.embeddedContext.
	Embed []string
	// CancelAfterChunks, when positive, sends session/cancel once the
	// turn has streamed that many agent_message_chunk notifications.
	CancelAfterChunks int
}

// Kinds are the permission option kinds of ACP, the values a scenario's
// permissions may take.
var Kinds = []string{"allow_once", "allow_always", "reject_once", "reject_always"}

// The members each object of a scenario file may have, in the order the
// documentation gives them; anything else is refused (see FieldError).
var (
	fileFields    = []string{"$schema", "name", "workspace", "timeout", "prompts", "permissions", "mode", "mcpServers", "sessions"}
	sessionFields = []string{"prompts", "permissions", "mode", "mcpServers"}
	promptFields  = []string{"text", "attach", "embed", "cancelAfterChunks"}
)

// file is a scenario file as JSON has it.
type file struct {
	Name      string        `json:"name"`
	Workspace string        `json:"workspace"`
	Timeout   string        `json:"timeout"`
	Sessions  []sessionJSON `json:"sessions"`
	sessionJSON
}

type sessionJSON struct {
	Prompts     []promptJSON    `json:"prompts"`
	Permissions []string        `json:"permissions"`
	Mode        string          `json:"mode"`
	MCPServers  json.RawMessage `json:"mcpServers"`
}

// promptJSON is a prompt: a string, or an object of promptFields.
type promptJSON struct {
	Prompt
}

func (p *promptJSON) UnmarshalJSON(data []byte) error {
	s := bytes.TrimSpace(data)
	switch {
	case len(s) > 0 && s[0] == '"':
		return json.Unmarshal(s, &p.Text)
	case len(s) == 0 || s[0] != '{':
		return &json.UnmarshalTypeError{Value: jsonKind(s), Type: reflect.TypeFor[promptJSON]()}
	}
	var o struct {
		Text              string   `json:"text"`
		Attach            []string `json:"attach"`
		Embed             []string `json:"embed"`
		CancelAfterChunks int      `json:"cancelAfterChunks"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return err
	}
	p.Prompt = Prompt(o)
	return nil
}

// Load reads and checks the scenario file at path; relative paths in it
// are relative to the file's directory.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	sc, err := Parse(data, filepath.Dir(abs))
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	sc.Path = path
	sc.Source = data
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return sc, nil
}

// Parse reads and checks a scenario file's content; relative paths in it
// are relative to dir. Every mistake is an error naming where it is:
// a member no object of its kind has (a *FieldError), a value of the wrong
// type, a missing prompt or file, an unknown permission kind.
func Parse(data []byte, dir string) (*Scenario, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, syntaxError(data, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrSyntax)
	}
	if err := checkFields(doc); err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, typeError(err)
	}
	sc := &Scenario{Name: f.Name, Timeout: DefaultTimeout}
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: timeout %q: want a positive duration such as 90s or 5m", ErrInvalid, f.Timeout)
		}
		sc.Timeout = d
	}
	if f.Workspace != "" {
		ws := f.Workspace
		if !filepath.IsAbs(ws) {
			ws = filepath.Join(dir, ws)
		}
		if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: workspace %q: no such directory (relative to the scenario file's directory)", ErrInvalid, f.Workspace)
		}
		sc.Workspace = ws
	}
	top := f.sessionJSON
	topGiven := top.Prompts != nil || top.Permissions != nil || top.Mode != "" || top.MCPServers != nil
	sessions := f.Sessions
	switch {
	case f.Sessions != nil && topGiven:
		return nil, fmt.Errorf("%w: both sessions and a session's members (prompts, permissions, mode, mcpServers) at the top; put them in sessions[0]", ErrInvalid)
	case f.Sessions == nil:
		sessions = []sessionJSON{top}
	case len(f.Sessions) == 0:
		return nil, fmt.Errorf("%w: sessions is empty; give one session or more, or prompts at the top for one", ErrInvalid)
	}
	for i, s := range sessions {
		at := ""
		if f.Sessions != nil {
			at = fmt.Sprintf("sessions[%d].", i)
		}
		ss, err := checkSession(s, at, sc.Workspace)
		if err != nil {
			return nil, err
		}
		sc.Sessions = append(sc.Sessions, ss)
	}
	return sc, nil
}

func checkSession(s sessionJSON, at, workspace string) (Session, error) {
	if len(s.Prompts) == 0 {
		return Session{}, fmt.Errorf("%w: %sprompts: no prompts; give one prompt or more", ErrInvalid, at)
	}
	out := Session{Permissions: s.Permissions, Mode: s.Mode, MCPServers: s.MCPServers}
	for i, k := range s.Permissions {
		if !slices.Contains(Kinds, k) {
			return Session{}, fmt.Errorf("%w: %spermissions[%d]: %q is no permission option kind; use one of %s", ErrInvalid, at, i, k, strings.Join(Kinds, ", "))
		}
	}
	if s.MCPServers != nil {
		if err := checkMCPServers(s.MCPServers, at); err != nil {
			return Session{}, err
		}
	}
	for i, p := range s.Prompts {
		where := fmt.Sprintf("%sprompts[%d]", at, i)
		if p.Text == "" && len(p.Attach) == 0 && len(p.Embed) == 0 {
			return Session{}, fmt.Errorf("%w: %s is empty; give text or files", ErrInvalid, where)
		}
		if p.CancelAfterChunks < 0 {
			return Session{}, fmt.Errorf("%w: %s.cancelAfterChunks %d: want a count of 1 or more", ErrInvalid, where, p.CancelAfterChunks)
		}
		for _, list := range []struct {
			name  string
			files []string
		}{{"attach", p.Attach}, {"embed", p.Embed}} {
			for j, name := range list.files {
				if err := checkWorkspaceFile(workspace, name); err != nil {
					return Session{}, fmt.Errorf("%w: %s.%s[%d]: %v", ErrInvalid, where, list.name, j, err)
				}
			}
		}
		out.Prompts = append(out.Prompts, p.Prompt)
	}
	return out, nil
}

// checkWorkspaceFile checks that name is a regular file inside the
// workspace.
func checkWorkspaceFile(workspace, name string) error {
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("%q is not a path inside the workspace; give it relative to the workspace", name)
	}
	if workspace == "" {
		return fmt.Errorf("%q: the scenario has no workspace to take it from; add one", name)
	}
	fi, err := os.Stat(filepath.Join(workspace, filepath.FromSlash(name)))
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%q: no such file in the workspace %s", name, workspace)
	}
	return nil
}

// checkMCPServers checks that mcpServers is an array of objects with a
// name, and a command (stdio) or a url (http, sse), as ACP's McpServer.
func checkMCPServers(raw json.RawMessage, at string) error {
	var servers []map[string]any
	if err := json.Unmarshal(raw, &servers); err != nil {
		return fmt.Errorf("%w: %smcpServers: want an array of objects as ACP's session/new has it", ErrInvalid, at)
	}
	for i, s := range servers {
		name, _ := s["name"].(string)
		if name == "" {
			return fmt.Errorf("%w: %smcpServers[%d]: no name; every server needs one", ErrInvalid, at, i)
		}
		typ, _ := s["type"].(string)
		switch typ {
		case "", "stdio":
			if c, _ := s["command"].(string); c == "" {
				return fmt.Errorf("%w: %smcpServers[%d] (%s): a stdio server needs a command", ErrInvalid, at, i, name)
			}
		case "http", "sse":
			if u, _ := s["url"].(string); u == "" {
				return fmt.Errorf("%w: %smcpServers[%d] (%s): an %s server needs a url", ErrInvalid, at, i, name, typ)
			}
		}
	}
	return nil
}

// checkFields refuses a member that no object of its kind has, naming it
// and where it is, with the member meant when it is a near miss.
func checkFields(doc any) error {
	top, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: want a JSON object at the top", ErrInvalid)
	}
	if err := unknownField(top, fileFields, ""); err != nil {
		return err
	}
	if err := promptFieldsOf(top, ""); err != nil {
		return err
	}
	sessions, _ := top["sessions"].([]any)
	for i, s := range sessions {
		o, ok := s.(map[string]any)
		if !ok {
			continue
		}
		at := fmt.Sprintf("sessions[%d].", i)
		if err := unknownField(o, sessionFields, at); err != nil {
			return err
		}
		if err := promptFieldsOf(o, at); err != nil {
			return err
		}
	}
	return nil
}

// promptFieldsOf checks the members of the prompt objects of a session.
func promptFieldsOf(session map[string]any, at string) error {
	prompts, _ := session["prompts"].([]any)
	for i, p := range prompts {
		if o, ok := p.(map[string]any); ok {
			if err := unknownField(o, promptFields, fmt.Sprintf("%sprompts[%d].", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownField(obj map[string]any, known []string, at string) error {
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if slices.Contains(known, name) {
			continue
		}
		return &FieldError{Field: at + name, Known: known, Near: nearest(name, known)}
	}
	return nil
}

// nearest returns the member of known a misspelt name most likely meant,
// or "".
func nearest(name string, known []string) string {
	best, bestDist := "", 3 // at most two edits away
	for _, k := range known {
		if len(name) >= 4 && strings.HasPrefix(strings.ToLower(k), strings.ToLower(name)) {
			return k // cut short
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// syntaxError says where a file that is not JSON goes wrong.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if e, ok := err.(*json.SyntaxError); ok {
		se = e
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("%w: line %d: %v", ErrSyntax, line, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file ends inside a value (an unclosed [, { or \")", ErrSyntax)
	}
	return fmt.Errorf("%w: %v", ErrSyntax, err)
}

// typeError says which member has a value of the wrong type.
func typeError(err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		field := strings.TrimPrefix(te.Field, "sessionJSON.")
		if field == "" {
			field = "a value"
		}
		return fmt.Errorf("%w: %s: want %s, not %s", ErrInvalid, field, jsonType(te.Type), te.Value)
	}
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}

// jsonKind names the kind of a JSON value as json.UnmarshalTypeError
// does.
func jsonKind(v []byte) string {
	switch {
	case len(v) == 0:
		return "nothing"
	case v[0] == '[':
		return "array"
	case v[0] == 't' || v[0] == 'f':
		return "bool"
	case v[0] == 'n':
		return "null"
	}
	return "number"
}

// jsonType names the JSON type a Go type is read from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // json.RawMessage
			return "JSON"
		}
		return "an array"
	case reflect.Struct:
		if t == reflect.TypeFor[promptJSON]() {
			return "a string or an object"
		}
		return "an object"
	}
	return t.String()
}
