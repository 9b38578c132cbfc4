package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acptap/acptap/internal/testing/browsertest"
)

// closingBrowser runs the tests, then stops the browser of the HTML
// tests, if they started one.
type closingBrowser struct{ m *testing.M }

func (c closingBrowser) Run() int {
	defer browsertest.Close()
	return c.m.Run()
}

// TestHTMLPagesInBrowser records the LLM-backed test agent through acptap
// record (every lane: editor, agent, LLM, stderr), opens its show --html
// page, then replays a changed agent with --html DIR and opens the failed
// replay's page and the index, each in headless Chromium.
func TestHTMLPagesInBrowser(t *testing.T) {
	browsertest.Require(t)
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	flags := []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
	recordSession(t, dir, db, "typo", agentEnv(), flags, "--stderr-log", "--junk", "--read", "notes.txt")

	page := filepath.Join(dir, "typo.html")
	if _, errOut, code := runAcptap(t, dir, agentEnv(), "show", "--store", db, "--html", "-o", page, "typo"); code != 0 {
		t.Fatalf("show --html: exit %d: %s", code, errOut)
	}
	pg := browsertest.Open(t, page)
	lanes := browsertest.Eval[map[string]int](pg, `(() => { const n = {}; document.querySelectorAll('#spacer .row').forEach(r => { n[r.dataset.lane] = (n[r.dataset.lane] || 0) + 1; }); return n; })()`)
	for _, l := range []string{"editor", "agent", "llm", "stderr"} {
		if lanes[l] == 0 {
			t.Errorf("no %s row in the recording's page; rows by lane %v", l, lanes)
		}
	}
	pg.Do(chromedp.Click(chromedp.CSS(`#spacer .row[data-lane="llm"]`)))
	if text := browsertest.Eval[string](pg, `document.querySelector('#detail').innerText`); !strings.Contains(text, "Response") || !strings.Contains(text, "raw stream") {
		t.Errorf("the expanded exchange shows\n%s", text)
	}
	// The exchange exported as HAR names acptap's version as its
	// creator's, as acptap --version prints it.
	stdout, _, _ := runAcptap(t, dir, agentEnv(), "--version")
	want, ok := strings.CutPrefix(strings.TrimSpace(stdout), "acptap version ")
	if !ok || want == "" {
		t.Fatalf("acptap --version prints %q", stdout)
	}
	if got := browsertest.Eval[string](pg, `(() => { const a = document.querySelector('#detail a.har'); return JSON.parse(decodeURIComponent(a.href.slice(a.href.indexOf(',') + 1))).log.creator.version; })()`); got != want {
		t.Errorf("the exported HAR's creator.version is %q, want %q, as acptap --version says", got, want)
	}
	pg.Screenshot("show.png")

	out := filepath.Join(t.TempDir(), "pages")
	stdout, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--html", out, "typo", "--",
		"testagent", "--stderr-log", "--read", "notes.txt", "--system", "Answer in French.")
	if code != ExitDiverged {
		t.Fatalf("replay of the changed agent: exit %d, want %d\n%s%s", code, ExitDiverged, stdout, errOut)
	}
	failed := browsertest.Open(t, filepath.Join(out, "typo.html"))
	if got := browsertest.Eval[string](failed, `document.querySelector('h1 .status').textContent`); got != "FAIL" {
		t.Errorf("the replay's page says %q, want FAIL", got)
	}
	if !browsertest.Eval[bool](failed, `(() => { const r = document.getElementById('first-divergence').getBoundingClientRect(); return document.getElementById('view-compare').classList.contains('on') && r.bottom > 0 && r.top < window.innerHeight; })()`) {
		t.Errorf("the failed replay's page does not show its first divergence")
	}
	if n := browsertest.Eval[int](failed, `document.querySelectorAll('#first-divergence mark.diff, #first-divergence td.v:empty').length`); n == 0 {
		t.Errorf("the first divergence is not marked")
	}
	if n := browsertest.Eval[int](failed, `document.querySelectorAll('details.request.differs[open] mark.diff').length`); n == 0 {
		t.Errorf("the request drift (--system) is not marked")
	}
	failed.Screenshot("replay-failed.png")
	failed.Do(chromedp.Click(chromedp.CSS(`#tab-timeline`)))
	if n := browsertest.Eval[int](failed, `document.querySelectorAll('#spacer .row[data-lane="agent"]').length`); n == 0 {
		t.Errorf("the replay run's timeline has no agent row")
	}

	index, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), `<a href="typo.html">typo</a>`) || !strings.Contains(string(index), ">FAIL<") {
		t.Errorf("the index lacks typo's FAIL and link:\n%s", index)
	}
	ix := browsertest.Open(t, filepath.Join(out, "index.html"))
	ix.Screenshot("index.png")
}

// TestReplayFaultPageInBrowser: in the page of a replay with --fault,
// the exchange answered with the injected fault is marked as such, on
// its row and in its detail; the other exchanges are not.
func TestReplayFaultPageInBrowser(t *testing.T) {
	browsertest.Require(t)
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	flags := []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"}
	recordSession(t, dir, db, "typo", agentEnv(), flags, "--retries", "1")
	out := filepath.Join(t.TempDir(), "pages")
	stdout, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--fault", "1=status:503", "--html", out, "typo")
	if code != 0 {
		t.Fatalf("replay --fault 1=status:503 of an agent that retries: exit %d\n%s%s", code, stdout, errOut)
	}
	pg := browsertest.Open(t, filepath.Join(out, "typo.html"))
	tags := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#spacer .row[data-lane=llm]')].map(r => { const f = r.querySelector('.tag.fault'); return r.querySelector('b').textContent + ' ' + (f ? f.textContent : '-'); })`)
	if len(tags) < 2 || tags[0] != "llm #1 injected fault status:503" {
		t.Fatalf("the LLM rows are marked %q, want llm #1 marked with its fault", tags)
	}
	for _, tag := range tags[1:] {
		if !strings.HasSuffix(tag, " -") {
			t.Errorf("an exchange without a fault is marked: %q", tag)
		}
	}
	browsertest.Eval[bool](pg, `(document.querySelector('#spacer .row[data-lane=llm]').click(), true)`)
	if text := browsertest.Eval[string](pg, `document.querySelector('#detail p.fault').innerText`); !strings.Contains(text, "injected fault, status:503 (replay --fault)") {
		t.Errorf("the faulted exchange's detail says %q", text)
	}
}

// TestReplayStdioFaultPageInBrowser: in the page of a replay with
// --stdio-fault, each editor frame the replay broke is marked with its
// fault, on its row and in its detail, a frame dropped too, which the
// replay never wrote; the filter picks the faulted rows; and the header
// says which faults were applied and which not, as the report does.
func TestReplayStdioFaultPageInBrowser(t *testing.T) {
	browsertest.Require(t)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "typo", agentEnv(), nil)
	out := filepath.Join(t.TempDir(), "pages")
	stdout, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--timeout", "1s", "--html", out,
		"--stdio-fault", "initialize#1=split:5", "--stdio-fault", "session/prompt#1=drop", "--stdio-fault", "session/prompt#2=sever", "typo")
	if code != ExitDiverged || !strings.Contains(stdout, "session/prompt#2=sever (frame ") || !strings.Contains(stdout, "not applied") {
		t.Fatalf("replay dropping the first prompt: exit %d, want %d and the second prompt's fault not applied\n%s%s", code, ExitDiverged, stdout, errOut)
	}
	pg := browsertest.Open(t, filepath.Join(out, "typo.html"))
	tags := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#spacer .row[data-lane=editor]')].map(r => { const f = r.querySelector('.tag.fault'); return r.querySelector('b').textContent + ' ' + (f ? f.textContent : '-'); })`)
	want := []string{"initialize injected fault split:5", "session/new -", "session/prompt injected fault drop"}
	if strings.Join(tags, "|") != strings.Join(want, "|") {
		t.Errorf("the editor rows are marked %q, want %q", tags, want)
	}
	// The fault looks as an LLM exchange's does.
	if bg := browsertest.Eval[string](pg, `getComputedStyle(document.querySelector('#spacer .row[data-lane=editor] .tag.fault')).backgroundColor`); bg != "rgb(255, 224, 178)" {
		t.Errorf("the fault's mark has the background %s", bg)
	}
	info := browsertest.Eval[string](pg, `document.querySelector('header').innerText`)
	for _, w := range []string{
		"stdio fault initialize#1=split:5 (frame 1, initialize id=0): applied",
		"stdio fault session/prompt#1=drop (frame 5, session/prompt id=2): applied",
		"stdio fault session/prompt#2=sever (frame ",
		"not applied: the replay ended before it came to the frame",
	} {
		if !strings.Contains(info, w) {
			t.Errorf("the page's header lacks %q:\n%s", w, info)
		}
	}
	// The kind filter has the injected faults, and picks their rows.
	picked := browsertest.Eval[[]string](pg, `(() => { const k = document.getElementById('kind'); k.value = 'fault'; k.dispatchEvent(new Event('change')); return [...document.querySelectorAll('#spacer .row')].map(r => r.querySelector('b').textContent); })()`)
	if strings.Join(picked, "|") != "initialize|session/prompt" {
		t.Errorf("the filter of injected faults shows the rows %q, want initialize and session/prompt", picked)
	}
	browsertest.Eval[bool](pg, `(document.querySelectorAll('#spacer .row')[1].click(), true)`)
	if text := browsertest.Eval[string](pg, `document.querySelector('#detail p.fault').innerText`); !strings.Contains(text, "injected stdio fault, drop (replay --stdio-fault): it was not written") {
		t.Errorf("the dropped frame's detail says %q", text)
	}
	// The text filter finds them too.
	n := browsertest.Eval[int](pg, `(() => { const k = document.getElementById('kind'); k.value = 'all'; k.dispatchEvent(new Event('change')); const q = document.getElementById('filter'); q.value = ''; q.value = 'injected fault'; q.dispatchEvent(new Event('input')); return new Promise(done => setTimeout(() => done(document.querySelectorAll('#spacer .row').length), 300)); })()`)
	if n != 2 {
		t.Errorf("searching for \"injected fault\" shows %d rows, want the 2 faulted ones", n)
	}
	pg.Screenshot("replay-stdio-faults.png")
}
