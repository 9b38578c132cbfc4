package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/testing/testagent"
	"github.com/acptap/acptap/internal/testing/testkit"
)

// agentEnv makes the test binary the test agent.
const agentEnv = "ACPTAP_SCENARIO_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(testagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// played is a Play against the test agent, with the lines the editor
// sent.
type played struct {
	res  *Result
	err  error
	sent []acp.Message
	// recv is what the agent wrote.
	recv string
	cwd  string
}

// lineLog keeps the lines written through it.
type lineLog struct {
	mu    sync.Mutex // guards lines
	w     io.WriteCloser
	lines [][]byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, bytes.Clone(p))
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineLog) Close() error { return l.w.Close() }

// play runs sc against the test agent with args, in a copy of the
// scenario's workspace, over real pipes.
func play(t *testing.T, sc *Scenario, args ...string) played {
	t.Helper()
	cwd := t.TempDir()
	if sc.Workspace != "" {
		if err := os.CopyFS(cwd, os.DirFS(sc.Workspace)); err != nil {
			t.Fatal(err)
		}
	}
	argv := testkit.SelfArgv(t, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), agentEnv+"=1")
	cmd.Dir = cwd
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		outR.Close() // the agent's end is closed: the editor's reader ends
		waited <- err
	}()
	log := &lineLog{w: in}
	var recv testkit.SyncBuffer
	res, err := Play(context.Background(), sc, log, io.TeeReader(outR, &recv), Options{Cwd: cwd, Version: "test"})
	select {
	case werr := <-waited:
		if werr != nil {
			t.Errorf("agent: %v\n%s", werr, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the agent did not exit once its stdin closed\n%s", stderr.String())
	}
	p := played{res: res, err: err, cwd: cwd, recv: recv.String()}
	for _, l := range log.lines {
		p.sent = append(p.sent, acp.Parse(l))
	}
	return p
}

func (p played) methods() []string {
	var out []string
	for _, m := range p.sent {
		out = append(out, m.Method)
	}
	return out
}

func (p played) params(method string) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range p.sent {
		if m.Method == method {
			out = append(out, m.Params)
		}
	}
	return out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parse(t *testing.T, doc string, dir string) *Scenario {
	t.Helper()
	sc, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return sc
}

func TestPlayTurns(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"notes.txt": "the notes\n", "src/main.go": "package main\n"})
	sc := parse(t, `{
		"workspace": ".",
		"prompts": [
			"hello",
			{"text": "look at these", "attach": ["src/main.go"], "embed": ["notes.txt"]}
		],
		"permissions": ["allow_once", "reject_once"]
	}`, ws)
	p := play(t, sc, "--read", "notes.txt", "--features", "embed")
	if p.err != nil {
		t.Fatalf("Play: %v", p.err)
	}
	s := p.res.Sessions[0]
	want := []TurnResult{
		{StopReason: "end_turn", Text: "You said: hello"},
		{StopReason: "end_turn", Text: "You said: look at these\n[link main.go]\n[file notes.txt: the notes\n]"},
	}
	if len(s.Turns) != len(want) {
		t.Fatalf("got %d turns, want %d: %+v", len(s.Turns), len(want), s.Turns)
	}
	for i := range want {
		if got := s.Turns[i]; got.StopReason != want[i].StopReason || got.Text != want[i].Text {
			t.Errorf("turn %d: got %q (%s), want %q (%s)", i+1, got.Text, got.StopReason, want[i].Text, want[i].StopReason)
		}
	}
	if got, want := strings.Join(s.Permissions, ","), "allow_once,reject_once"; got != want {
		t.Errorf("permissions: got %s, want %s", got, want)
	}
	if got, want := strings.Join(p.methods()[:3], ","), "initialize,session/new,session/prompt"; got != want {
		t.Errorf("sent: got %s, want %s first", got, want)
	}
	// The first read was allowed and served from the workspace's copy.
	if !strings.Contains(p.recv, `"text":"the notes (10 bytes)"`) {
		t.Errorf("the agent's output lacks the file's text it read:\n%s", p.recv)
	}
	prompt := string(p.params("session/prompt")[1])
	for _, part := range []string{
		`{"type":"resource_link","uri":"file://` + filepath.Join(p.cwd, "src/main.go") + `","name":"main.go","mimeType":"text/x-go","size":13}`,
		`{"type":"resource","resource":{"uri":"file://` + filepath.Join(p.cwd, "notes.txt") + `","mimeType":"text/plain","text":"the notes\n"}}`,
	} {
		if !strings.Contains(prompt, part) {
			t.Errorf("second prompt %s\nlacks %s", prompt, part)
		}
	}
}

func TestPlaySessions(t *testing.T) {
	sc := parse(t, `{
		"sessions": [
			{"prompts": ["one", "two"], "mode": "code", "mcpServers": [{"name": "notes", "command": "/bin/notes-server", "args": [], "env": []}]},
			{"prompts": ["three"]}
		]
	}`, t.TempDir())
	p := play(t, sc, "--features", "modes")
	if p.err != nil {
		t.Fatalf("Play: %v", p.err)
	}
	if len(p.res.Sessions) != 2 || p.res.Sessions[0].ID == p.res.Sessions[1].ID {
		t.Fatalf("got sessions %+v, want two of their own", p.res.Sessions)
	}
	texts := func(s SessionResult) (out []string) {
		for _, t := range s.Turns {
			out = append(out, t.Text)
		}
		return out
	}
	// The test agent tries the MCP server, which is not there.
	if got, want := strings.Join(texts(p.res.Sessions[0]), "|"), "mcp server notes: fork/exec /bin/notes-server: no such file or directory\n[code mode] You said: one|mcp server notes: fork/exec /bin/notes-server: no such file or directory\n[code mode] You said: two"; got != want {
		t.Errorf("session 1: got %q, want %q", got, want)
	}
	if got, want := strings.Join(texts(p.res.Sessions[1]), "|"), "You said: three"; got != want {
		t.Errorf("session 2: got %q, want %q", got, want)
	}
	news := p.params("session/new")
	if len(news) != 2 || !strings.Contains(string(news[0]), `"mcpServers":[{"name":"notes","command":"/bin/notes-server","args":[],"env":[]}]`) || !strings.Contains(string(news[1]), `"mcpServers":[]`) {
		t.Errorf("session/new params: got %s", news)
	}
	if modes := p.params("session/set_mode"); len(modes) != 1 || !strings.Contains(string(modes[0]), `"modeId":"code"`) {
		t.Errorf("session/set_mode params: got %s, want one with modeId code", modes)
	}
}

func TestPlayCancel(t *testing.T) {
	sc := parse(t, `{"prompts": [{"text": "a long answer please", "cancelAfterChunks": 2}, "again"]}`, t.TempDir())
	p := play(t, sc, "--chunk-size", "2", "--chunk-delay", "20ms")
	if p.err != nil {
		t.Fatalf("Play: %v", p.err)
	}
	turns := p.res.Sessions[0].Turns
	if turns[0].StopReason != "cancelled" || turns[0].Chunks < 2 || turns[0].Chunks > 4 {
		t.Errorf("turn 1: got %s after %d chunks, want cancelled after 2 or a few more", turns[0].StopReason, turns[0].Chunks)
	}
	if turns[1].StopReason != "end_turn" || turns[1].Text != "You said: again" {
		t.Errorf("turn 2: got %q (%s), want the whole answer", turns[1].Text, turns[1].StopReason)
	}
	if n := len(p.params("session/cancel")); n != 1 {
		t.Errorf("sent %d session/cancel, want 1", n)
	}
}

func TestPlayPermissionUnavailable(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "A"})
	sc := parse(t, `{"workspace": ".", "prompts": ["one", "two", "three"], "permissions": ["allow_once", "allow_always"]}`, ws)
	p := play(t, sc, "--read", "a.txt")
	if !errors.Is(p.err, ErrAgent) {
		t.Fatalf("Play: got %v, want ErrAgent", p.err)
	}
	if want := "prompt 2: the agent failed the scenario: permission request 2 offers allow_once, reject_once, not allow_always, the scenario's answer (permissions[1]); it was cancelled"; p.err.Error() != want {
		t.Errorf("got error\n%v\nwant\n%s", p.err, want)
	}
	s := p.res.Sessions[0]
	// The scenario goes on: the third request, past the list, is cancelled.
	if got, want := strings.Join(s.Permissions, ","), "allow_once,cancelled,cancelled"; got != want {
		t.Errorf("permissions: got %s, want %s", got, want)
	}
	if len(s.Turns) != 3 || s.Turns[2].StopReason == "" {
		t.Errorf("turns: got %+v, want three that ended", s.Turns)
	}
}

func TestPlayTerminal(t *testing.T) {
	sc := parse(t, `{"prompts": ["run it"]}`, t.TempDir())
	p := play(t, sc, "--features", "terminal")
	if p.err != nil {
		t.Fatalf("Play: %v", p.err)
	}
	if got := p.res.Sessions[0].Turns[0].Text; !strings.Contains(got, "terminal round") {
		t.Errorf("got %q, want the terminal's output in the answer", got)
	}
}

func TestPlayModeNotOffered(t *testing.T) {
	sc := parse(t, `{"prompts": ["hi"], "mode": "architect"}`, t.TempDir())
	p := play(t, sc, "--features", "modes")
	if !errors.Is(p.err, ErrAgent) || p.err.Error() != `the agent failed the scenario: the scenario sets mode "architect", but the agent offers ask, code` {
		t.Errorf("got %v, want the modes offered named", p.err)
	}
	p = play(t, sc)
	if !errors.Is(p.err, ErrAgent) || !strings.Contains(p.err.Error(), "offers no modes") {
		t.Errorf("got %v, want no modes said", p.err)
	}
}

func TestPlayEmbedRefused(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "A"})
	sc := parse(t, `{"workspace": ".", "prompts": [{"text": "x", "embed": ["a.txt"]}]}`, ws)
	p := play(t, sc)
	if !errors.Is(p.err, ErrAgent) || !strings.Contains(p.err.Error(), "does not take embedded context") {
		t.Errorf("got %v, want embedded context refused", p.err)
	}
}

func TestPlayAgentExits(t *testing.T) {
	sc := parse(t, `{"prompts": ["hi"]}`, t.TempDir())
	p := play(t, sc, "--exit", "0")
	if !errors.Is(p.err, ErrAgent) || p.err.Error() != "the agent failed the scenario: the agent closed its stdout while the editor waited for the initialize response" {
		t.Errorf("got %v, want the agent's exit said", p.err)
	}
}

func TestPlayTimeout(t *testing.T) {
	sc := parse(t, `{"prompts": ["hi"], "timeout": "300ms"}`, t.TempDir())
	p := play(t, sc, "--chunk-delay", "1s")
	if p.err == nil || !strings.Contains(p.err.Error(), "the scenario's timeout of 300ms ran out") {
		t.Errorf("got %v, want the timeout said", p.err)
	}
}
