package record

import (
	"slices"
	"testing"
)

func TestTerminalLogins(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string // the logins' ids
	}{
		{`{"jsonrpc":"2.0","id":0,"result":{"authMethods":[{"id":"login","name":"Log in","type":"terminal","args":["--login"]},{"id":"key","name":"API key"}]}}`, []string{"login"}},
		{`{"jsonrpc":"2.0","id":0,"result":{"authMethods":[{"id":"key","name":"API key","description":"a terminal"}]}}`, nil},
		{`{"jsonrpc":"2.0","method":"x","params":{"authMethods":[{"id":"login","type":"terminal"}]}}`, nil},
		{`{"jsonrpc":"2.0","id":0,"result":{"authMethods":"terminal"}}`, nil},
		{`not JSON "authMethods" "terminal"`, nil},
	} {
		var got []string
		for _, l := range terminalLogins([]byte(tc.line)) {
			got = append(got, l.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("terminalLogins(%s) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
