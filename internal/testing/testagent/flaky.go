package testagent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// A flaky is what --flaky makes an agent send in some runs and not in
// others, as real agents do: codex-acp a shell tool call's final update,
// qwen-code an agent request after a tool's result.
type flaky struct {
	toolDone bool // a read tool's final update (completed)
	drain    bool // the drainMethod request after a read tool's result
}

// drainMethod is the vendor request --flaky drain sends.
const drainMethod = "_testagent/drainQueue"

var flakyUsage = "send, in about half the runs each (chosen at random at start-up), a comma-separated `LIST` of: " +
	"tool-done (a read tool call's final tool_call_update, completed), drain (an agent request " + drainMethod + " after a read tool's result)"

func parseFlaky(v string) (flaky, error) {
	var f flaky
	for _, name := range strings.Split(v, ",") {
		switch strings.TrimSpace(name) {
		case "tool-done":
			f.toolDone = true
		case "drain":
			f.drain = true
		default:
			return flaky{}, fmt.Errorf("--flaky %q: want a comma-separated list of tool-done and drain", v)
		}
	}
	return f, nil
}

// choose returns what this run sends of f: each at random, with even
// odds; or, with seq a file counting the runs, everything in the runs
// counted even and nothing in the others.
func (f flaky) choose(seq string) (flaky, error) {
	if seq == "" {
		var b [1]byte
		rand.Read(b[:])
		return flaky{toolDone: f.toolDone && b[0]&1 == 0, drain: f.drain && b[0]&2 == 0}, nil
	}
	b, err := os.ReadFile(seq)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return flaky{}, fmt.Errorf("--flaky-seq: %w", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := os.WriteFile(seq, []byte(strconv.Itoa(n+1)+"\n"), 0o600); err != nil {
		return flaky{}, fmt.Errorf("--flaky-seq: %w", err)
	}
	if n%2 == 0 {
		return f, nil
	}
	return flaky{}, nil
}

// skipsToolDone reports whether this run leaves out a read tool's final
// update.
func (a *agent) skipsToolDone() bool { return a.cfg.flaky.toolDone && !a.flaky.toolDone }

// drain sends, if this run does, the drainMethod request after a tool's
// result, and waits for its answer, whatever it says: the editor may know
// nothing of it.
func (a *agent) drain(ctx context.Context, s *session) {
	if !a.flaky.drain {
		return
	}
	if err := a.c.call(ctx, drainMethod, map[string]any{"sessionId": s.id}, nil); err != nil {
		a.log.Printf("%s: %v", drainMethod, err)
	}
}
