package testagent_test

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testeditor"
)

// TestNoise: with --noise, each run makes a directory of its own under
// TMPDIR and names it, with the workspace path in derived forms, in the
// system prompt and the tool's output, with a token of its own in the
// requests and the tool's rawOutput and its pid in the tool's output; the
// directory is gone when the agent has exited.
func TestNoise(t *testing.T) {
	dir := workspace(t, "alpha\n")
	tmp := t.TempDir()
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) {
		if n%2 == 0 {
			sse(w, toolEvents("call_1", `{"path": "notes.txt"}`)...)
			return
		}
		answer(w, "Done.")
	})
	dashed := strings.ReplaceAll(dir, "/", "-")
	homeRE := regexp.QuoteMeta(tmp) + `/agent-home\.[0-9A-Za-z]{6}`
	systemRE := regexp.MustCompile(`Your scratch directory is (` + homeRE + `); the project's notes are in (` + homeRE + `)/projects/` +
		regexp.QuoteMeta(dashed) + `/NOTES\.md \(` + regexp.QuoteMeta("https://example.invalid/open?dir="+url.QueryEscape(dir)) + `\)\.`)
	toolRE := regexp.MustCompile(`^alpha \(6 bytes\)\ncached as (` + homeRE + `)/projects/` + regexp.QuoteMeta(dashed) + `/notes\.txt\nsee ` +
		regexp.QuoteMeta("https://example.invalid/open?dir="+url.QueryEscape(dir)) + `\nshell job [0-9]+$`)

	var homes, tokens []string
	for run := range 2 {
		tr, _ := mustSession(t, testeditor.Options{Cwd: dir, Prompts: []string{"read notes.txt"}}, append(llmEnv(srv), "TMPDIR="+tmp), "--noise")
		reqs, _ := s.recorded()
		req := reqs[len(reqs)-1]
		m := systemRE.FindStringSubmatch(req.Messages[0].Content)
		if m == nil || m[1] != m[2] {
			t.Fatalf("run %d: system prompt %q does not match %s", run, req.Messages[0].Content, systemRE)
		}
		token := req.Metadata["run"]
		if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(token) || reqs[len(reqs)-2].Metadata["run"] != token {
			t.Errorf("run %d: metadata.run %q, want 16 hex digits, the same in both requests", run, token)
		}
		msgs := decode(t, tr)
		done := msgs[index(msgs, updateOf("tool_call_update"))].Params["update"]
		text, _ := get(done, "content").([]any)[0].(map[string]any)["content"].(map[string]any)["text"].(string)
		tm := toolRE.FindStringSubmatch(text)
		if tm == nil || tm[1] != m[1] {
			t.Errorf("run %d: tool output %q does not match %s with the directory %s", run, text, toolRE, m[1])
		}
		if got := get(done, "rawOutput", "run"); got != token {
			t.Errorf("run %d: rawOutput.run = %v, want the requests' token %s", run, got, token)
		}
		if _, err := os.Stat(m[1]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("run %d: the run's directory %s is still there after exit: %v", run, m[1], err)
		}
		homes, tokens = append(homes, m[1]), append(tokens, token)
	}
	if homes[0] == homes[1] || tokens[0] == tokens[1] {
		t.Errorf("two runs share directory %q or token %q; want each its own", homes, tokens)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("TMPDIR holds %d entries after the runs, want none", len(entries))
	}
}

// TestReadTwice: --read is repeatable, one tool call per file, in order.
func TestReadTwice(t *testing.T) {
	dir := workspace(t, "one\n")
	if err := os.WriteFile(filepath.Join(dir, "other.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, _ := mustSession(t, testeditor.Options{Cwd: dir}, nil, "--read", "notes.txt", "--read", "other.txt")
	var titles []string
	for _, u := range updates(decode(t, tr)) {
		if u["sessionUpdate"] == "tool_call" {
			titles = append(titles, u["title"].(string))
		}
	}
	if strings.Join(titles, ", ") != "Read notes.txt, Read other.txt" {
		t.Errorf("tool calls %q, want notes.txt then other.txt", titles)
	}
}
