package testagent

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// noise is what --noise makes an agent put into its prompts and output,
// as real agents do, beyond what acptap's default normalization knows: a
// temporary directory of its own made fresh for each run, the workspace
// path in the forms agents derive from it, a random token in a field of
// its own, and its process id in a tool's output.
type noise struct {
	home  string // the run's directory, TMPDIR/agent-home.XXXXXX
	token string // random, per run
	pid   int
}

// newNoise makes the run's directory under tmp (the agent's TMPDIR, or the
// system's if empty), named like mkdtemp's agent-home.XXXXXX.
func newNoise(tmp string) (*noise, error) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for range 100 {
		var b [6]byte
		rand.Read(b[:])
		for i := range b {
			b[i] = letters[int(b[i])%len(letters)]
		}
		dir := filepath.Join(tmp, "agent-home."+string(b[:]))
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("--noise: making the run's directory: %w", err)
		}
		return &noise{home: dir, token: randHex(8), pid: os.Getpid()}, nil
	}
	return nil, errors.New("--noise: no free name for the run's directory")
}

// close removes the run's directory.
func (n *noise) close() { os.RemoveAll(n.home) }

// project is the directory the agent keeps a project's state in: under
// its own, named after the workspace with "/" as "-", as Claude Code's
// ~/.claude/projects/-tmp-x-ws is.
func (n *noise) project(cwd string) string {
	return filepath.Join(n.home, "projects", strings.ReplaceAll(cwd, "/", "-"))
}

// openURL is a link to the workspace, its path percent-encoded.
func openURL(cwd string) string {
	return "https://example.invalid/open?dir=" + url.QueryEscape(cwd)
}

// systemText is what the system prompt says of the run.
func (n *noise) systemText(cwd string) string {
	return fmt.Sprintf(" Your scratch directory is %s; the project's notes are in %s/NOTES.md (%s).",
		n.home, n.project(cwd), openURL(cwd))
}

// toolText is what a read tool's output says of the run, after its own
// text.
func (n *noise) toolText(cwd, path string) string {
	return fmt.Sprintf("\ncached as %s/%s\nsee %s\nshell job %d",
		n.project(cwd), filepath.Base(path), openURL(cwd), n.pid)
}

// mcpArguments are an MCP tool call's arguments with the run's token in
// a member of its own, "run", as an agent passes its session's id to a
// tool; args as they are if they are not an object.
func (n *noise) mcpArguments(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil {
		return args
	}
	m["run"], _ = json.Marshal(n.token)
	out, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return out
}
