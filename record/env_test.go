package record

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/store"
)

// The recorded environment keeps every name and the values that are
// settings, and withholds every value that is, holds or may be a secret.
func TestRecordedEnv(t *testing.T) {
	// A directory whose name has a long run of letters and digits, as a
	// temporary one's has: a path, not a key.
	home := filepath.Join(t.TempDir(), "codexhome0123456789abcdefABCDEF")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"CODEX_HOME=" + home,
		"PATH=/usr/local/bin:/usr/bin",
		"LANG=en_US.UTF-8",
		"TERM=xterm-256color",
		"EMPTY=",
		"GOPATH=/home/me/go",
		"OPENAI_API_KEY=sk-planted-0123456789abcdef",
		"DB_PASSWORD=short",                       // a secret's name, whatever the value's length
		"SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",        // AUTH: a secret's name
		"ECHO=key is sk-planted-0123456789abcdef", // holds another variable's secret
		"DATABASE_URL=postgres://me:pw@db/app",    // credentials in a URL
		"SENTRY_DSN=https://abc123@o1.ingest.invalid/2",
		"GEMINI_URL=https://llm.invalid/v1?key=AIzaPlanted&alt=sse", // a key in a query
		"DOCS_URL=https://docs.invalid/a?page=2",                    // a query without one
		"INVOCATION_ID=8f0e6d1c2b3a49587d6e5f4a3b2c1d0e",            // an id
		"GH_PAT=ghp_0123456789abcdefghijABCDEFGHIJ",                 // a key by another name
		"HUGE=" + strings.Repeat("a", maxEnvValue+1),
		"LANG=C.UTF-8", // the last value of a name twice
		"=no name",
	}
	got := recordedEnv(env, redact.New(env))
	want := []store.EnvVar{
		{Name: "CODEX_HOME", Value: home, Dir: true},
		{Name: "DATABASE_URL", Withheld: store.WithheldCredentials},
		{Name: "DB_PASSWORD", Withheld: store.WithheldSecret},
		{Name: "DOCS_URL", Value: "https://docs.invalid/a?page=2"},
		{Name: "ECHO", Withheld: store.WithheldCredentials},
		{Name: "EMPTY"},
		{Name: "GEMINI_URL", Withheld: store.WithheldCredentials},
		{Name: "GH_PAT", Withheld: store.WithheldToken},
		{Name: "GOPATH", Value: "/home/me/go"},
		{Name: "HUGE", Withheld: store.WithheldLong},
		{Name: "INVOCATION_ID", Withheld: store.WithheldToken},
		{Name: "LANG", Value: "C.UTF-8"},
		{Name: "OPENAI_API_KEY", Withheld: store.WithheldSecret},
		{Name: "PATH", Value: "/usr/local/bin:/usr/bin"},
		{Name: "SENTRY_DSN", Withheld: store.WithheldCredentials},
		{Name: "SSH_AUTH_SOCK", Withheld: store.WithheldSecret},
		{Name: "TERM", Value: "xterm-256color"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("recordedEnv =\n%+v\nwant\n%+v", got, want)
	}
}

func TestHasTokenRun(t *testing.T) {
	for v, want := range map[string]bool{
		"":                                       false,
		"xterm-256color":                         false,
		"/home/me/.nvm/versions/node/v22.11.0":   false,
		"abcdefghijklmnopqrstuvwxyz":             false, // a word, no digit
		"01234567890123456789012":                false, // a number, no letter
		"vscode-git-1a2b3c4d5e.sock":             true,
		"x:123e4567-e89b-12d3-a456-426614174000": true,
		"di=01;34:ln=01;36:so=01;35":             false, // LS_COLORS
	} {
		if got := hasTokenRun(v); got != want {
			t.Errorf("hasTokenRun(%q) = %v, want %v", v, got, want)
		}
	}
}
