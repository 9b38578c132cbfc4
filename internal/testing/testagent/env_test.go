package testagent_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/testing/testeditor"
)

// --env-names lists the names of the agent's environment in its system
// prompt, sorted, and --env-file writes the environment to a file.
func TestLLMEnvNames(t *testing.T) {
	s, srv := newLLM(t, func(w http.ResponseWriter, r *http.Request, n int, req *chatRequest) { answer(w, "ok") })
	file := filepath.Join(t.TempDir(), "env")
	mustSession(t, testeditor.Options{}, append(llmEnv(srv), "ZZ_MARK=planted value", "A_B=1"), "--env-names", "--env-file", file)

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !slices.IsSorted(lines) || !slices.Contains(lines, "ZZ_MARK=planted value") || !slices.Contains(lines, "A_B=1") {
		t.Errorf("--env-file wrote\n%s\nwant the environment, sorted, ZZ_MARK and A_B in it", data)
	}
	var names []string
	for _, kv := range lines {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	reqs, _ := s.recorded()
	if len(reqs) != 1 {
		t.Fatalf("got %d LLM requests, want 1", len(reqs))
	}
	want := " Your environment has the variables " + strings.Join(names, ", ") + "."
	if sys := reqs[0].Messages[0].Content; !strings.HasSuffix(sys, want) {
		t.Errorf("the system prompt is\n%s\nwant it to end with\n%s", sys, want)
	}
}
