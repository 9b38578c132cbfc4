package replay

import (
	"slices"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// TestJudgeHTTP: the agent's http requests without a recorded answer are
// warnings, and its recorded http exchanges never requested nothing;
// under strict, both are divergences, after the LLM's.
func TestJudgeHTTP(t *testing.T) {
	report := llmserver.Report{
		Unanswered: []llmserver.Request{{Method: "POST", URL: "https://api.example/v1/chat/completions", Queue: "POST /v1/chat/completions model m", Reason: "lane has 0 recorded, this is request 1"}},
		HTTPUnanswered: []llmserver.Request{{
			Method: "GET", URL: "https://registry.example/left-pad?ts=1718000000000",
			Queue: "GET https://registry.example/left-pad?ts=<time>", Reason: "no http exchange of this method and URL was recorded",
		}},
		HTTPUnrequested: []llmserver.Recorded{{Number: 3, Seq: 12, Exchange: &exchange.Exchange{
			Route: exchange.RouteProxy, Method: "POST", URL: "https://telemetry.example/v1/events?api_key=sk-secret-0123456789",
		}}},
	}
	unanswered := Divergence{
		Kind: HTTPUnanswered, Lane: store.LaneLLM,
		Message: `http: GET https://registry.example/left-pad?ts=1718000000000 has no recorded answer (answered 502; the key was "GET https://registry.example/left-pad?ts=<time>")`,
	}
	unrequested := Divergence{
		Kind: HTTPUnrequested, Lane: store.LaneLLM, Exchange: 3,
		Message: "llm #3, an http exchange (POST https://telemetry.example/v1/events?api_key=%5BREDACTED%5D), was recorded but never requested",
	}
	ev := evidence{recorded: memLines(stream("ses_1", "Hello")), live: memLines(stream("ses_2", "Hello")), llm: report, normalizer: newNormalizer}

	v := judged(t, ev)
	if got, want := kinds(v.divergences), []Kind{RequestUnanswered}; !slices.Equal(got, want) {
		t.Errorf("divergences %v, want %v: the LLM's only", got, want)
	}
	if !slices.EqualFunc(v.warnings, []Divergence{unanswered}, divergenceEqual) {
		t.Errorf("warnings %+v, want %+v", v.warnings, unanswered)
	}

	ev.strictHTTP = true
	v = judged(t, ev)
	if !slices.EqualFunc(v.divergences[1:], []Divergence{unanswered, unrequested}, divergenceEqual) || v.divergences[0].Kind != RequestUnanswered {
		t.Errorf("under strict, divergences %+v, want the LLM's, then %+v and %+v", v.divergences, unanswered, unrequested)
	}
	if len(v.warnings) != 0 {
		t.Errorf("under strict, warnings %+v, want none", v.warnings)
	}

	// An update cannot fix them.
	res := &Result{Name: "r", Divergences: []Divergence{unanswered}, restore: func(int, []byte) []byte { return nil }}
	if err := res.Updatable(); err == nil {
		t.Errorf("Updatable with an http divergence: nil, want ErrNotUpdatable")
	}
}

func divergenceEqual(a, b Divergence) bool {
	return a.Kind == b.Kind && a.Lane == b.Lane && a.Exchange == b.Exchange && a.Message == b.Message
}

func TestHTTPKindString(t *testing.T) {
	for k, want := range map[Kind]string{HTTPUnanswered: "http-unanswered", HTTPUnrequested: "http-unrequested"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// TestHTTPKey: an http exchange's key is its method and URL with the
// scheme and host as they are and the path and query normalized like a
// request's: the recorded and the sandbox directories alike, times and
// ids in the query, credentials dropped, the user's rules applied; each
// URL on its own, so that placeholders number alike.
func TestHTTPKey(t *testing.T) {
	rules, err := normalize.ParseRules([]byte(`[{"regexp": "build-[0-9]+", "replace": "build-N"}]`))
	if err != nil {
		t.Fatal(err)
	}
	n := normalizers{opts: normalize.Options{Cwd: []string{"/rec/ws", "/sb/work"}, Home: []string{"/rec/home"}, Rules: rules}}
	same := [][2]string{
		{"https://registry.example/pkg?ts=1718000000000&id=3f2b9c4e-7a8d-4e1f-9b6a-2c5d8e7f1a30", "https://registry.example/pkg?ts=1718000005555&id=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"},
		{"http://127.0.0.1:4873/files?dir=/rec/ws/src", "http://127.0.0.1:4873/files?dir=/sb/work/src"},
		{"https://registry.example/pkg?key=sk-recorded-000000", "https://registry.example/pkg?key=sk-live-1111111111"},
		{"https://updates.example/build-41/check", "https://updates.example/build-42/check"},
	}
	for _, p := range same {
		if a, b := n.httpKey("GET", p[0]), n.httpKey("GET", p[1]); a != b {
			t.Errorf("keys of %s and %s: %q and %q, want them equal", p[0], p[1], a, b)
		}
	}
	differ := [][2]string{
		{"https://registry.example/pkg/left-pad", "https://registry.example/pkg/right-pad"},
		{"https://registry.example/pkg", "https://mirror.example/pkg"},
		{"http://127.0.0.1:4873/state", "http://127.0.0.1:4874/state"},
		{"https://registry.example/pkg?name=a", "https://registry.example/pkg?name=b"},
	}
	for _, p := range differ {
		if a, b := n.httpKey("GET", p[0]), n.httpKey("GET", p[1]); a == b {
			t.Errorf("keys of %s and %s are both %q, want them different", p[0], p[1], a)
		}
	}
	if a, b := n.httpKey("GET", "https://x.example/"), n.httpKey("HEAD", "https://x.example/"); a == b {
		t.Errorf("GET and HEAD have the key %q, want different ones", a)
	}
	if got, want := n.httpKey("get", "https://registry.example/pkg?ts=1718000000000"), "GET https://registry.example/pkg?ts=<time>"; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
}
