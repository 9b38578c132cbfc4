package main

import (
	"bytes"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/demollm"
)

// readEnvFile reads the environment testagent --env-file wrote, by name.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		env[k] = v
	}
	return env
}

// TestReplayEnvShape: an agent that lists the names of its environment
// in its system prompt, as a real agent does (testagent --env-names),
// and echoes a secret variable's value in it, replays with no request
// drift by both routes: replay gives it the recorded variables, with the
// recorded values that are settings, the sandbox's paths for the
// recorded HOME, and placeholders for what was withheld. The secret's
// value reaches neither the store nor the replayed agent, which the
// replay's own environment holds too; --env wins.
func TestReplayEnvShape(t *testing.T) {
	// Two secrets: an API key's, which replay gives a dummy, and another.
	const secret, password = "planted-env-secret-0123456789", "planted-env-password-9876"
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	extra := []string{
		"ACPTAP_T_COLOR=blue",
		"ACPTAP_T_TOKEN=" + secret,
		"ACPTAP_T_PASSWORD=" + password,
		"ACPTAP_T_DIR=" + filepath.Join(home, "acptap-t"),
		"ACPTAP_T_ID=8f0e6d1c2b3a49587d6e5f4a3b2c1d0e",
	}
	for _, route := range []string{"base-url", "proxy-tls"} {
		t.Run(route, func(t *testing.T) {
			dir := workspace(t)
			db := filepath.Join(t.TempDir(), "s.db")
			envFile := filepath.Join(t.TempDir(), "env")
			var upstream *httptest.Server
			var flags, agentArgs []string
			if route == "proxy-tls" {
				upstream = httptest.NewTLSServer(demollm.Handler())
				flags = []string{"--proxy-loopback", "--upstream-ca", caFile(t, upstream)}
				agentArgs = []string{"--llm", upstream.URL + "/v1"}
			} else {
				upstream = httptest.NewServer(demollm.Handler())
				flags = []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
			}
			defer upstream.Close()
			agentArgs = append(agentArgs, "--env-names", "--env-file", envFile, "--echo-env", "ACPTAP_T_TOKEN")
			args := append([]string{"--prompt", "Fix the typo in notes.txt", "--prompt", "Thanks!", "--", "acptap", "record", "--store", db, "--name", "env"}, flags...)
			cmd := exec.Command("testeditor", append(append(args, "--", "testagent"), agentArgs...)...)
			cmd.Dir = dir
			cmd.Env = agentEnv(extra...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("recording: %v\n%s", err, out)
			}
			upstream.Close() // replays are offline
			recorded := readEnvFile(t, envFile)
			if recorded["ACPTAP_T_TOKEN"] != secret {
				t.Fatalf("the recorded agent had ACPTAP_T_TOKEN=%q, want the planted secret", recorded["ACPTAP_T_TOKEN"])
			}
			stored := decompressedStore(t, db)
			raw, err := os.ReadFile(db)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{secret, password} {
				if bytes.Contains(stored, []byte(s)) || bytes.Contains(raw, []byte(s)) {
					t.Errorf("the secret %q reached the store", s)
				}
			}

			for i := range 5 {
				os.Remove(envFile)
				out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(extra...), "replay", "--store", db, "--requests", "fail", "env")
				if code != 0 || !strings.HasPrefix(out, "PASS env") || strings.Contains(out, "warning") {
					t.Fatalf("replay %d: exit %d; want PASS, no warning, exit 0\n%s%s", i+1, code, out, errOut)
				}
				replayed := readEnvFile(t, envFile)
				if got, want := slices.Sorted(maps.Keys(replayed)), slices.Sorted(maps.Keys(recorded)); !slices.Equal(got, want) {
					t.Fatalf("replay %d: the agent's variables are\n%q\nwant the recorded\n%q", i+1, got, want)
				}
				for k, v := range replayed {
					if strings.Contains(v, secret) || strings.Contains(v, password) {
						t.Errorf("replay %d: %s=%q: the secret reached the replayed agent", i+1, k, v)
					}
				}
				// The sandbox's root, whose tmp/ is its TMPDIR: HOME is
				// below it, where the recorded HOME was from the workspace.
				root := replayed["HOME"]
				for !strings.HasPrefix(filepath.Base(root), "acptap-replay-") && root != filepath.Dir(root) {
					root = filepath.Dir(root)
				}
				for k, want := range map[string]string{
					"ACPTAP_T_COLOR":    "blue",                                               // a setting, as recorded
					"ACPTAP_T_DIR":      filepath.Join(replayed["HOME"], "acptap-t"),          // under the sandbox's HOME
					"ACPTAP_T_ID":       filepath.Join(root, "tmp", "acptap-env-ACPTAP_T_ID"), // withheld: a placeholder
					"ACPTAP_T_PASSWORD": filepath.Join(root, "tmp", "acptap-env-ACPTAP_T_PASSWORD"),
					"ACPTAP_T_TOKEN":    "acptap-replay-dummy-key", // an API key's dummy
				} {
					if got := replayed[k]; got != want {
						t.Errorf("replay %d: %s=%q, want %q", i+1, k, got, want)
					}
				}
			}

			// --env wins over the recorded value.
			os.Remove(envFile)
			out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(extra...), "replay", "--store", db, "--env", "ACPTAP_T_COLOR=red", "env")
			if code != 0 {
				t.Fatalf("replay --env: exit %d, want 0\n%s%s", code, out, errOut)
			}
			if got := readEnvFile(t, envFile)["ACPTAP_T_COLOR"]; got != "red" {
				t.Errorf("replay --env ACPTAP_T_COLOR=red: the agent had ACPTAP_T_COLOR=%q, want red", got)
			}
		})
	}
}
