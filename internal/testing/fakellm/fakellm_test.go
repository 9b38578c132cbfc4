package fakellm

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestLog(t *testing.T) {
	var l Log[string]
	done := l.Done()
	l.Keep("a")
	l.Keep("b")
	if got, want := l.Requests(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("Requests() = %q, want %q", got, want)
	}
	select {
	case <-done:
		t.Fatal("Done is closed before Close")
	default:
	}
	l.Close()
	l.Close() // idempotent
	select {
	case <-done:
	default:
		t.Fatal("Done is open after Close")
	}
	var closedFirst Log[int]
	closedFirst.Close()
	if _, open := <-closedFirst.Done(); open {
		t.Error("Done of a Log closed before Done was asked for is open")
	}
}

func TestServeTLS(t *testing.T) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })
	plain := Serve(hello, "/v1")
	defer plain.HTTP.Close()
	if body := get(t, http.DefaultClient, plain.URL); body != "hello /v1" {
		t.Errorf("plain: got %q, want hello /v1", body)
	}
	ep, err := ServeTLS(hello, "", t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	srv, caFile := ep.HTTP, ep.CAFile
	defer srv.Close()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", caFile)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if body := get(t, client, ep.URL); body != "hello /" {
		t.Errorf("TLS with the CA file: got %q, want hello", body)
	}
	if _, err := http.Get(srv.URL); err == nil {
		t.Error("a client without the CA file was not refused")
	}
	if a, b := RandomHex(8), RandomHex(8); len(a) != 16 || a == b {
		t.Errorf("RandomHex(8) = %q, %q; want two different 16-digit strings", a, b)
	}
}

func TestServeTLSAt(t *testing.T) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })
	if _, err := ServeTLSAt(hello, "192.0.2.1", "", t.TempDir(), "test"); err == nil {
		t.Error("ServeTLSAt 192.0.2.1 served; want an error: not loopback")
	}
	ep, err := ServeTLSAt(hello, "127.0.0.2", "/v1", t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.HTTP.Close()
	if !strings.HasPrefix(ep.URL, "https://127.0.0.2:") || !strings.HasSuffix(ep.URL, "/v1") {
		t.Errorf("URL %q, want https://127.0.0.2:PORT/v1", ep.URL)
	}
	pem, err := os.ReadFile(ep.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", ep.CAFile)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if body := get(t, client, ep.URL); body != "hello /v1" {
		t.Errorf("TLS with the CA file: got %q, want hello /v1", body)
	}
	if _, err := http.Get(ep.URL); err == nil {
		t.Error("a client without the CA file was not refused")
	}
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestAnswers(t *testing.T) {
	if got, want := Answer("  hi\n"), `Hello from the fake model. You said: "hi".`; got != want {
		t.Errorf("Answer = %q, want %q", got, want)
	}
	if got, want := ToolAnswer("x\nhello-x\n", "hello-x"), "The command printed: hello-x"; got != want {
		t.Errorf("ToolAnswer = %q, want %q", got, want)
	}
	if got, want := ToolAnswer("\nwrong\nmore", "hello-x"), "The command did not print what I expected: wrong"; got != want {
		t.Errorf("ToolAnswer = %q, want %q", got, want)
	}
}
