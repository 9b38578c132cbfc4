package driver_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/replay/driver"
)

func TestParseFault(t *testing.T) {
	for spec, want := range map[string]driver.Fault{
		"drop":          {Kind: driver.FaultDrop},
		"dup":           {Kind: driver.FaultDup},
		"delay:1.5s":    {Kind: driver.FaultDelay, Delay: 1500 * time.Millisecond},
		"split:10":      {Kind: driver.FaultSplit, Bytes: 10},
		"sever":         {Kind: driver.FaultSever},
		"garbage":       {Kind: driver.FaultGarbage},
		"close":         {Kind: driver.FaultClose},
		"delay:2m0s":    {Kind: driver.FaultDelay, Delay: 2 * time.Minute},
		"split:1":       {Kind: driver.FaultSplit, Bytes: 1},
		"delay:100ms":   {Kind: driver.FaultDelay, Delay: 100 * time.Millisecond},
		"split:1000000": {Kind: driver.FaultSplit, Bytes: 1000000},
	} {
		f, err := driver.ParseFault(spec)
		if err != nil || f != want || f.String() != spec {
			t.Errorf("ParseFault(%q) = %+v (%s), %v; want %+v and the spec back", spec, f, f, err, want)
		}
	}
	for _, spec := range []string{"", "explode", "drop:1", "close:now", "delay", "delay:", "delay:0s", "delay:-1s", "delay:soon", "split", "split:0", "split:-3", "split:x", "split:1234567890", "DUP"} {
		if f, err := driver.ParseFault(spec); !errors.Is(err, driver.ErrInvalidFault) {
			t.Errorf("ParseFault(%q) = %+v, %v; want ErrInvalidFault", spec, f, err)
		}
	}
}

func TestFaultRefused(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir()})
	prompt := frameIndex(t, frames, "session/prompt", 1)
	for name, faults := range map[string]map[int]driver.Fault{
		"an agent frame":   {prompt + 1: {Kind: driver.FaultDrop}},
		"out of range":     {len(frames): {Kind: driver.FaultDrop}},
		"negative":         {-1: {Kind: driver.FaultDup}},
		"no kind":          {prompt: {}},
		"a delay of 0":     {prompt: {Kind: driver.FaultDelay}},
		"a split of 0":     {prompt: {Kind: driver.FaultSplit}},
		"an unknown kind":  {prompt: {Kind: 99}},
		"one of two wrong": {prompt: {Kind: driver.FaultDup}, prompt + 1: {Kind: driver.FaultDup}},
	} {
		if _, err := driver.NewFrom(lane.Slice(frames), driver.Options{Faults: faults}); !errors.Is(err, driver.ErrInvalidFault) {
			t.Errorf("%s: NewFrom: %v, want ErrInvalidFault", name, err)
		}
	}
	// A fault that closes the agent's stdin needs a writer Run can
	// close: it fails before writing anything.
	for _, kind := range []driver.FaultKind{driver.FaultClose, driver.FaultSever} {
		d := driver.New(driver.Options{Recorded: frames, Faults: map[int]driver.Fault{prompt: {Kind: kind}}})
		var w countingWriter
		if _, err := d.Run(context.Background(), &w, make(chan []byte)); !errors.Is(err, driver.ErrInvalidFault) || w.n != 0 {
			t.Errorf("%v with a writer that cannot close: Run: %v after %d writes, want ErrInvalidFault and none", kind, err, w.n)
		}
	}
}

// countingWriter counts its writes and closes nothing.
type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n++; return len(p), nil }

// TestFaultWrites plays a two-prompt session with a fault on the second
// prompt against the test agent, and checks what Run wrote (Sent) and
// reported applied (Faulted), and how the agent took it.
func TestFaultWrites(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir(), Prompts: []string{"one", "two"}})
	second := frameIndex(t, frames, "session/prompt", 2)
	prompt := string(frames[second].Data)
	head := []string{"request initialize", "request session/new", "request session/prompt"}
	for _, tc := range []struct {
		fault driver.Fault
		// sent is the shape of what was written of the second prompt.
		sent []string
		// timeline says whether the frame is in the Timeline.
		timeline bool
		// severed says that the last line written is the first half of
		// the frame.
		severed bool
		// err is the error Run must end with, nil for none.
		err error
		// answers is the shape of the agent's lines, after the first
		// turn's answer, that Run received before it returned, but the
		// message chunks, whose place against a refusal varies.
		answers []string
	}{{
		fault: driver.Fault{Kind: driver.FaultSplit, Bytes: 7}, sent: []string{"request session/prompt"}, timeline: true,
		answers: []string{"response end_turn"},
	}, {
		// A split after the line's end writes the line, then its newline.
		fault: driver.Fault{Kind: driver.FaultSplit, Bytes: 100000}, sent: []string{"request session/prompt"}, timeline: true,
		answers: []string{"response end_turn"},
	}, {
		// Longer than the timeout: the wait is the editor's.
		fault: driver.Fault{Kind: driver.FaultDelay, Delay: 1500 * time.Millisecond}, sent: []string{"request session/prompt"}, timeline: true,
		answers: []string{"response end_turn"},
	}, {
		// The copy arrives with the first and is refused at once, under
		// the prompt's id: Run takes the refusal for the prompt's answer,
		// and ends.
		fault: driver.Fault{Kind: driver.FaultDup}, sent: []string{"request session/prompt", "request session/prompt"}, timeline: true,
		answers: []string{"error -32600"},
	}, {
		fault: driver.Fault{Kind: driver.FaultGarbage}, sent: []string{"junk", "request session/prompt"}, timeline: true,
		answers: []string{"error -32700", "response end_turn"},
	}, {
		// The editor's requests so far were answered: Run ends at once.
		fault: driver.Fault{Kind: driver.FaultSever}, sent: []string{"junk"}, timeline: true, severed: true,
	}, {
		fault: driver.Fault{Kind: driver.FaultClose}, sent: nil, timeline: false,
	}, {
		// The agent never gets it, and the end of the recording waits
		// for its answer.
		fault: driver.Fault{Kind: driver.FaultDrop}, sent: nil, timeline: false, err: driver.ErrTimeout,
	}} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			d := driver.New(driver.Options{Recorded: frames, Timeout: time.Second, Faults: map[int]driver.Fault{second: tc.fault}})
			// Chunks far apart: the first turn is still running when a
			// duplicate arrives.
			res, err := replay(t, d, agentEnviron(), "--chunk-delay", "20ms")
			if !errors.Is(err, tc.err) {
				t.Fatalf("Run: %v, want %v", err, tc.err)
			}
			if got := shape(res.Sent); !reflect.DeepEqual(got, append(head[:len(head):len(head)], tc.sent...)) {
				t.Errorf("sent %q, want %q then %q", got, head, tc.sent)
			}
			// The live session id is as long as the recorded one.
			if last := string(res.Sent[len(res.Sent)-1]); tc.severed && (len(last) != (len(prompt)+1)/2 || !strings.HasPrefix(prompt, last[:min(len(last), strings.Index(prompt, "sess_"))])) {
				t.Errorf("the last line sent is %q, want the first half of %q", last, prompt)
			}
			if !reflect.DeepEqual(res.Faulted, []int{second}) {
				t.Errorf("Faulted %v, want [%d]", res.Faulted, second)
			}
			inTimeline := false
			for _, s := range res.Timeline {
				inTimeline = inTimeline || s.Lane == lane.Editor && s.Index == second
			}
			if inTimeline != tc.timeline {
				t.Errorf("the frame in the Timeline: %v, want %v", inTimeline, tc.timeline)
			}
			if tc.err == nil {
				live := shape(res.Live)
				end := slices.Index(live, "response end_turn")
				got := slices.DeleteFunc(slices.Clone(live[end+1:]), func(s string) bool { return s == "session/update agent_message_chunk" })
				if end < 0 || !slices.Equal(got, tc.answers) {
					t.Errorf("the agent's lines %q, want %q after the first turn's answer", live, tc.answers)
				}
			}
		})
	}
}

// TestFaultDelayStopped checks that a delayed write is abandoned, never
// made, when Run ends meanwhile.
func TestFaultDelayStopped(t *testing.T) {
	frames, _ := record(t, testeditor.Options{Cwd: t.TempDir()})
	first := frameIndex(t, frames, "initialize", 1)
	d := driver.New(driver.Options{Recorded: frames, Faults: map[int]driver.Fault{first: {Kind: driver.FaultDelay, Delay: 300 * time.Millisecond}}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var w lockedWriter
	if _, err := d.Run(ctx, &w, make(chan []byte)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run: %v, want the context's end", err)
	}
	time.Sleep(600 * time.Millisecond)
	if n := w.count(); n != 0 {
		t.Errorf("%d writes after Run returned, want none", n)
	}
}

// lockedWriter counts its writes, which another goroutine may make.
type lockedWriter struct {
	mu sync.Mutex
	n  int
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return len(p), nil
}

func (w *lockedWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// TestFaultDropWaitsTimeout: the prompt dropped, Run times out waiting
// for its answer, and says it waited the timeout, silent all along: the
// agent's last line came before the wait began, as a dropped frame is
// never written.
func TestFaultDropWaitsTimeout(t *testing.T) {
	f := func(l lane.Lane, s string) lane.Line { return lane.Line{Lane: l, Data: []byte(s)} }
	recorded := []lane.Line{
		f(lane.Editor, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`),
		f(lane.Agent, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_rec1aaaa"}}`),
		f(lane.Editor, promptLine("2", "sess_rec1aaaa")),
		f(lane.Agent, endTurnLine("2")),
		f(lane.Editor, promptLine("3", "sess_rec1aaaa")),
		f(lane.Agent, endTurnLine("3")),
	}
	const timeout = 200 * time.Millisecond
	opts := driver.Options{Recorded: recorded, Timeout: timeout, Faults: map[int]driver.Fault{2: {Kind: driver.FaultDrop}}}
	_, err := runScriptedWith(t, opts, func(a *scriptedAgent) {
		a.method("session/new")
		a.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_live1xxxx"}}`)
	})
	var we *driver.WaitError
	if !errors.As(err, &we) {
		t.Fatalf("Run error = %v, want a *WaitError", err)
	}
	if we.Frame != 4 || we.Waited != timeout || we.Silent != timeout {
		t.Errorf("WaitError frame %d, waited %v, silent %v; want frame 4, waited and silent %v", we.Frame, we.Waited, we.Silent, timeout)
	}
}
