package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/exchange"
)

const planted = "sk-planted-0123456789abcdef"

func TestNewPicksSecretLookingVariables(t *testing.T) {
	r := New([]string{
		"OPENAI_API_KEY=" + planted,
		"GITHUB_TOKEN=ghp_abcdefghijklmnop",
		"DB_PASSWORD=hunter2hunter2",
		"MY_SECRET=s3cr3t-value-x",
		"PATH=/usr/local/bin:/usr/bin",
		"HOME=/home/someone",
		"SHORT_KEY=abc",
		"EMPTY_TOKEN=",
		"NOEQUALS",
	})
	for _, v := range []string{planted, "ghp_abcdefghijklmnop", "hunter2hunter2", "s3cr3t-value-x"} {
		if got := r.String("x " + v + " y"); strings.Contains(got, v) {
			t.Errorf("String kept secret %q: %q", v, got)
		}
	}
	for _, v := range []string{"/usr/local/bin", "/home/someone", "abc"} {
		if got := r.String("x " + v + " y"); got != "x "+v+" y" {
			t.Errorf("String(%q) = %q, want it unchanged", v, got)
		}
	}
	if got, want := r.String("key="+planted), "key=[REDACTED:OPENAI_API_KEY]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestHeader(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + planted})
	h := http.Header{
		"Authorization":       {"Bearer " + planted},
		"X-Api-Key":           {planted},
		"X-Goog-Api-Key":      {"AIzaSyPlanted"},
		"Cookie":              {"session=abc; other=def"},
		"Set-Cookie":          {"id=xyz; Path=/"},
		"Proxy-Authorization": {"Basic dXNlcjpwYXNz"},
		"X-Custom":            {"prefix-" + planted},
		"Content-Type":        {"application/json"},
	}
	got := r.Header(h)
	want := http.Header{
		"Authorization":       {"Bearer [REDACTED]"},
		"X-Api-Key":           {"[REDACTED]"},
		"X-Goog-Api-Key":      {"[REDACTED]"},
		"Cookie":              {"[REDACTED]"},
		"Set-Cookie":          {"[REDACTED]"},
		"Proxy-Authorization": {"Basic [REDACTED]"},
		"X-Custom":            {"prefix-[REDACTED:ANTHROPIC_API_KEY]"},
		"Content-Type":        {"application/json"},
	}
	for k, v := range want {
		if g := got.Get(k); g != v[0] {
			t.Errorf("header %s = %q, want %q", k, g, v[0])
		}
	}
	if h.Get("Authorization") != "Bearer "+planted {
		t.Errorf("Header changed its argument")
	}
}

func TestURL(t *testing.T) {
	r := New([]string{"GEMINI_API_KEY=" + planted})
	tests := []struct{ in, want string }{
		{"https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSecret",
			"https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key=%5BREDACTED%5D"},
		{"https://x.test/p?API_KEY=abc&q=1", "https://x.test/p?API_KEY=%5BREDACTED%5D&q=1"},
		{"https://user:pass@x.test/p", "https://%5BREDACTED%5D@x.test/p"},
		{"https://x.test/p/" + planted + "/q", "https://x.test/p/[REDACTED:GEMINI_API_KEY]/q"},
		{"https://x.test/p?q=1", "https://x.test/p?q=1"},
	}
	for _, tt := range tests {
		if got := r.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExchangeMasksEverywhere(t *testing.T) {
	r := New([]string{"OPENAI_API_KEY=" + planted, "SLASHY_TOKEN=abc/def/ghi/jkl"})
	half := len(planted) / 2
	e := &exchange.Exchange{
		URL:             "https://api.test/v1?key=" + planted,
		RequestHeaders:  http.Header{"Authorization": {"Bearer " + planted}},
		RequestBody:     []byte(`{"note":"my key is ` + planted + `","path":"abc\/def\/ghi\/jkl"}`),
		ResponseHeaders: http.Header{"Set-Cookie": {"a=b"}},
		Chunks: []exchange.Chunk{
			{At: 1, Data: []byte("data: " + planted[:half])},
			{At: 2, Data: []byte(planted[half:] + "\n\n")},
		},
		Error: "upstream said " + planted,
	}
	r.Exchange(e)
	b, err := exchange.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{planted, "abc/def/ghi/jkl", `abc\/def\/ghi\/jkl`, `abc\\/def`} {
		if bytes.Contains(b, []byte(s)) || bytes.Contains(e.Body(), []byte(s)) {
			t.Errorf("secret %q survived redaction: %s", s, b)
		}
	}
	if got, want := string(e.Body()), "data: [REDACTED:OPENAI_API_KEY]\n\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if len(e.Chunks) != 1 || e.Chunks[0].At != 1 {
		t.Errorf("chunks = %+v, want one chunk at the first chunk's time", e.Chunks)
	}
}

func TestZeroAndNilRedactor(t *testing.T) {
	var nilR *Redactor
	if got := string(nilR.Bytes([]byte("x"))); got != "x" {
		t.Errorf("nil Bytes = %q", got)
	}
	var zero Redactor
	if got := zero.Header(http.Header{"Authorization": {"Bearer t"}}).Get("Authorization"); got != "Bearer [REDACTED]" {
		t.Errorf("zero Redactor Authorization = %q, want masked", got)
	}
}

// sequential is how Bytes masked before it took one pass, kept as an
// oracle: each secret in turn, longest first, replaced all over the input,
// masks of the secrets before it included.
type sequential []struct{ value, mask []byte }

func newSequential(r *Redactor) sequential {
	var q sequential
	for _, s := range r.secrets {
		q = append(q, struct{ value, mask []byte }{[]byte(s.value), []byte(s.mask)})
	}
	sort.SliceStable(q, func(i, j int) bool { return len(q[i].value) > len(q[j].value) })
	return q
}

// Bytes is the Redactor's Bytes as it was.
func (q sequential) Bytes(b []byte) []byte {
	for _, s := range q {
		if bytes.Contains(b, s.value) {
			b = bytes.ReplaceAll(b, s.value, s.mask)
		}
	}
	return b
}

// leftmostLongest is what Bytes documents, the slow way: at each position
// every secret is tried, and the longest that begins there is masked. It
// says whether it masked anything.
func leftmostLongest(r *Redactor, b []byte) ([]byte, bool) {
	var out []byte
	masked := false
	for i := 0; i < len(b); {
		best := -1
		for k, s := range r.secrets {
			if bytes.HasPrefix(b[i:], []byte(s.value)) && (best < 0 || len(s.value) > len(r.secrets[best].value)) {
				best = k
			}
		}
		if best < 0 {
			out = append(out, b[i])
			i++
			continue
		}
		out = append(out, r.secrets[best].mask...)
		i += len(r.secrets[best].value)
		masked = true
	}
	return out, masked
}

// overlapping reports whether the one pass and sequential may differ for
// r: some secret is in another or in a mask, has a mask in it, or begins
// with the end of another or of a mask, or ends with the beginning of one.
// Otherwise no two occurrences of secrets overlap, in the input or in
// what sequential makes of it, and both mask the same.
func overlapping(r *Redactor) bool {
	for i, a := range r.secrets {
		for j, b := range r.secrets {
			if i != j && (strings.Contains(a.value, b.value) || overlaps(a.value, b.value)) {
				return true
			}
		}
		for _, m := range r.secrets {
			if strings.Contains(m.mask, a.value) || strings.Contains(a.value, m.mask) || overlaps(a.value, m.mask) || overlaps(m.mask, a.value) {
				return true
			}
		}
	}
	return false
}

// overlaps reports whether a proper, non-empty end of a is a beginning of b.
func overlaps(a, b string) bool {
	for k := 1; k < min(len(a), len(b)); k++ {
		if a[len(a)-k:] == b[:k] {
			return true
		}
	}
	return false
}

// survivor returns a secret that out holds whole where no mask is, or "".
// Out's masks are found by their text, so a secret that the input wrote
// next to a mask's text, or that holds one, is not told.
func survivor(r *Redactor, out []byte) string {
	masked := make([]bool, len(out)+1)
	for _, s := range r.secrets {
		for i := 0; ; {
			j := bytes.Index(out[i:], []byte(s.mask))
			if j < 0 {
				break
			}
			for k := i + j; k < i+j+len(s.mask); k++ {
				masked[k] = true
			}
			i += j + 1
		}
	}
	for _, s := range r.secrets {
		for i := 0; ; {
			j := bytes.Index(out[i:], []byte(s.value))
			if j < 0 {
				break
			}
			if !slices.Contains(masked[i+j:i+j+len(s.value)], true) {
				return s.value
			}
			i += j + 1
		}
	}
	return ""
}

// checkBytes checks r.Bytes and r.String of in against the oracles: what
// Bytes documents always, sequential whenever no secrets overlap, and no
// secret left outside the masks.
func checkBytes(t *testing.T, r *Redactor, in []byte) []byte {
	t.Helper()
	orig := bytes.Clone(in)
	got := r.Bytes(in)
	if !bytes.Equal(in, orig) {
		t.Fatalf("Bytes changed its input %q to %q", orig, in)
	}
	want, masked := leftmostLongest(r, in)
	if !masked {
		want = in
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Bytes(%q):\ngot  %q\nwant %q (leftmost, longest)", in, got, want)
	}
	if !masked && len(in) > 0 && &got[0] != &in[0] {
		t.Fatalf("Bytes(%q) masked nothing but returned a copy", in)
	}
	if masked && len(got) > 0 && len(in) > 0 && &got[0] == &in[0] {
		t.Fatalf("Bytes(%q) returned its input, masked", in)
	}
	if s := r.String(string(in)); s != string(got) {
		t.Fatalf("String(%q) = %q, want %q as Bytes", in, s, got)
	}
	if !overlapping(r) {
		if old := newSequential(r).Bytes(bytes.Clone(in)); !bytes.Equal(got, old) {
			t.Fatalf("Bytes(%q) of secrets that do not overlap:\ngot  %q\nwant %q (sequential)", in, got, old)
		}
	}
	if v := survivor(r, got); v != "" {
		t.Fatalf("Bytes(%q) = %q still holds the secret %q", in, got, v)
	}
	return got
}

func TestBytesOnePass(t *testing.T) {
	r := New([]string{
		"OPENAI_API_KEY=" + planted,
		"GITHUB_TOKEN=ghp_abcdefghijklmnop",
		"SLASHY_TOKEN=abc/def/ghi/jkl",
		"LONG_SECRET=" + planted + "-and-more",
		"OTHER_SECRET=ghp_zzzzzzzz",
		"HTML_TOKEN=abc<def>ghi",
	})
	for in, want := range map[string]string{
		"":                                 "",
		"nothing here":                     "nothing here",
		planted:                            "[REDACTED:OPENAI_API_KEY]",
		"k=" + planted + "!":               "k=[REDACTED:OPENAI_API_KEY]!",
		planted + planted:                  "[REDACTED:OPENAI_API_KEY][REDACTED:OPENAI_API_KEY]",
		planted + "-and-more " + planted:   "[REDACTED:LONG_SECRET] [REDACTED:OPENAI_API_KEY]",
		"ghp_abcdefghijklmnopghp_zzzzzzzz": "[REDACTED:GITHUB_TOKEN][REDACTED:OTHER_SECRET]",
		"ghp_abcdefghijklmno ghp_zzzzzzz":  "ghp_abcdefghijklmno ghp_zzzzzzz",
		`{"p":"abc\/def\/ghi\/jkl"}`:       `{"p":"[REDACTED:SLASHY_TOKEN]"}`,
		`{"h":"abc\u003cdef\u003eghi"}`:    `{"h":"[REDACTED:HTML_TOKEN]"}`,
		"abc<def>ghi":                      "[REDACTED:HTML_TOKEN]",
		"abc/def/ghi/jk":                   "abc/def/ghi/jk",
		"ab" + planted[:len(planted)-1]:    "ab" + planted[:len(planted)-1],
		planted[1:] + planted:              planted[1:] + "[REDACTED:OPENAI_API_KEY]",
	} {
		if got := checkBytes(t, r, []byte(in)); string(got) != want {
			t.Errorf("Bytes(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"", "x", "nothing here", "abc/def/ghi/jk"} {
		if got := r.String(in); got != in {
			t.Errorf("String(%q) = %q, want it unchanged", in, got)
		}
	}
}

// TestBytesOverlapping: where one secret runs into another, the one pass
// masks the one that begins first, and sequential the longer one, leaving
// different ends of the other unmasked; neither leaves a secret whole.
func TestBytesOverlapping(t *testing.T) {
	r := New([]string{"A_KEY=abcdefgh", "B_KEY=fghijklmnop"})
	in := []byte("abcdefghijklmnop")
	if got, want := string(checkBytes(t, r, in)), "[REDACTED:A_KEY]ijklmnop"; got != want {
		t.Errorf("Bytes(%q) = %q, want %q", in, got, want)
	}
	if got, want := string(newSequential(r).Bytes(in)), "abcde[REDACTED:B_KEY]"; got != want {
		t.Errorf("sequential(%q) = %q, want %q", in, got, want)
	}
	if !overlapping(r) {
		t.Errorf("overlapping(%q, %q) = false, want true", "abcdefgh", "fghijklmnop")
	}
	// A mask is not scanned again, where sequential finds a secret made
	// of a mask's text.
	r = New([]string{"A_KEY=zzzzzzzzzz", "B_KEY=A_KEY]en"})
	in = []byte("zzzzzzzzzzend")
	if got, want := string(checkBytes(t, r, in)), "[REDACTED:A_KEY]end"; got != want {
		t.Errorf("Bytes(%q) = %q, want %q", in, got, want)
	}
	if got, want := string(newSequential(r).Bytes(in)), "[REDACTED:[REDACTED:B_KEY]d"; got != want {
		t.Errorf("sequential(%q) = %q, want %q", in, got, want)
	}
}

// TestBytesAllocations: what holds no secret costs no allocation.
func TestBytesAllocations(t *testing.T) {
	line := []byte(benchLine(0, ""))
	str := string(line)
	for _, n := range []int{1, 4, 16} {
		r := New(benchEnv(n, 0))
		if got := testing.AllocsPerRun(10, func() { r.Bytes(line) }); got != 0 {
			t.Errorf("%d secrets: Bytes of a line without any: got %v allocations, want 0", n, got)
		}
		if got := testing.AllocsPerRun(10, func() { r.String(str) }); got != 0 {
			t.Errorf("%d secrets: String of a line without any: got %v allocations, want 0", n, got)
		}
	}
}

// benchEnv is an environment of n secrets of the kinds agents get, with
// different first bytes, and one variable that is not a secret. If size is
// not 0, each secret is size random bytes of base64 instead.
func benchEnv(n, size int) []string {
	kinds := []struct{ name, prefix string }{
		{"OPENAI_API_KEY", "sk-proj-"}, {"ANTHROPIC_API_KEY", "sk-ant-api03-"}, {"GITHUB_TOKEN", "ghp_"},
		{"GEMINI_API_KEY", "AIza"}, {"SLACK_BOT_TOKEN", "xoxb-"}, {"GITLAB_TOKEN", "glpat-"},
		{"HF_TOKEN", "hf_"}, {"AWS_SECRET_ACCESS_KEY", ""},
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for i := range n {
		k := kinds[i%len(kinds)]
		sum := sha256.Sum256([]byte(fmt.Sprint(k.name, i)))
		value := k.prefix + base64.RawURLEncoding.EncodeToString(sum[:])
		if size > 0 {
			value = base64.RawURLEncoding.EncodeToString(sum[:])[:size]
		}
		env = append(env, fmt.Sprintf("%s_%d=%s", k.name, i, value))
	}
	return env
}

// benchLine is a 4 KiB line of ACP JSON-RPC, with secret in its text.
func benchLine(i int, secret string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_%08d","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, i)
	words := strings.Fields("the session agent reads src/main.go and runs go test ./... then edits a file; a tool call returns its output with status completed and the diff shows")
	for k := 0; b.Len() < 4000; k++ {
		if k == 40 && secret != "" {
			b.WriteString("export KEY=" + secret + " ")
		}
		b.WriteString(words[k%len(words)] + " ")
	}
	b.WriteString(`"}}}}`)
	for b.Len() < 4096 {
		b.WriteByte(' ')
	}
	return b.String()
}

// BenchmarkBytes masks a 4 KiB line without a secret and one with one,
// with 1, 4 and 16 secrets configured, the way Bytes did before it took
// one pass (sequential) and the way it does (onepass). Real keys are 20
// bytes or more, and the one pass skips through a line by up to the
// shortest; secrets of 8 bytes, the least New takes, are its worst case.
func BenchmarkBytes(b *testing.B) {
	for _, cfg := range []struct{ n, size int }{{1, 0}, {4, 0}, {16, 0}, {1, minSecretLen}, {16, minSecretLen}} {
		env := benchEnv(cfg.n, cfg.size)
		n := fmt.Sprint(cfg.n)
		if cfg.size > 0 {
			n += fmt.Sprintf("-of-%d-bytes", cfg.size)
		}
		r := New(env)
		_, last, _ := strings.Cut(env[len(env)-1], "=")
		for _, line := range []struct{ name, text string }{{"clean", benchLine(0, "")}, {"secret", benchLine(0, last)}} {
			in := []byte(line.text)
			if got := r.Bytes(in); bytes.Equal(got, in) == (line.name == "secret") {
				b.Fatalf("%s secrets, %s line: Bytes masked %v", n, line.name, !bytes.Equal(got, in))
			}
			for _, impl := range []struct {
				name string
				fn   func([]byte) []byte
			}{{"sequential", newSequential(r).Bytes}, {"onepass", r.Bytes}} {
				b.Run(fmt.Sprintf("secrets=%s/line=%s/%s", n, line.name, impl.name), func(b *testing.B) {
					b.SetBytes(int64(len(in)))
					b.ReportAllocs()
					for b.Loop() {
						impl.fn(in)
					}
				})
			}
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte("prefix"), []byte("suffix"), uint8(3), []byte("sk-planted-0123\x00ghp_abcdefghijkl"), []byte("x\x01y\x02z\x01\x02\x02"))
	f.Add([]byte{}, []byte{}, uint8(0), []byte("abcdefgh\x00fghijklmnop"), []byte("\x01ijklmnop \x02 abcde\x02"))
	f.Add([]byte("{"), []byte("}"), uint8(9), []byte("abc/def/ghi\x00defghijkl\x00abcdefghijkl"), []byte(`"\x01" "abc\/def\/ghi" \x02\x03`))
	f.Add([]byte("a"), []byte("b"), uint8(1), []byte("zzzzzzzzzz\x00S1_KEY]en"), []byte("\x01end"))
	f.Fuzz(func(t *testing.T, pre, post []byte, cut uint8, secrets, text []byte) {
		r := New([]string{"A_TOKEN=" + planted})
		in := append(append(append([]byte{}, pre...), planted...), post...)
		if out := r.Bytes(in); bytes.Contains(out, []byte(planted)) {
			t.Fatalf("Bytes(%q) = %q still holds the secret", in, out)
		}
		// Split anywhere into two chunks.
		k := int(cut) % (len(in) + 1)
		e := &exchange.Exchange{Chunks: []exchange.Chunk{{Data: bytes.Clone(in[:k])}, {Data: bytes.Clone(in[k:])}}}
		r.Exchange(e)
		if bytes.Contains(e.Body(), []byte(planted)) {
			t.Fatalf("exchange body %q still holds the secret", e.Body())
		}

		// Up to 6 secrets of any bytes, apart by NULs, and a text in
		// which bytes 1 to 6 stand for them.
		var env []string
		values := bytes.Split(secrets, []byte{0})
		for i, v := range values[:min(len(values), 6)] {
			env = append(env, fmt.Sprintf("S%d_KEY=%s", i+1, v))
		}
		r = New(env)
		in = nil
		for _, c := range text {
			if int(c) >= 1 && int(c) <= len(env) {
				in = append(in, values[c-1]...)
			} else {
				in = append(in, c)
			}
		}
		checkBytes(t, r, in)
		checkBytes(t, r, append(in, pre...))
	})
}
