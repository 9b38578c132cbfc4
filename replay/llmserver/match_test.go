package llmserver_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/replay/llmserver"
)

// chatExchange is a recorded Chat Completions exchange of model m whose
// request has messages, answered {"number":N}.
func chatExchange(number int, messages ...string) *exchange.Exchange {
	x := plain(upstream+"/v1/chat/completions", "m", fmt.Sprintf(`{"number":%d}`, number))
	x.RequestBody = chatBody(messages...)
	return x
}

func chatBody(messages ...string) []byte {
	var ms []map[string]string
	for _, m := range messages {
		ms = append(ms, map[string]string{"role": "user", "content": m})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": ms})
	return b
}

// messagesOf is a Conversation for tests: each message as its JSON.
func messagesOf(x *exchange.Exchange) []string {
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	json.Unmarshal(x.RequestBody, &body)
	var out []string
	for _, m := range body.Messages {
		out = append(out, string(m))
	}
	return out
}

// TestMatchByConversation: two sessions' turns recorded interleaved in
// one queue are served by the conversation each request continues,
// whatever order the live requests come in; by position alone they would
// swap. A request that continues two conversations alike gets the first
// and is reported with both.
func TestMatchByConversation(t *testing.T) {
	xs := []*exchange.Exchange{
		chatExchange(1, "sys", "a"),
		chatExchange(2, "sys", "b"),
		chatExchange(3, "sys", "a", "ra", "a2"),
		chatExchange(4, "sys", "b", "rb", "b2"),
	}
	live := [][]string{{"sys", "b"}, {"sys", "a"}, {"sys", "b", "rb", "b2"}, {"sys", "a", "ra", "a2"}}
	for _, tc := range []struct {
		name         string
		conversation func(*exchange.Exchange) []string
		want         []int
	}{
		{"by conversation", messagesOf, []int{2, 1, 4, 3}},
		{"by position", nil, []int{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, llmserver.Options{Exchanges: recordedList(xs...), Conversation: tc.conversation})
			tap, ca := newTap(t, s)
			client, base := viaBaseURL(t, tap, ca, upstream)
			var got []int
			for _, ms := range live {
				got = append(got, answerNumber(t, post(t, client, base+"/v1/chat/completions", chatBody(ms...))))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("answered with %v, want %v", got, tc.want)
			}
			if r := s.Report(); len(r.Unrequested) != 0 || len(r.Ambiguous) != 0 {
				t.Errorf("unrequested %v, ambiguous %v; want none", r.Unrequested, r.Ambiguous)
			}
		})
	}

	t.Run("ambiguous", func(t *testing.T) {
		xs := []*exchange.Exchange{chatExchange(1, "sys", "x", "rx", "more x"), chatExchange(2, "sys", "x", "ry", "more y")}
		s := newServer(t, llmserver.Options{Exchanges: recordedList(xs...), Conversation: messagesOf})
		tap, ca := newTap(t, s)
		client, base := viaBaseURL(t, tap, ca, upstream)
		if n := answerNumber(t, post(t, client, base+"/v1/chat/completions", chatBody("sys", "x", "rz"))); n != 1 {
			t.Errorf("answered with %d, want 1, the first", n)
		}
		r := s.Report()
		if len(r.Ambiguous) != 1 || !slices.Equal(r.Ambiguous[0].Numbers, []int{1, 2}) || r.Ambiguous[0].Shared != 2 {
			t.Fatalf("ambiguous %+v, want one naming llm #1 and llm #2, 2 messages shared", r.Ambiguous)
		}
		if got, want := r.Ambiguous[0].String(), "a request of POST /v1/chat/completions model m continues the conversations of llm #1 and llm #2 alike (2 messages shared with each, then they differ); it was answered with llm #1, the first"; got != want {
			t.Errorf("String() = %q\nwant %q", got, want)
		}
	})
}
