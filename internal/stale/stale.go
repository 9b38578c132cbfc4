// Package stale removes the temporary directories that acptap processes
// killed with SIGKILL left behind: a process removes its own when it
// ends, but cannot when it is killed so.
package stale

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Prefixes of the temporary directories that name their process: each is
// followed by the process id, "-", and a random part.
const (
	// TapPrefix starts the directory of the HTTP tap's files for the
	// agent (CA bundles), of package proxy.
	TapPrefix = "acptap-tap-"
	// ReplayPrefix starts a replay's sandbox, of package replay.
	ReplayPrefix = "acptap-replay-"
	// MCPPrefix starts the directory of a recording's MCP relay socket,
	// of package record.
	MCPPrefix = "acptap-mcp-"
	// ScenarioPrefix starts the workspace of a recording that acptap
	// drives itself (record --scenario, rerecord).
	ScenarioPrefix = "acptap-scenario-"
)

// Dir returns the pattern of os.MkdirTemp for a directory of this
// process with prefix.
func Dir(prefix string) string {
	return prefix + strconv.Itoa(os.Getpid()) + "-"
}

// Remove removes the directories of tmp named prefix, a process id, "-"
// and more, whose process is gone. A directory whose process is running,
// or whose id was reused, or that belongs to a user this process may not
// signal, is left alone; so is one whose name has no process id (a
// directory of an older acptap, or a file of another kind with the same
// prefix).
func Remove(tmp, prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, prefix+"*-*"))
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), prefix), "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 || strconv.Itoa(n) != pid {
			continue
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}
