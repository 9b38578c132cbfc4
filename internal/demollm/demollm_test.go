package demollm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/wire"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	if _, err := io.Copy(b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestScript(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	url := srv.URL + "/v1/chat/completions"
	tests := []struct {
		body     string
		text     string
		toolName string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"Fix the typo in notes.txt"}]}`, "", "read_file"},
		{`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"Teh"}]}`, Answer, ""},
		{`{"model":"title-model","messages":[{"role":"user","content":"x"}]}`, "Fixing a typo in notes", ""},
		{`{"model":"m","messages":[{"role":"user","content":"Thanks!"}]}`, "You're welcome!", ""},
	}
	for _, tt := range tests {
		body := post(t, url, tt.body)
		m, err := wire.Reassemble(wire.OpenAIChat, []byte(body))
		if err != nil {
			t.Fatalf("%s: reassembling %q: %v", tt.body, body, err)
		}
		if m.Text != tt.text {
			t.Errorf("%s: text %q, want %q", tt.body, m.Text, tt.text)
		}
		if tt.toolName != "" && (len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != tt.toolName || m.ToolCalls[0].Arguments != `{"path":"notes.txt"}`) {
			t.Errorf("%s: tool calls %+v, want one %s call", tt.body, m.ToolCalls, tt.toolName)
		}
	}
	if resp, err := http.Get(url); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET: %v %v, want 404", resp, err)
	}
}
