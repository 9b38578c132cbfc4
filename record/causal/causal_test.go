package causal

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/store"
)

// record writes a recording of events in the order given, Seqs from 1.
func record(t *testing.T, st *store.Store, name string, events []store.Event) {
	t.Helper()
	w, err := st.Create(store.Recording{Name: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		w.Append(e)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

func prompt(at time.Duration, text string) store.Event {
	return store.Event{Kind: store.KindFrame, Lane: store.LaneEditor, Offset: at,
		Data: fmt.Appendf(nil, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":%q}]}}`, text)}
}

func chunk(at time.Duration, text string) store.Event {
	return store.Event{Kind: store.KindFrame, Lane: store.LaneAgent, Offset: at,
		Data: fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, text)}
}

func call(t *testing.T, at time.Duration, request, answer string) store.Event {
	t.Helper()
	data, err := exchange.Marshal(&exchange.Exchange{Method: "POST", URL: "http://llm.test/v1/chat/completions",
		RequestBody: fmt.Appendf(nil, `{"messages":[{"role":"user","content":%q}]}`, request),
		Status:      200, End: exchange.EndComplete,
		Chunks: []exchange.Chunk{{Data: fmt.Appendf(nil, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", answer)}}})
	if err != nil {
		t.Fatal(err)
	}
	return store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Offset: at, Data: data}
}

// TestConversation checks a recording in causal order, and the two ways
// one can be out of it (an LLM request before the prompt it holds, a
// message chunk before the answer it repeats), and a time that goes back.
func TestConversation(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ms := time.Millisecond
	record(t, st, "ordered", []store.Event{
		prompt(1*ms, "Fix the typo"), call(t, 2*ms, "Fix the typo", "Fixed it for you"), chunk(3*ms, "Fixed it for you"),
	})
	record(t, st, "early-request", []store.Event{
		call(t, 1*ms, "Fix the typo", "Fixed it for you"), prompt(2*ms, "Fix the typo"), chunk(3*ms, "Fixed it for you"),
	})
	record(t, st, "early-chunk", []store.Event{
		prompt(1*ms, "Fix the typo"), chunk(2*ms, "Fixed it for you"), call(t, 3*ms, "Fix the typo", "Fixed it for you"),
	})
	record(t, st, "time-back", []store.Event{
		prompt(2*ms, "Fix the typo"), call(t, 1*ms, "Fix the typo", "Fixed it for you"), chunk(3*ms, "Fixed it for you"),
	})
	for name, want := range map[string]string{
		"ordered":       "",
		"early-request": "event 1 comes before event 2: LLM request POST http://llm.test/v1/chat/completions holds the text Fix the typo of the session/prompt",
		"early-chunk":   "event 2 comes before event 3: the agent says Fixed it for you",
		"time-back":     "event 2 comes before event 1: its time 1ms is before the other's 2ms",
	} {
		r, vs, err := Read(st, name)
		if err != nil {
			t.Fatal(err)
		}
		n, more := r.Conversation()
		vs = append(vs, more...)
		if n != 2 {
			t.Errorf("%s: checked %d pairs, want 2", name, n)
		}
		var got []string
		for _, v := range vs {
			got = append(got, v.String())
		}
		if want == "" && len(got) > 0 || want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], want)) {
			t.Errorf("%s: violations %q, want %q", name, got, want)
		}
	}
}
