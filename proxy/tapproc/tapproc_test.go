package tapproc

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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/testkit"
	"github.com/acptap/acptap/proxy"

	"github.com/acptap/acptap/internal/stamp"
)

// childArg, as the test binary's first argument, makes it the tap
// process; parentArg makes it a parent that starts one, with the CA
// directory its second argument, prints the tap process's pid and waits
// to be killed.
const (
	childArg  = "tap-process"
	parentArg = "tap-parent"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case childArg:
			os.Exit(Run())
		case parentArg:
			ca, err := proxy.LoadOrCreateCA(os.Args[2])
			if err == nil {
				var p *Process
				p, err = Start(Config{Path: os.Args[0], Args: []string{os.Args[0], childArg}, Tap: proxy.Config{CA: ca}})
				if err == nil {
					fmt.Println(p.cmd.Process.Pid)
					select {}
				}
			}
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// recorded is what a testRecorder got of one exchange.
type recorded struct {
	id      uint64
	at      time.Duration
	started *exchange.Exchange
	ended   *exchange.Exchange
}

// testRecorder keeps what it is given. Its Begin must not be called: the
// tap process stamps exchanges from the SharedClock.
type testRecorder struct {
	t    *testing.T
	mu   sync.Mutex
	got  map[uint64]*recorded
	ends []uint64 // ids in the order Ended got them
}

func newTestRecorder(t *testing.T) *testRecorder {
	return &testRecorder{t: t, got: map[uint64]*recorded{}}
}

func (r *testRecorder) Begin() (uint64, time.Time) {
	r.t.Error("Begin called: the tap process stamps exchanges from the shared clock")
	return 0, time.Time{}
}

// of returns the record of exchange id, new if need be.
func (r *testRecorder) of(id uint64) *recorded {
	rec := r.got[id]
	if rec == nil {
		rec = &recorded{id: id}
		r.got[id] = rec
	}
	return rec
}

func (r *testRecorder) Started(id uint64, at time.Duration, x *exchange.Exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.of(id)
	if rec.ended != nil {
		r.t.Errorf("Started(%d) after Ended", id)
	}
	rec.at, rec.started = at, x
}

func (r *testRecorder) Ended(id uint64, at time.Duration, x *exchange.Exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.of(id)
	if rec.ended != nil {
		r.t.Errorf("Ended(%d) twice", id)
	}
	rec.at, rec.ended = at, x
	r.ends = append(r.ends, id)
}

// ended returns the ended exchanges in the order of their ids.
func (r *testRecorder) ended() []*recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*recorded
	for _, rec := range r.got {
		if rec.ended != nil {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b *recorded) int { return int(a.id) - int(b.id) })
	return out
}

// testConfig is a Config that runs the test binary as the tap process,
// with a CA of the test's own and one route, OPENAI_BASE_URL, to
// upstream.
func testConfig(t *testing.T, upstream string, rec *testRecorder, l *testkit.Logs) Config {
	ca, err := proxy.LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Path:    os.Args[0],
		Args:    []string{os.Args[0], childArg},
		Env:     []string{"HOME=/nowhere", "OPENAI_BASE_URL=" + upstream},
		Routing: proxy.Routing{Routes: []proxy.Route{{Var: "OPENAI_BASE_URL", Upstream: upstream}}},
		Tap:     proxy.Config{CA: ca, Recorder: rec, Logf: l.Logf},
	}
}

// sseUpstream serves three events to any request, the last after
// release is closed if it is not nil.
func sseUpstream(t *testing.T, release chan struct{}) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			if i == 2 && release != nil {
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestRecordsInTheParent(t *testing.T) {
	up := sseUpstream(t, nil)
	rec, l := newTestRecorder(t), &testkit.Logs{}
	cfg := testConfig(t, up.URL, rec, l)
	cfg.Tap.Start = time.Now().Add(-time.Hour)
	var redacted []string
	cfg.Tap.Redact = func(x *exchange.Exchange) {
		// In this process, before the Recorder.
		redacted = append(redacted, x.URL)
		x.RequestHeaders.Set("Authorization", "[masked]")
	}
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	local := p.Local["OPENAI_BASE_URL"]
	if !strings.HasPrefix(local, "http://127.0.0.1:") {
		t.Fatalf("local URL %q, want one on 127.0.0.1", local)
	}
	if !slices.Contains(p.Env, "OPENAI_BASE_URL="+local) || !slices.ContainsFunc(p.Env, func(kv string) bool { return strings.HasPrefix(kv, "HTTPS_PROXY=http://") }) {
		t.Errorf("agent's env %q lacks the route's URL or HTTPS_PROXY", p.Env)
	}

	before := time.Now()
	req, _ := http.NewRequest("POST", local+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	req.Header.Set("Authorization", "Bearer sk-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "data: {\"n\":0}\n\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\n"
	if string(body) != want {
		t.Errorf("the agent got %q, want %q", body, want)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	got := rec.ended()
	if len(got) != 1 {
		t.Fatalf("got %d exchanges, want 1; logs:\n%s", len(got), l)
	}
	x := got[0].ended
	if x.End != exchange.EndComplete || string(x.Body()) != want || string(x.RequestBody) != `{"model":"m"}` {
		t.Errorf("got %v with body %q and request %q, want complete, %q, the request", x.End, x.Body(), x.RequestBody, want)
	}
	if h := x.RequestHeaders.Get("Authorization"); h != "[masked]" {
		t.Errorf("Authorization recorded as %q, want it masked by Redact", h)
	}
	// Redact sees what the Recorder is given: the exchange as it ended,
	// and first in flight if it was in flight long enough to be recorded
	// so (as on a busy machine).
	records := 1
	if s := got[0].started; s != nil {
		records = 2
		if h := s.RequestHeaders.Get("Authorization"); h != "[masked]" {
			t.Errorf("Authorization recorded in flight as %q, want it masked by Redact", h)
		}
	}
	if len(redacted) != records || slices.ContainsFunc(redacted, func(u string) bool { return !strings.HasPrefix(u, up.URL) }) {
		t.Errorf("Redact saw %q, want the exchange to %s %d times, once per record of it", redacted, up.URL, records)
	}
	// Times count from Config.Start, an hour ago, in the tap process too.
	if at, lo := got[0].at, before.Sub(cfg.Tap.Start); at < lo || at > lo+time.Minute {
		t.Errorf("the exchange came at %v after Start, want about %v", at, lo)
	}
}

// TestStampsInArrivalOrder has the tap process stamp exchanges from a
// clock this process stamps its own events from: each exchange's Stamp
// lies between this process's Stamps of before its request and after its
// response, counts the exchanges in the order they came, and its time is
// on this process's clock.
func TestStampsInArrivalOrder(t *testing.T) {
	up := sseUpstream(t, nil)
	rec, l := newTestRecorder(t), &testkit.Logs{}
	cfg := testConfig(t, up.URL, rec, l)
	c, err := NewSharedClock()
	if err != nil {
		t.Fatal(err)
	}
	// Exchanges this process counted before: the tap process goes on
	// from there.
	const first = 100
	for range first {
		c.Clock().Exchange()
	}
	cfg.Clock = c
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 20
	var before, after [n]stamp.Stamp
	for i := range n {
		before[i] = c.Clock().Frame()
		resp, err := http.Get(fmt.Sprintf("%s/v1/r%d", p.Local["OPENAI_BASE_URL"], i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		after[i] = c.Clock().Frame()
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got := rec.ended()
	if len(got) != n {
		t.Fatalf("got %d exchanges, want %d; logs:\n%s", len(got), n, l)
	}
	for i, r := range got {
		st := stamp.Stamp(r.id)
		if want := fmt.Sprintf("/v1/r%d", i); !strings.HasSuffix(r.ended.URL, want) {
			t.Errorf("exchange %d is %s, want the request to %s", i, r.ended.URL, want)
		}
		if st <= before[i] || st >= after[i] {
			t.Errorf("exchange %d: stamp %#x, want between %#x and %#x, this process's before its request and after its response", i, st, before[i], after[i])
		}
		if got := st.Exchanges(first); got != first+uint64(i)+1 {
			t.Errorf("exchange %d: counted as exchange %d, want %d", i, got, first+i+1)
		}
		if lo, hi := before[i].Nanos(), after[i].Nanos(); st.Nanos() <= lo || st.Nanos() >= hi {
			t.Errorf("exchange %d: time %d, want between %d and %d", i, st.Nanos(), lo, hi)
		}
	}
	if got := c.Clock().Frame().Exchanges(first); got != first+n {
		t.Errorf("the clock counts %d exchanges, want %d", got, first+n)
	}
}

func TestCloseEndsExchangesInFlight(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := sseUpstream(t, release)
	rec, l := newTestRecorder(t), &testkit.Logs{}
	p, err := Start(testConfig(t, up.URL, rec, l))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(p.Local["OPENAI_BASE_URL"] + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Two events arrived; the third waits for release.
	buf := make([]byte, len("data: {\"n\":0}\n\ndata: {\"n\":1}\n\n"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := rec.ended()
	if len(got) != 1 || got[0].ended.End != exchange.EndTapClosed || string(got[0].ended.Body()) != string(buf) {
		t.Fatalf("got %d exchanges (%+v), want the one in flight, ended by the tap closing, with its two events; logs:\n%s", len(got), got, l)
	}
}

func TestStartFailures(t *testing.T) {
	up := sseUpstream(t, nil)
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		want  func(error) bool
	}{
		{"no command", func(c *Config) { c.Path, c.Args = "", nil }, func(err error) bool { return errors.Is(err, ErrNoCommand) }},
		{"missing program", func(c *Config) { c.Path = "/nonexistent/acptap" }, func(err error) bool {
			return errors.Is(err, os.ErrNotExist) && strings.Contains(err.Error(), "starting the tap process")
		}},
		{"not the tap", func(c *Config) {
			c.Path, c.Args = "/bin/sh", []string{"sh", "-c", "echo usage: nothing here >&2; echo hello"}
		}, func(err error) bool {
			return errors.Is(err, ErrNotTap) && strings.Contains(err.Error(), "it said: usage: nothing here")
		}},
		{"silent", func(c *Config) { c.Path, c.Args = "/bin/sh", []string{"sh", "-c", "exit 3"} }, func(err error) bool {
			return errors.Is(err, ErrNotTap) && strings.Contains(err.Error(), "exit status 3")
		}},
		{"bad route", func(c *Config) {
			c.Routing.Routes = append(c.Routing.Routes, proxy.Route{Var: "BAD_URL", Upstream: "ftp://example.com"})
		}, func(err error) bool {
			var se *StartError
			return errors.As(err, &se) && se.Stage == StageRoute && se.Var == "BAD_URL"
		}},
		{"bad upstream CA", func(c *Config) { c.UpstreamCAs = []byte("not PEM") }, func(err error) bool {
			var se *StartError
			return errors.As(err, &se) && se.Stage == StageTap && strings.Contains(err.Error(), "no PEM certificate")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, up.URL, newTestRecorder(t), &testkit.Logs{})
			tc.tweak(&cfg)
			p, err := Start(cfg)
			if err == nil {
				p.Close()
				t.Fatal("Start succeeded")
			}
			if !tc.want(err) {
				t.Errorf("got %v (%T)", err, err)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error %q is not one line", err)
			}
		})
	}
}

func TestEndedEarly(t *testing.T) {
	up := sseUpstream(t, nil)
	rec, l := newTestRecorder(t), &testkit.Logs{}
	p, err := Start(testConfig(t, up.URL, rec, l))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	if !strings.Contains(l.String(), "the agent's HTTP requests through the tap fail from now on") {
		t.Errorf("logs %q do not say that the tap process ended", l)
	}
	err = p.Close()
	if !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("Close: %v, want ErrEnded by a SIGKILL", err)
	}
}

// TestParentKilled kills a process that started a tap process with
// SIGKILL, and checks that the tap process ends too.
func TestParentKilled(t *testing.T) {
	parent := exec.Command(os.Args[0], parentArg, filepath.Join(t.TempDir(), "ca"))
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("reading the tap process's pid: %v", err)
	}
	parent.Process.Kill()
	parent.Wait()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		// Gone, or a zombie that its new parent has yet to reap.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || bytes.Contains(stat, []byte(") Z ")) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the tap process %d outlived its parent by a minute", pid)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	var b []byte
	msgs := []message{
		{kind: kindHello, payload: []byte(helloMagic)},
		{kind: kindStarted, id: 7, at: time.Second, payload: bytes.Repeat([]byte("x"), 100)},
		{kind: kindEnded, id: 1 << 60, at: -1, payload: nil},
	}
	for _, m := range msgs {
		b = appendMessage(b, m)
	}
	r := bytes.NewReader(b)
	for _, want := range msgs {
		got, err := readMessage(r, maxPayload)
		if err != nil || got.kind != want.kind || got.id != want.id || got.at != want.at || !bytes.Equal(got.payload, want.payload) {
			t.Fatalf("got %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := readMessage(r, maxPayload); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
	cut := bytes.NewReader(b[:len(b)-1])
	var err error
	for err == nil {
		_, err = readMessage(cut, maxPayload)
	}
	if err != io.ErrUnexpectedEOF {
		t.Errorf("a cut message: %v, want io.ErrUnexpectedEOF", err)
	}
}

func FuzzReadMessage(f *testing.F) {
	f.Add(appendMessage(nil, message{kind: kindNotice, payload: []byte("http tap: x")}))
	f.Add(appendMessage(nil, message{kind: kindEnded, id: 3, at: 5, payload: []byte(`{"method":"GET"}`)}))
	f.Add([]byte{0xff, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			m, err := readMessage(r, 1<<20)
			if err != nil {
				return
			}
			if m.kind < kindHello || m.kind > kindEnded {
				t.Fatalf("read a message of kind %d", m.kind)
			}
			// What was read encodes to the bytes it was read from.
			if again, err := readMessage(bytes.NewReader(appendMessage(nil, m)), 1<<20); err != nil || again.id != m.id || !bytes.Equal(again.payload, m.payload) {
				t.Fatalf("%+v does not round-trip: %+v, %v", m, again, err)
			}
		}
	})
}
