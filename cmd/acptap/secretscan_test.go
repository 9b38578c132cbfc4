package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// A plantedSecret is a credential the scan test puts where editors,
// agents and users put them, and the masked form that must be recorded in
// its place.
type plantedSecret struct {
	name  string // the subtest's
	value string
	// masked, if not "", is in show --json where the secret was: what
	// shows that the place was recorded, masked, rather than left out.
	masked string
}

// The secrets planted, one per place. Each is unlike any other text of
// the run, so that a hit can only be a leak.
var (
	plantBaseURL   = plantedSecret{"base-url", "pw-baseurl-planted-7f3a", ""}
	plantMeta      = plantedSecret{"initialize-meta", "pk-meta-planted-91c2", `\"proxy_key\":\"[REDACTED]\"`}
	plantAuth      = plantedSecret{"authenticate", "sk-auth-planted-44d1", `\"apiKey\":\"[REDACTED]\"`}
	plantHeaderTok = plantedSecret{"header-x-auth-token", "tok-header-planted-1b9e", `"X-Auth-Token":["[REDACTED]"]`}
	// Also on the agent's command line, as a header.
	plantHeaderSec = plantedSecret{"header-x-api-secret", "sec-header-planted-2c8f", `"X-Api-Secret":["[REDACTED]"]`}
	plantQuery     = plantedSecret{"query", "qk-query-planted-5e6d", `key=%5BREDACTED%5D`}
	plantCookie    = plantedSecret{"cookie", "ck-cookie-planted-8d2e", `"Cookie":["[REDACTED]"]`}
	plantSetCookie = plantedSecret{"set-cookie", "ck-setcookie-planted-0a4b", `"Set-Cookie":["[REDACTED]"]`}
	plantArgv      = plantedSecret{"argv-key", "sk-argv-planted-6c1f", `"--api-key","[REDACTED]"`}
	// The agent's variable, in its LLM request's body and echoed on its
	// stdout (a message chunk) and stderr.
	plantEnv = plantedSecret{"env-echo-and-body", "svc-env-planted-3a7b", `environment: SERVICE_TOKEN=[REDACTED:SERVICE_TOKEN]`}
)

// TestSecretsNeverStored plants a credential in each place one reaches
// acptap (a base URL, initialize's _meta, authenticate, headers, a
// query, a cookie each way, the agent's command line, its environment
// echoed in its output and in a request body) and finds none of them in
// the store file's bytes, in any zstd frame in it, in the store's values
// decompressed, in the exported text fixture, in show, show --json and
// show --html, in a replay's report, JUnit file and HTML pages, nor in
// what acptap says. Each secret is a subtest: removing the masking of one
// place fails its subtest.
func TestSecretsNeverStored(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request // what the upstream received, to know each plant was sent
	var bodies []string
	body := chatSSE(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Set-Cookie", "sid="+plantSetCookie.value+"; Path=/; HttpOnly")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer upstream.Close()
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	var said bytes.Buffer // what acptap said, on its stderr

	// A base URL with credentials is refused before the store is made;
	// once the store is there, before a recording is added.
	for range 2 {
		out, errOut, code := runAcptap(t, dir, agentEnv(), "record", "--store", db, "--name", "bad",
			"--base-url", "OPENAI_BASE_URL=http://user:"+plantBaseURL.value+"@"+strings.TrimPrefix(upstream.URL, "http://")+"/v1", "--", "testagent")
		if code != 2 || !strings.Contains(errOut, "credentials in the URL") {
			t.Fatalf("record with a base URL with credentials: exit %d, want 2 and the reason\n%s%s", code, out, errOut)
		}
		said.WriteString(out + errOut)
		if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
			// The second attempt runs into a store with a recording.
			recordSession(t, dir, db, "first", agentEnv(), nil)
		}
	}

	if out, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db); strings.Contains(out, "bad") {
		t.Errorf("the refused recording is in the store:\n%s", out)
	}

	editorArgs := []string{
		"--initialize-meta", `{"proxyConfig":{"url":"https://gateway.example/v1","proxy_key":"` + plantMeta.value + `"}}`,
		"--authenticate", `{"methodId":"api-key","apiKey":"` + plantAuth.value + `"}`,
		"--prompt", "hello",
		"--", "acptap", "record", "--store", db, "--name", "sec", "--no-proxy-env",
		"--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1",
		"--", "testagent", "--stderr-log",
		"--api-key", plantArgv.value,
		"--header", "X-Auth-Token: " + plantHeaderTok.value,
		"--header", "X-Api-Secret: " + plantHeaderSec.value,
		"--header", "Cookie: sid=" + plantCookie.value,
		"--query", "key=" + plantQuery.value,
		"--echo-env", "SERVICE_TOKEN",
	}
	ed := exec.Command("testeditor", editorArgs...)
	ed.Dir = dir
	ed.Env = agentEnv("SERVICE_TOKEN=" + plantEnv.value)
	var edOut, edErr bytes.Buffer
	ed.Stdout, ed.Stderr = &edOut, &edErr
	if err := ed.Run(); err != nil {
		t.Fatalf("testeditor: %v\n%s", err, edErr.String())
	}

	// Forwarded as sent: the agent got the editor's secrets, the editor
	// the agent's echo, the upstream every header, query and body.
	for _, want := range []string{plantMeta.value, plantAuth.value} {
		if !strings.Contains(edErr.String(), want) {
			t.Errorf("the agent's log of what it received lacks %s: the editor's frames were not forwarded as sent\n%s", want, edErr.String())
		}
	}
	if want := "environment: SERVICE_TOKEN=" + plantEnv.value; !strings.Contains(edOut.String(), want) {
		t.Errorf("the editor did not get the agent's %q as sent:\n%s", want, edOut.String())
	}
	mu.Lock()
	if len(got) == 0 {
		t.Fatalf("the upstream got no request")
	}
	r := got[0]
	for k, want := range map[string]string{"X-Auth-Token": plantHeaderTok.value, "X-Api-Secret": plantHeaderSec.value,
		"Cookie": "sid=" + plantCookie.value, "Authorization": "Bearer " + plantArgv.value} {
		if r.Header.Get(k) != want {
			t.Errorf("the upstream got %s %q, want %q", k, r.Header.Get(k), want)
		}
	}
	if r.URL.Query().Get("key") != plantQuery.value || !strings.Contains(bodies[0], plantEnv.value) {
		t.Errorf("the upstream got %s with body %s: want the query key and the variable in the body", r.URL, bodies[0])
	}
	mu.Unlock()
	for _, line := range strings.SplitAfter(edErr.String(), "\n") {
		// The agent's own stderr passes through untouched; acptap's
		// messages are scanned.
		if strings.HasPrefix(line, "acptap: ") {
			said.WriteString(line)
		}
	}

	// Everything acptap stores or shows of it.
	sources := map[string][]byte{"acptap's messages": said.Bytes()}
	page, exported := filepath.Join(dir, "sec.html"), filepath.Join(dir, "exported")
	for _, args := range [][]string{{"show"}, {"show", "--json"}, {"show", "sec"}, {"show", "--json", "sec"},
		{"show", "--html", "-o", page, "sec"}, {"export", "--dir", exported, "sec"}} {
		out, errOut, code := runAcptap(t, dir, agentEnv(), append([]string{args[0], "--store", db}, args[1:]...)...)
		if code != 0 {
			t.Fatalf("acptap %v: exit %d\n%s", args, code, errOut)
		}
		sources["acptap "+strings.Join(args, " ")] = []byte(out + errOut)
	}
	sources["show --html page"] = readTree(t, page)
	sources["exported fixture"] = readTree(t, exported)
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	sources["store file bytes"] = raw
	sources["zstd frames in the store file"] = zstdFrames(t, raw)
	sources["store values, decompressed"] = decompressedStore(t, db)

	junit, html := filepath.Join(dir, "junit.xml"), filepath.Join(dir, "replay-html")
	out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), "replay", "--store", db, "--junit", junit, "--html", html, "-v", "sec")
	if code != 0 && code != ExitDiverged {
		t.Fatalf("acptap replay: exit %d\n%s%s", code, out, errOut)
	}
	sources["replay's report"] = []byte(out + errOut)
	// Replay compares on the masked form: the replayed agent's echo of
	// its dummy key, and its request with it, compare as the recorded
	// ones; the editor's masked frames were replayed as the mask.
	if !strings.HasPrefix(out, "PASS sec") || strings.Contains(out, "warning") || !strings.Contains(errOut, `"proxy_key":"[REDACTED]"`) {
		t.Errorf("replay: exit %d, want a PASS without warnings and the mask replayed\n%s%s", code, out, errOut)
	}
	sources["replay's JUnit and HTML"] = readTree(t, junit, html)

	shown := string(sources["acptap show --json"]) + string(sources["acptap show --json sec"])
	for _, p := range []plantedSecret{plantBaseURL, plantMeta, plantAuth, plantHeaderTok, plantHeaderSec, plantQuery, plantCookie, plantSetCookie, plantArgv, plantEnv} {
		t.Run(p.name, func(t *testing.T) {
			for what, b := range sources {
				if i := bytes.Index(b, []byte(p.value)); i >= 0 {
					t.Errorf("%s holds the %s secret: ...%s...", what, p.name, b[max(0, i-120):min(len(b), i+len(p.value)+40)])
				}
			}
			if p.masked != "" && !strings.Contains(shown, p.masked) {
				t.Errorf("show --json sec lacks %s: the %s was not recorded masked", p.masked, p.name)
			}
		})
	}
}

// zstdFrames decompresses every zstd frame that begins anywhere in b, the
// bytes of a store file, each up to where it ends or breaks off.
func zstdFrames(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	frames := 0
	for i := 0; ; i++ {
		j := bytes.Index(b[i:], zstdMagic)
		if j < 0 {
			break
		}
		i += j
		dec, err := zstd.NewReader(bytes.NewReader(b[i:]), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			t.Fatal(err)
		}
		// What decodes before the frame ends, or the bytes after it
		// are not a frame, is kept.
		if n, _ := io.Copy(&out, dec); n > 0 {
			frames++
		}
		dec.Close()
	}
	if frames == 0 {
		t.Fatalf("no zstd frame in the store file: is it compressed at all?")
	}
	fmt.Fprintf(&out, "\n%d frames\n", frames)
	return out.Bytes()
}

// TestReplayTapSecretInAgentOutput: an agent whose LLM call fails prints
// its base URL, which holds the tap's secret, in its answer. Recorded,
// the recorder's secret is masked; replayed, the replay's is masked too
// before anything compares or prints the agent's lines: the report, its
// diff of a changed agent, the HTML pages, the JUnit file, the agent's
// stderr (-v; it echoes its base URL there too) and what calibrate learns
// and stores.
func TestReplayTapSecretInAgentOutput(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	defer upstream.Close()
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "fail", agentEnv(), []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}, "--stderr-log", "--echo-env", "OPENAI_BASE_URL")
	shown, _, _ := runAcptap(t, dir, agentEnv(), "show", "--store", db, "--json", "fail")
	if !regexp.MustCompile(`error: POST http://127\.0\.0\.1:[0-9]+/\[REDACTED:ACPTAP_TAP_SECRET\]/v1/chat/completions: 503`).MatchString(shown) {
		t.Fatalf("the recording lacks the agent's error with the tap's URL masked:\n%s", shown)
	}

	var all bytes.Buffer
	for i, args := range [][]string{
		{"replay", "--store", db, "-v", "--html", filepath.Join(dir, "h1"), "--junit", filepath.Join(dir, "j1.xml"), "fail"},
		// A changed agent: its answer differs, and the diff shows the
		// error line beside it.
		{"replay", "--store", db, "-v", "--html", filepath.Join(dir, "h2"), "--junit", filepath.Join(dir, "j2.xml"), "fail", "--", "testagent", "--stderr-log", "--echo-env", "OPENAI_BASE_URL", "--thought", "changed"},
		{"calibrate", "--store", db, "--runs", "2", "fail"},
		{"show", "--store", db, "--json", "fail"},
		{"export", "--store", db, "--dir", filepath.Join(dir, "exported"), "fail"},
	} {
		out, errOut, code := runAcptap(t, t.TempDir(), agentEnv(), args...)
		if code == ExitUsage || code > ExitDiverged {
			t.Fatalf("acptap %v: exit %d\n%s%s", args, code, out, errOut)
		}
		if i == 1 && (code != ExitDiverged || !strings.Contains(out, "[REDACTED:ACPTAP_TAP_SECRET]")) {
			t.Errorf("the changed agent's replay: exit %d, want %d and the error line, masked, in the diff\n%s", code, ExitDiverged, out)
		}
		all.WriteString(out + errOut)
	}
	all.Write(readTree(t, filepath.Join(dir, "h1"), filepath.Join(dir, "h2"), filepath.Join(dir, "j1.xml"), filepath.Join(dir, "j2.xml"), filepath.Join(dir, "exported")))
	all.Write(decompressedStore(t, db))
	if m := tapURLWithSecret.FindString(all.String()); m != "" {
		i := strings.Index(all.String(), m)
		t.Errorf("a replay's tap secret reached an output or the store: %s in ...%s...", m, all.String()[max(0, i-200):min(all.Len(), i+80)])
	}
	if !strings.Contains(all.String(), "[REDACTED:ACPTAP_TAP_SECRET]") {
		t.Errorf("no masked tap URL anywhere: did the agent print its URL?")
	}
}
