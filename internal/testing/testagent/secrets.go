package testagent

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/acptap/acptap/internal/acp"
)

// secrets are the flags by which the agent carries credentials where
// agents do, for the tests of what acptap stores of them: a key on its
// command line, headers and a query of its LLM requests, the value of an
// environment variable echoed in its output and in its requests.
type secrets struct {
	apiKey  string      // --api-key: the LLM key, instead of $OPENAI_API_KEY
	headers http.Header // --header: added to every LLM request
	query   url.Values  // --query: added to every LLM request's URL
	echoEnv string      // --echo-env: a variable whose value the agent repeats
}

func (s *secrets) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.apiKey, "api-key", "", "use `KEY` as the LLM API key instead of $OPENAI_API_KEY")
	fs.Func("header", "add the header `NAME:VALUE` to every LLM request; repeatable", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok || name == "" {
			return fmt.Errorf("--header %q: want NAME:VALUE", v)
		}
		if s.headers == nil {
			s.headers = http.Header{}
		}
		s.headers.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		return nil
	})
	fs.Func("query", "add the query parameter `K=V` to every LLM request's URL; repeatable", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("--query %q: want K=V", v)
		}
		if s.query == nil {
			s.query = url.Values{}
		}
		s.query.Add(k, val)
		return nil
	})
	fs.StringVar(&s.echoEnv, "echo-env", "", "repeat $`NAME` as NAME=VALUE on stderr at start-up, in a message chunk at the start of each turn and in the system prompt (LLM mode)")
}

// echo is NAME=VALUE of --echo-env, "" without it.
func (s *secrets) echo(getenv func(string) string) string {
	if s.echoEnv == "" {
		return ""
	}
	return s.echoEnv + "=" + getenv(s.echoEnv)
}

// requestURL is base with --query's parameters.
func (s *secrets) requestURL(base string) string {
	if len(s.query) == 0 {
		return base
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + s.query.Encode()
}

// authenticate answers an authenticate request, whatever it carries: the
// agent advertises no method, but an editor may authenticate anyway.
// With --stderr-log its params are logged as received, for a test to see
// that what the editor sent reached the agent unchanged.
func (a *agent) authenticate(m *acp.Envelope) {
	a.debugf("authenticate params: %s", m.Params)
	if m.ID != nil {
		a.c.reply(m.ID, map[string]any{})
	}
}

// echoText is what --echo-env adds to the system prompt.
func (a *agent) echoText() string {
	if a.echo == "" {
		return ""
	}
	return " The environment has " + a.echo + "."
}

// logMeta logs initialize's _meta as received, with --stderr-log.
func (a *agent) logMeta(m *acp.Envelope) {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &p) == nil && p.Meta != nil {
		a.debugf("initialize _meta: %s", p.Meta)
	}
}

// echoMeta is initialize's _meta: --echo-env's variable by its name, as
// agents put their settings there; nil without.
func (a *agent) echoMeta() map[string]any {
	name, value, ok := strings.Cut(a.echo, "=")
	if !ok {
		return nil
	}
	return map[string]any{"environment": map[string]string{name: value}}
}
