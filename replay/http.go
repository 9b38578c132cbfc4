package replay

import (
	"fmt"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/replay/llmserver"
	"github.com/acptap/acptap/store"
)

// judgeHTTP adds what became of the agent's http exchanges to v: without
// strict, a request the recording had no answer for is a warning and a
// recorded exchange never requested is nothing, since the agent's
// registry lookups, update checks and telemetry are not what a replay
// tests; with strict, both are divergences.
func (v *verdict) judgeHTTP(r llmserver.Report, strict bool) {
	for _, u := range r.HTTPUnanswered {
		d := httpUnanswered(u)
		if strict {
			v.divergences = append(v.divergences, d)
		} else {
			v.warnings = append(v.warnings, d)
		}
	}
	if !strict {
		return
	}
	for _, u := range r.HTTPUnrequested {
		v.divergences = append(v.divergences, httpUnrequested(u))
	}
}

// httpUnanswered is the divergence, or the warning, of an http request
// the recording had no answer for.
func httpUnanswered(r llmserver.Request) Divergence {
	return Divergence{
		Kind: HTTPUnanswered, Lane: store.LaneLLM,
		Message: fmt.Sprintf("http: %s %s has no recorded answer (answered 502; the key was %q)", r.Method, r.URL, r.Queue),
	}
}

// httpUnrequested is the divergence of a recorded http exchange that no
// request asked for.
func httpUnrequested(r llmserver.Recorded) Divergence {
	x := r.Exchange
	return Divergence{
		Kind: HTTPUnrequested, Lane: store.LaneLLM, Exchange: r.Number,
		Message: fmt.Sprintf("llm #%d, an http exchange (%s %s), was recorded but never requested", r.Number, x.Method, redact.New(nil).URL(x.URL)),
	}
}
