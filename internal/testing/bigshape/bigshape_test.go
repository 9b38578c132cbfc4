package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testkit"
)

// binDir holds acptap and bigshape, built by TestMain.
var (
	binDir   string
	buildErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acptap-bigshape-bin-")
	if err != nil {
		buildErr = err
	} else {
		binDir = dir
		buildErr = build(dir)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// build builds acptap and bigshape into dir.
func build(dir string) error {
	for name, pkg := range map[string]string{"acptap": "./cmd/acptap", "bigshape": "./internal/testing/bigshape"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = "../../.." // the module root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// editorFrames returns the editor frames of a session of the shape.
func editorFrames(t *testing.T, shape string, mib float64) []byte {
	t.Helper()
	var out, stderr bytes.Buffer
	if code := editorMain([]string{"--shape", shape, "--mib", fmt.Sprint(mib)}, &out, &stderr); code != 0 {
		t.Fatalf("bigshape editor --shape %s: exit %d: %s", shape, code, stderr.Bytes())
	}
	return out.Bytes()
}

// TestShapesSize: the agent, in this process, answers each non-LLM
// shape's frames with a session of about the size asked for, the same
// twice.
func TestShapesSize(t *testing.T) {
	const mib = 4
	for _, shape := range []string{"editor", "echo", "echoreq", "agent", "mix"} {
		t.Run(shape, func(t *testing.T) {
			in := editorFrames(t, shape, mib)
			var out, out2, stderr bytes.Buffer
			if code := agentMain(bytes.NewReader(in), &out, &stderr, ""); code != 0 {
				t.Fatalf("agent: exit %d: %s", code, stderr.Bytes())
			}
			agentMain(bytes.NewReader(in), &out2, &stderr, "")
			if !bytes.Equal(out.Bytes(), out2.Bytes()) {
				t.Error("the agent answered the same frames differently")
			}
			if shape == "mix" {
				// Without an LLM the agent answers its turns with an
				// error; the rest is a third each.
				if !bytes.Contains(out.Bytes(), []byte("OPENAI_BASE_URL is not set")) {
					t.Error("the mix made no LLM turn")
				}
				return
			}
			got := float64(len(in)+out.Len()) / (1 << 20)
			if got < mib*0.95 || got > mib*1.15 {
				t.Errorf("the session is %.2f MiB, want about %d", got, mib)
			}
			for l := range bytes.Lines(append(in, out.Bytes()...)) {
				if !json.Valid(l) {
					t.Fatalf("not JSON: %.100q", l)
				}
			}
		})
	}
}

// TestRecordReplay: a session of each shape, recorded by acptap record
// from bigshape editor with bigshape agent, replays green.
func TestRecordReplay(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	llm := httptest.NewServer(llmHandler())
	defer llm.Close()
	acptap, agent := filepath.Join(binDir, "acptap"), filepath.Join(binDir, "bigshape")
	db := filepath.Join(t.TempDir(), "s.db")
	for _, shape := range shapes {
		t.Run(shape, func(t *testing.T) {
			rec := exec.Command(acptap, "record", "--store", db, "--name", shape, "--no-proxy-env", "--grace", "1m",
				"--base-url", "OPENAI_BASE_URL="+llm.URL+"/v1", "--", agent, "agent")
			rec.Dir = t.TempDir()
			rec.Env = testkit.ChildEnv()
			rec.Stdin = bytes.NewReader(editorFrames(t, shape, 2))
			var stderr bytes.Buffer
			rec.Stderr = &stderr
			if err := rec.Run(); err != nil {
				t.Fatalf("acptap record: %v\n%s", err, stderr.Bytes())
			}
			out, err := exec.Command(acptap, "show", "--store", db, "--json").Output()
			if err != nil {
				t.Fatalf("acptap show: %v", err)
			}
			var r struct{ Frames, Exchanges int }
			for l := range bytes.Lines(out) {
				if bytes.Contains(l, []byte(`"name":"`+shape+`"`)) {
					json.Unmarshal(l, &r)
				}
			}
			if r.Frames < 300 || (shape == "llm" || shape == "mix") != (r.Exchanges > 0) {
				t.Errorf("the recording has %d frames and %d LLM exchanges", r.Frames, r.Exchanges)
			}
			rep := exec.Command(acptap, "replay", "--store", db, shape)
			rep.Dir = t.TempDir()
			rep.Env = testkit.ChildEnv()
			got, err := rep.CombinedOutput()
			if err != nil || !strings.HasPrefix(string(got), "PASS "+shape) {
				t.Fatalf("acptap replay: %v\n%.3000s", err, got)
			}
		})
	}
}
