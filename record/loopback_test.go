package record

import (
	"reflect"
	"testing"

	"github.com/acptap/acptap/store"
)

func TestLoopbackPort(t *testing.T) {
	for _, c := range []struct {
		value string
		port  int
		ok    bool
	}{
		{"http://127.0.0.1:8080/v1", 8080, true},
		{"http://localhost:11434", 11434, true},
		{"https://[::1]:1234/api", 1234, true},
		{"http://127.0.0.1/v1", 80, true},
		{"https://localhost", 443, true},
		{"127.0.0.1:11434", 11434, true}, // OLLAMA_HOST
		{"0.0.0.0:11434", 11434, true},
		{"localhost:1234", 1234, true},
		{"http://127.3.4.5:9/", 9, true},
		{"https://api.openai.com/v1", 0, false},
		{"http://10.0.0.1:8080", 0, false},
		{"example.com:80", 0, false},
		{"ftp://127.0.0.1:21", 0, false},
		{"/usr/bin", 0, false},
		{"127.0.0.1:99999", 0, false},
		{"sk-abc:def", 0, false},
	} {
		port, ok := loopbackPort(c.value)
		if ok != c.ok || (ok && port != c.port) {
			t.Errorf("loopbackPort(%q) = %d, %v; want %d, %v", c.value, port, ok, c.port, c.ok)
		}
	}
}

func TestPortVar(t *testing.T) {
	env := []string{
		"HTTP_PROXY=http://127.0.0.1:8080", // a proxy, not a base URL
		"MY_LLM=http://127.0.0.1:8080/v1",
		"OPENAI_BASE_URL=http://localhost:8080/v1",
		"OLLAMA_HOST=127.0.0.1:11434",
		"ZED_URL=http://127.0.0.1:3000",
		"A_URL=http://127.0.0.1:3000",
	}
	for port, want := range map[int]string{
		8080:  "OPENAI_BASE_URL", // a well-known one wins
		11434: "OLLAMA_HOST",
		3000:  "A_URL", // else the first by name
		9999:  "",
	} {
		if got := portVar(env, port); got != want {
			t.Errorf("portVar(%d) = %q, want %q", port, got, want)
		}
	}
	if got := portVar([]string{"no_proxy=localhost:8080", "HTTPS_PROXY=http://127.0.0.1:8080"}, 8080); got != "" {
		t.Errorf("portVar of proxy variables = %q, want none", got)
	}
}

// TestLoopbackResult tells the agent's own servers, the tap and accepted
// connections from other programs' ports.
func TestLoopbackResult(t *testing.T) {
	seen := loopbackSeen{
		listens: map[int]bool{3000: true},
		conns: map[conn]bool{
			{local: 50000, remote: 3000}: true, // to its own server
			{local: 3000, remote: 50000}: true, // its own server's end of it
			{local: 3000, remote: 50001}: true, // its own server, called by another program
			{local: 50002, remote: 4000}: true, // the tap
			{local: 50003, remote: 8080}: true, // an LLM on loopback
			{local: 50004, remote: 8080}: true,
			{local: 50005, remote: 5432}: true, // some other server
		},
	}
	got := seen.result(map[int]bool{4000: true}, []string{"OPENAI_BASE_URL=http://127.0.0.1:8080/v1"})
	want := &store.Loopback{Own: []int{3000}, Ports: []store.LoopbackPort{{Port: 5432}, {Port: 8080, Var: "OPENAI_BASE_URL"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("result = %+v, want %+v", got, want)
	}
	only := loopbackSeen{listens: map[int]bool{}, conns: map[conn]bool{{local: 50002, remote: 4000}: true}}
	if got := only.result(map[int]bool{4000: true}, nil); got != nil {
		t.Errorf("result of the tap's connections alone = %+v, want nil", got)
	}
}

func TestLoopbackText(t *testing.T) {
	const head = "no LLM exchange, but the agent connected to loopback "
	for _, c := range []struct {
		ports    []store.LoopbackPort
		proxyEnv bool
		want     string
	}{
		{[]store.LoopbackPort{{Port: 8080, Var: "OPENAI_BASE_URL"}}, true,
			head + "port 8080, which went around the tap: if that is its LLM, record it with --base-url OPENAI_BASE_URL (OPENAI_BASE_URL holds its URL)"},
		{[]store.LoopbackPort{{Port: 8080, Var: "OPENAI_BASE_URL"}, {Port: 11434, Var: "OLLAMA_HOST"}}, false,
			head + "ports 8080 and 11434, which went around the tap: if one of them is its LLM, record it with --base-url OPENAI_BASE_URL --base-url OLLAMA_HOST (OPENAI_BASE_URL, OLLAMA_HOST hold their URLs)"},
		{[]store.LoopbackPort{{Port: 1234}, {Port: 5432}, {Port: 8080, Var: "OPENAI_BASE_URL"}}, true,
			head + "ports 1234, 5432 and 8080, which went around the tap: if one of them is its LLM, record it with --proxy-loopback"},
		{[]store.LoopbackPort{{Port: 1234, Var: "A"}, {Port: 5678}}, false,
			head + "ports 1234 and 5678, which went around the tap: if one of them is its LLM, record it with --base-url VAR=http://127.0.0.1:5678 for the variable the agent reads its LLM's URL from"},
		{[]store.LoopbackPort{{Port: 1234}}, false,
			head + "port 1234, which went around the tap: if that is its LLM, record it with --base-url VAR=http://127.0.0.1:1234 for the variable the agent reads its LLM's URL from"},
	} {
		if got := loopbackText(c.ports, c.proxyEnv); got != c.want {
			t.Errorf("loopbackText(%+v, %v) =\n%s\nwant\n%s", c.ports, c.proxyEnv, got, c.want)
		}
	}
}
