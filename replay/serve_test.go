package replay

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
)

// TestReplayHoldsOneExchange: a replay of a session whose LLM requests,
// each carrying the conversation so far, add up to many times the
// largest holds about one of them at a time. At each exchange it serves,
// after a collection, the heap holds well under half the sum of the
// recorded requests, which a replay holding the recorded exchanges would
// hold at least; and each exchange is read back once, for its request.
func TestReplayHoldsOneExchange(t *testing.T) {
	prompts := make([]string, 60)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("question %d: %s", i+1, strings.Repeat("what changed in this step of the build? ", 400))
	}
	st := openStore(t)
	recordSession(t, st, "long", session{llm: true, prompts: prompts})
	rec, err := load(st, "long")
	if err != nil {
		t.Fatal(err)
	}
	var sum, largest int
	for _, n := range rec.llm.bodies {
		sum += n
		largest = max(largest, n)
	}
	rec.close()
	if len(rec.exchanges) != len(prompts) || sum < 15*largest {
		t.Fatalf("the recording has %d exchanges, %d bytes of requests, the largest %d; want %d and the sum many times the largest", len(rec.exchanges), sum, largest, len(prompts))
	}

	var mu sync.Mutex // guards the two below
	var loads int
	var peak uint64
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	testLoaded = func(rec *recording) {
		rec.llm.loaded = func(int, *exchange.Exchange) {
			h := heap()
			mu.Lock()
			defer mu.Unlock()
			loads++
			peak = max(peak, h)
		}
	}
	defer func() { testLoaded = nil }()
	res := replayIt(t, st, "long", runOptions(t))
	if !res.Equal() || len(res.Warnings) != 0 {
		t.Fatalf("replay: divergences %v, warnings %v", res.Divergences, res.Warnings)
	}
	held := int64(peak) - int64(base)
	t.Logf("requests: %d exchanges, %.1f MiB, the largest %.1f MiB; heap held while serving: %.1f MiB", loads, float64(sum)/(1<<20), float64(largest)/(1<<20), float64(held)/(1<<20))
	if loads != len(prompts) {
		t.Errorf("%d exchanges read back, want %d, one per request", loads, len(prompts))
	}
	if held > int64(sum/2) {
		t.Errorf("the replay held %d bytes while serving, want well under the %d of the recorded requests: about the largest, %d, a few times", held, sum, largest)
	}
}

// TestServeTimeFailure: a recorded exchange that cannot be read back from
// the spool, or decoded, when a request comes for it fails the request
// (502 from the tap) and is reported as an llmserver.LoadError naming
// the exchange and wrapping the cause; Run fails with it.
func TestServeTimeFailure(t *testing.T) {
	st := openStore(t)
	recordSession(t, st, "chat", session{llm: true, prompts: []string{"hello"}})
	serve := func(t *testing.T, breakIt func(xs *exchangeSpool)) *llmserver.LoadError {
		t.Helper()
		rec, err := load(st, "chat")
		if err != nil {
			t.Fatal(err)
		}
		defer rec.close()
		breakIt(rec.llm)
		llm, err := startLLM(rec, []string{"agent"}, nil, &Options{CA: testCA(t)}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer llm.close()
		base, _ := envValue(llm.env, "OPENAI_BASE_URL")
		if status, _ := post(t, base+"/chat/completions", `{"model":"test-model","stream":true}`); status != http.StatusBadGateway {
			t.Errorf("the request got %d, want 502", status)
		}
		r := llm.server.Report()
		if len(r.LoadErrors) != 1 {
			t.Fatalf("load errors %v, want one", r.LoadErrors)
		}
		le := r.LoadErrors[0]
		if le.Number != 1 || le.Seq != rec.exchanges[0].Seq {
			t.Errorf("load error of llm #%d (event %d), want llm #1 (event %d)", le.Number, le.Seq, rec.exchanges[0].Seq)
		}
		return le
	}
	t.Run("read", func(t *testing.T) {
		le := serve(t, func(xs *exchangeSpool) { xs.f.Close() })
		if !errors.Is(le, ErrSpool) || !strings.HasPrefix(le.Error(), "llm #1 (event ") || !strings.Contains(le.Error(), "reading line 0 back") {
			t.Errorf("load error %q, want ErrSpool, naming llm #1 and the line read back", le)
		}
	})
	t.Run("decode", func(t *testing.T) {
		le := serve(t, func(xs *exchangeSpool) {
			if _, err := xs.f.WriteAt([]byte("not an exchange"), xs.starts[0]+int64(xs.bodies[0])); err != nil {
				t.Fatal(err)
			}
		})
		if errors.Is(le, ErrSpool) || !strings.Contains(le.Error(), "decoding exchange") {
			t.Errorf("load error %q, want one decoding the exchange", le)
		}
	})
	t.Run("run", func(t *testing.T) {
		testLoaded = func(rec *recording) { rec.llm.f.Close() }
		defer func() { testLoaded = nil }()
		res, err := Run(t.Context(), st, "chat", runOptions(t))
		var le *llmserver.LoadError
		if !errors.As(err, &le) || !errors.Is(err, ErrSpool) || le.Number != 1 {
			t.Errorf("Run = %v, %v; want the LoadError of llm #1, of the spool", res, err)
		}
	})
}

// TestRequestLogLoaded: the requests kept for Options.KeepRequests are
// numbered by the recorded exchanges loaded for them, the numbers the LLM
// server holds.
func TestRequestLogLoaded(t *testing.T) {
	st := openStore(t)
	recordSession(t, st, "chat", session{llm: true, prompts: []string{"hello", "again"}})
	rec, err := load(st, "chat")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	kept := newRequestLog(normalizersOf(normalize.Options{}), true)
	llm, err := startLLM(rec, []string{"agent"}, nil, &Options{CA: testCA(t)}, kept.compare, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer llm.close()
	base, _ := envValue(llm.env, "OPENAI_BASE_URL")
	for range 2 {
		if status, _ := post(t, base+"/chat/completions", `{"model":"test-model","stream":true}`); status != http.StatusOK {
			t.Errorf("a request got %d, want 200", status)
		}
	}
	llm.server.Report() // waits for the comparisons
	var numbers []int
	for _, p := range kept.pairs() {
		numbers = append(numbers, p.Number)
	}
	if !slices.Equal(numbers, []int{1, 2}) {
		t.Errorf("kept requests of exchanges %v, want 1 and 2", numbers)
	}
}
