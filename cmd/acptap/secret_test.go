package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/testkit"
)

// The files by which secretagent and its test meet, in $SECRET_DIR.
const (
	secretURLsFile = "urls" // the agent's tap URLs, written once it has used them
	secretGoFile   = "go"   // made by the test once it has tried the tap itself
)

// secretAgent is an agent that reaches its LLM by both of the tap's routes
// and echoes the tap's URLs, which hold the tap's secret, everywhere it
// can:
//
//	secretagent    (with $LEAK_URL, $SECRET_DIR, $HTTP_PROXY, $OPENAI_BASE_URL)
//
// It POSTs the URLs to $LEAK_URL/v1/telemetry through the forward proxy,
// sends a chat completion to $OPENAI_BASE_URL directly, prints the URLs
// on stderr and writes them to $SECRET_DIR/urls; once $SECRET_DIR/go
// exists it prints a ready notification, waits for a line on stdin and
// exits. Any failure exits 1.
func secretAgent() {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "secretagent: "+format+"\n", args...)
		os.Exit(1)
	}
	proxyURL, base, dir := os.Getenv("HTTP_PROXY"), os.Getenv("OPENAI_BASE_URL"), os.Getenv("SECRET_DIR")
	pu, err := url.Parse(proxyURL)
	if err != nil || dir == "" || base == "" {
		fail("bad settings: HTTP_PROXY %q, OPENAI_BASE_URL %q, SECRET_DIR %q", proxyURL, base, dir)
	}
	post := func(client *http.Client, u, body string) {
		resp, err := client.Post(u, "application/json", strings.NewReader(body))
		if err != nil {
			fail("POST %s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fail("POST %s: %s %s", u, resp.Status, b)
		}
	}
	proxied := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	post(proxied, os.Getenv("LEAK_URL")+"/v1/telemetry", fmt.Sprintf(`{"proxy":%q,"base_url":%q}`, proxyURL, base))
	direct := &http.Client{Transport: &http.Transport{Proxy: nil}}
	post(direct, base+"/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`)
	fmt.Fprintf(os.Stderr, "secretagent: proxy %s, base URL %s\n", proxyURL, base)
	tmp := filepath.Join(dir, secretURLsFile+".tmp")
	if err := os.WriteFile(tmp, []byte(proxyURL+"\n"+base+"\n"), 0o600); err != nil {
		fail("%v", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, secretURLsFile)); err != nil {
		fail("%v", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, secretGoFile)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fail("no %s after a minute", secretGoFile)
		}
	}
	fmt.Println(`{"jsonrpc":"2.0","method":"secretagent/ready","params":{}}`)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail("reading stdin: %v", err)
	}
}

// waitURLs waits for secretagent's URLs and returns the tap's secret in
// them, checking that both URLs have the same one.
func waitURLs(t *testing.T, dir string, exited <-chan struct{}, stderr fmt.Stringer) (secret, proxyURL, baseURL string) {
	t.Helper()
	path := filepath.Join(dir, secretURLsFile)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != 2 {
				t.Fatalf("%s: %q, want two lines", path, b)
			}
			proxyURL, baseURL = lines[0], lines[1]
			break
		}
		select {
		case <-exited:
			t.Fatalf("the agent's command ended before the agent wrote %s:\n%s", path, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute:\n%s", path, stderr)
		}
	}
	pu, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ = pu.User.Password()
	bu, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(bu.Path, "/"), "/")
	if pu.User.Username() != "acptap" || len(secret) < 22 || first != secret {
		t.Fatalf("HTTP_PROXY %s and OPENAI_BASE_URL %s: want the user acptap and one secret of at least 22 characters as the password and the first path segment", proxyURL, baseURL)
	}
	return secret, proxyURL, baseURL
}

// tryAsIntruder runs the intruder, a child process that knows the tap's
// ports but not its secret, against the tap of proxyURL and baseURL, and
// checks that it was refused everything.
func tryAsIntruder(t *testing.T, proxyURL, baseURL, upstream, secret string) {
	t.Helper()
	pu, _ := url.Parse(proxyURL)
	bu, _ := url.Parse(baseURL)
	cmd := exec.Command("intruder", pu.Host, upstream+"/v1/telemetry",
		"http://"+bu.Host+"/v1/chat/completions",
		"http://"+bu.Host+"/"+strings.Repeat("x", len(secret))+"/v1/chat/completions")
	cmd.Env = agentEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("intruder: %v", err)
	}
	if got, want := string(out), testkit.IntruderWant(2); got != want {
		t.Errorf("the intruder got\n%s\nwant\n%s", got, want)
	}
}

// TestTapSecret: an agent recorded and replayed reaches the tap by both
// routes, while another process is refused by the recorder's tap and by
// the replay's; the two runs have different secrets, and neither secret
// reaches the store (raw, decompressed, exported), show in any form, the
// replay's reports, or acptap's own messages, though the agent echoed its
// URLs on stderr and in a request body.
func TestTapSecret(t *testing.T) {
	var mu sync.Mutex
	var upstreamGot []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		upstreamGot = append(upstreamGot, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/chat/completions" {
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()
	dir := t.TempDir()
	meet := filepath.Join(dir, "meet")
	if err := os.Mkdir(meet, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.db")

	// Recording.
	rec := exec.Command("acptap", "record", "--store", db, "--name", "sec", "--base-url", "OPENAI_BASE_URL="+upstream.URL+"/v1", "--", "secretagent")
	rec.Env = agentEnv("LEAK_URL="+upstream.URL, "SECRET_DIR="+meet)
	stdin, err := rec.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var recOut, recStderr testkit.SyncBuffer
	rec.Stdout, rec.Stderr = &recOut, &recStderr
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var recErr error
	go func() { recErr = rec.Wait(); close(exited) }()
	// On the way out, however the test ends, the agent is let go and its
	// recorder waited for.
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(meet, secretGoFile), nil, 0o600)
		stdin.Close()
		<-exited
	})
	secret1, proxyURL, baseURL := waitURLs(t, meet, exited, &recStderr)
	tryAsIntruder(t, proxyURL, baseURL, upstream.URL, secret1)
	if err := os.WriteFile(filepath.Join(meet, secretGoFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(recOut.String(), "secretagent/ready") {
		select {
		case <-exited:
			t.Fatalf("acptap record ended before the agent was ready: %v\n%s", recErr, recStderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"secretagent/bye","params":{}}`+"\n")
	stdin.Close()
	<-exited
	if recErr != nil {
		t.Fatalf("acptap record: %v\n%s", recErr, recStderr.String())
	}
	mu.Lock()
	if got, want := strings.Join(upstreamGot, ", "), "POST /v1/telemetry, POST /v1/chat/completions"; got != want {
		t.Errorf("the upstream got %s, want only the agent's %s", got, want)
	}
	mu.Unlock()

	// What acptap says and writes of the recording.
	var outputs bytes.Buffer
	for _, line := range strings.SplitAfter(recStderr.String(), "\n") {
		// The agent's own stderr passes through untouched; acptap's
		// messages are checked.
		if !strings.HasPrefix(line, "secretagent: ") {
			outputs.WriteString(line)
		}
	}
	if !strings.Contains(recStderr.String(), "secretagent: proxy "+proxyURL) {
		t.Errorf("the editor did not get the agent's stderr as written:\n%s", recStderr.String())
	}
	page := filepath.Join(dir, "sec.html")
	exported := filepath.Join(dir, "exported")
	var shown bytes.Buffer
	for _, args := range [][]string{{"show"}, {"show", "--json"}, {"show", "sec"}, {"show", "--json", "sec"},
		{"show", "--html", "-o", page, "sec"}, {"export", "--dir", exported, "sec"}} {
		out, errOut, code := runAcptap(t, dir, agentEnv(), append([]string{args[0], "--store", db}, args[1:]...)...)
		if code != 0 {
			t.Fatalf("acptap %v: exit %d\n%s", args, code, errOut)
		}
		shown.WriteString(out + errOut)
	}
	for _, want := range []string{"/[REDACTED:ACPTAP_TAP_SECRET]/v1", "acptap:[REDACTED:ACPTAP_TAP_SECRET]@127.0.0.1"} {
		if !strings.Contains(shown.String(), want) {
			t.Errorf("show has no %q: the agent's echo of its URLs was not recorded masked\n%s", want, shown.String())
		}
	}
	outputs.Write(shown.Bytes())
	outputs.Write(readTree(t, page, exported))
	outputs.Write(decompressedStore(t, db))
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	outputs.Write(raw)
	if bytes.Contains(outputs.Bytes(), []byte(secret1)) {
		t.Errorf("the recorder's secret reached the store or an output")
	}

	// Replay, with its own tap and secret.
	os.Remove(filepath.Join(meet, secretURLsFile))
	os.Remove(filepath.Join(meet, secretGoFile))
	junit, html := filepath.Join(dir, "junit.xml"), filepath.Join(dir, "html")
	rep := exec.Command("acptap", "replay", "--store", db, "--junit", junit, "--html", html,
		"--env", "LEAK_URL="+upstream.URL, "--env", "SECRET_DIR="+meet, "sec")
	rep.Dir = dir
	rep.Env = agentEnv()
	var repOut, repErr testkit.SyncBuffer
	rep.Stdout, rep.Stderr = &repOut, &repErr
	if err := rep.Start(); err != nil {
		t.Fatal(err)
	}
	repExited := make(chan struct{})
	go func() { rep.Wait(); close(repExited) }()
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(meet, secretGoFile), nil, 0o600)
		<-repExited
	})
	secret2, proxyURL, baseURL := waitURLs(t, meet, repExited, &repErr)
	if secret2 == secret1 {
		t.Errorf("the replay's tap has the recorder's secret")
	}
	tryAsIntruder(t, proxyURL, baseURL, upstream.URL, secret2)
	if err := os.WriteFile(filepath.Join(meet, secretGoFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	<-repExited
	if code := rep.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("acptap replay: exit %d\n%s\n%s", code, repOut.String(), repErr.String())
	}
	mu.Lock()
	if len(upstreamGot) != 2 {
		t.Errorf("the upstream got %d requests, want the recording's 2: the replay went out", len(upstreamGot))
	}
	mu.Unlock()
	replayed := append([]byte(repOut.String()+repErr.String()), readTree(t, junit, html)...)
	if !bytes.Contains(replayed, []byte("sec")) {
		t.Errorf("the replay's outputs do not name the recording: were they read?")
	}
	for i, s := range []string{secret1, secret2} {
		if bytes.Contains(replayed, []byte(s)) {
			t.Errorf("secret %d reached the replay's output, JUnit report or HTML pages", i+1)
		}
	}
}

// readTree returns the contents of the files at paths, directories walked;
// each must exist.
func readTree(t *testing.T, paths ...string) []byte {
	t.Helper()
	var all bytes.Buffer
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			all.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return all.Bytes()
}

// tapURLWithSecret matches a loopback URL of a tap with a secret in its
// path, unmasked.
var tapURLWithSecret = regexp.MustCompile(`127\.0\.0\.1:[0-9]+/[A-Za-z0-9_-]{32}`)

// TestTapSecretInRequests: an agent whose LLM requests carry its base URL
// (here in the system prompt, from ${OPENAI_BASE_URL} in its arguments)
// has the recorder's secret masked in the recording and the replay's
// masked in what replay compares and reports: the requests differ only by
// the tap's port, and the report of that shows neither secret.
func TestTapSecretInRequests(t *testing.T) {
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "echo", agentEnv("OPENAI_API_KEY=sk-test-0123456789"),
		[]string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"},
		"--llm", "${OPENAI_BASE_URL}", "--system", "base ${OPENAI_BASE_URL} end")
	shown, errOut, code := runAcptap(t, dir, agentEnv(), "show", "--store", db, "--json", "echo")
	if code != 0 {
		t.Fatalf("acptap show: exit %d\n%s", code, errOut)
	}
	if !regexp.MustCompile(`base http://127\.0\.0\.1:[0-9]+/\[REDACTED:ACPTAP_TAP_SECRET\]/v1 end`).MatchString(shown) {
		t.Errorf("the recorded requests lack the base URL with its secret masked:\n%s", shown)
	}
	if m := tapURLWithSecret.FindString(shown); m != "" {
		t.Errorf("show prints %s: the recorder's secret", m)
	}
	out, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--requests", "warn", "echo")
	if code != 0 {
		t.Fatalf("acptap replay: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out+errOut, "[REDACTED:ACPTAP_TAP_SECRET]") {
		t.Errorf("the replay reports no drift of the base URL in the system prompt, masked:\n%s\n%s", out, errOut)
	}
	if m := tapURLWithSecret.FindString(out + errOut); m != "" {
		t.Errorf("the replay prints %s: the replay's secret\n%s\n%s", m, out, errOut)
	}
}
