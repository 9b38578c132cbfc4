package timeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acptap/acptap/internal/testing/browsertest"
	"github.com/acptap/acptap/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// writePage writes p into a file of a temporary directory.
func writePage(t *testing.T, p *Page) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, p); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// visibleLanes returns the lanes of the rows the page shows.
func visibleLanes(pg *browsertest.Page) map[string]int {
	return browsertest.Eval[map[string]int](pg, `(() => { const n = {}; document.querySelectorAll('#spacer .row').forEach(r => { n[r.dataset.lane] = (n[r.dataset.lane] || 0) + 1; }); return n; })()`)
}

// TestRecordingPageInBrowser opens the sample's page in headless
// Chromium: every lane renders, a click expands a frame to its JSON and
// an exchange to its request and response, a tool call's related rows
// light up, a lane filter hides the other lanes, a group of chunks opens,
// next error finds the error answer.
func TestRecordingPageInBrowser(t *testing.T) {
	st := sampleStore(t, "weather")
	p, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	pg := browsertest.Open(t, writePage(t, p))

	lanes := visibleLanes(pg)
	for _, l := range []string{"editor", "agent", "llm", "stderr"} {
		if lanes[l] == 0 {
			t.Errorf("no %s row rendered; rows by lane: %v", l, lanes)
		}
	}

	// A frame: the permission request, expanded to its JSON, its tool
	// call's rows highlighted.
	perm := eventIndex(t, p, func(e Event) bool { return e.Method == "session/request_permission" })
	pg.Do(chromedp.Click(chromedp.CSS(rowSel(perm))))
	detail := browsertest.Eval[string](pg, `document.querySelector('#detail pre.json').textContent`)
	if !contains(detail, `"optionId": "allow"`) || !contains(detail, `"toolCallId": "call_qLFv8oQOs68qRuEVmG8TuEJp"`) {
		t.Errorf("the expanded permission request shows\n%s\nwant its pretty JSON", detail)
	}
	rel := browsertest.Eval[[]int](pg, `[...document.querySelectorAll('#spacer .row.rel')].map(r => +r.dataset.i)`)
	for _, i := range p.Tools[0].Events {
		if i != perm && !containsInt(rel, i) {
			t.Errorf("tool call event %d (%s %s) not highlighted; highlighted %v", i, p.Events[i].Lane, p.Events[i].Method, rel)
		}
	}

	// An exchange: its request and its response.
	x := p.Tools[0].Cause
	pg.Do(chromedp.Click(chromedp.CSS(rowSel(x))))
	text := browsertest.Eval[string](pg, `document.querySelector('#detail').innerText`)
	for _, want := range []string{"gpt-4o-mini", "messages (1)", "tools: weather", "tool call weather", "stop reason", "tool_calls", "raw stream: 12 chunks", "request headers (after redaction)"} {
		if !contains(text, want) {
			t.Errorf("the expanded exchange lacks %q:\n%s", want, text)
		}
	}
	png, _ := pg.Screenshot("recording.png")
	if *update {
		// The README's picture of the page.
		if err := os.WriteFile(filepath.Join("..", "docs", "timeline.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The chunks of the message are one row, which opens.
	g := p.Groups[0]
	rowsBefore := browsertest.Eval[int](pg, `document.querySelectorAll('#spacer .row').length`)
	pg.Do(chromedp.Click(chromedp.CSS(rowSel(g.Events[0]))))
	if got := browsertest.Eval[string](pg, `document.querySelector('#detail pre.text').textContent`); got != g.Text {
		t.Errorf("the joined message shows %q, want %q", got, g.Text)
	}
	if got := browsertest.Eval[int](pg, `document.querySelectorAll('#spacer .row').length`); got != rowsBefore+len(g.Events) {
		t.Errorf("%d rows after opening the group, want %d", got, rowsBefore+len(g.Events))
	}

	// Next error jumps to the error answer.
	pg.Do(chromedp.Click(chromedp.CSS(`#next-error`)))
	if got := browsertest.Eval[int](pg, `+document.querySelector('#detail .detail-event').dataset.i`); !p.Events[got].Err {
		t.Errorf("next error selected event %d, which is no error", got)
	}

	// The text filter: the rows that mention the file read, and the
	// kind filter: the errors.
	got := browsertest.Eval[[]int](pg, `new Promise(done => {
		const q = document.getElementById('filter'), count = document.getElementById('count'), before = count.textContent;
		q.value = 'cities.txt';
		q.dispatchEvent(new Event('input'));
		const poll = () => count.textContent !== before ? done([...document.querySelectorAll('#spacer .row')].map(r => +r.dataset.i)) : setTimeout(poll, 20);
		poll();
	})`)
	read := eventIndex(t, p, func(e Event) bool { return e.Method == "fs/read_text_file" })
	if !slices.Equal(got, []int{read}) {
		t.Errorf("filtered by text, rows %v; want the read alone, %d", got, read)
	}
	got = browsertest.Eval[[]int](pg, `(() => {
		const q = document.getElementById('filter'); q.value = ''; q.dispatchEvent(new Event('input'));
		const k = document.getElementById('kind'); k.value = 'err'; k.dispatchEvent(new Event('change'));
		return [...document.querySelectorAll('#spacer .row')].map(r => +r.dataset.i);
	})()`)
	for _, i := range got {
		if !p.Events[i].Err {
			t.Errorf("filtered by errors, row %d is no error", i)
		}
	}
	if len(got) == 0 {
		t.Errorf("filtered by errors, no row")
	}
	browsertest.Eval[bool](pg, `(() => { const k = document.getElementById('kind'); k.value = 'all'; k.dispatchEvent(new Event('change')); return true; })()`)

	// The lane filter: only the LLM lane left.
	for _, l := range []string{"editor", "agent", "stderr"} {
		pg.Do(chromedp.Click(chromedp.CSS(`#lane-` + l)))
	}
	lanes = visibleLanes(pg)
	if len(lanes) != 1 || lanes["llm"] != 2 {
		t.Errorf("with only the llm lane on, rows by lane %v; want the 2 exchanges alone", lanes)
	}
}

func rowSel(i int) string { return `#spacer .row[data-i="` + itoa(i) + `"]` }

// TestSessionsPageInBrowser opens the page of a Zed-like recording with
// two sessions: every method of a real editor session has a row, each row
// its session, and the session filter shows one session's rows only.
func TestSessionsPageInBrowser(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Create(store.Recording{Name: "zed", Created: sampleCreated, Argv: []string{"my-agent"}, Cwd: "/w"}, false)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	line := func(lane store.Lane, s string) {
		at += time.Millisecond
		w.Append(store.Event{Kind: store.KindFrame, Lane: lane, Offset: at, Data: []byte(s)})
	}
	ed, ag := store.LaneEditor, store.LaneAgent
	methods := []string{"initialize", "session/new", "session/set_mode", "session/set_model", "session/list", "session/prompt",
		"elicitation/create", "terminal/create", "terminal/wait_for_exit", "terminal/release", "_vendor/status", "_vendor/progress",
		"$/cancel_request", "session/close", "session/load", "session/resume"}
	line(ed, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`)
	line(ag, `{"jsonrpc":"2.0","id":"i","result":{"protocolVersion":1}}`)
	line(ed, `{"jsonrpc":"2.0","id":"n1","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	line(ed, `{"jsonrpc":"2.0","id":"n2","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	line(ag, `{"jsonrpc":"2.0","id":"n2","result":{"sessionId":"s-two"}}`)
	line(ag, `{"jsonrpc":"2.0","id":"n1","result":{"sessionId":"s-one"}}`)
	for _, s := range []string{"s-one", "s-two"} {
		line(ed, `{"jsonrpc":"2.0","id":"m-`+s+`","method":"session/set_mode","params":{"sessionId":"`+s+`","modeId":"code"}}`)
		line(ag, `{"jsonrpc":"2.0","id":"m-`+s+`","result":{}}`)
	}
	line(ed, `{"jsonrpc":"2.0","id":"sm","method":"session/set_model","params":{"sessionId":"s-two","modelId":"big"}}`)
	line(ag, `{"jsonrpc":"2.0","id":"sm","result":{}}`)
	line(ed, `{"jsonrpc":"2.0","id":"l","method":"session/list","params":{}}`)
	line(ag, `{"jsonrpc":"2.0","id":"l","result":{"sessions":[]}}`)
	line(ed, `{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"s-one","prompt":[{"type":"text","text":"one"}]}}`)
	line(ed, `{"jsonrpc":"2.0","id":"p2","method":"session/prompt","params":{"sessionId":"s-two","prompt":[{"type":"text","text":"two"}]}}`)
	line(ag, `{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"sessionId":"s-two","mode":"form","message":"Greeting?"}}`)
	line(ed, `{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{"greeting":"hi"}}}`)
	line(ag, `{"jsonrpc":"2.0","id":1,"method":"terminal/create","params":{"sessionId":"s-one","command":"echo"}}`)
	line(ed, `{"jsonrpc":"2.0","id":1,"result":{"terminalId":"t1"}}`)
	line(ag, `{"jsonrpc":"2.0","id":2,"method":"terminal/wait_for_exit","params":{"sessionId":"s-one","terminalId":"t1"}}`)
	line(ed, `{"jsonrpc":"2.0","id":2,"result":{"exitCode":0}}`)
	line(ag, `{"jsonrpc":"2.0","id":3,"method":"terminal/release","params":{"sessionId":"s-one","terminalId":"t1"}}`)
	line(ed, `{"jsonrpc":"2.0","id":3,"result":{}}`)
	line(ag, `{"jsonrpc":"2.0","id":4,"method":"_vendor/status","params":{"sessionId":"s-two"}}`)
	line(ed, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method not found"}}`)
	line(ag, `{"jsonrpc":"2.0","method":"_vendor/progress","params":{"sessionId":"s-two"}}`)
	line(ag, `{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)
	line(ed, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p2"}}`)
	line(ag, `{"jsonrpc":"2.0","id":"p2","error":{"code":-32800,"message":"request cancelled"}}`)
	line(ed, `{"jsonrpc":"2.0","id":"c","method":"session/close","params":{"sessionId":"s-one"}}`)
	line(ag, `{"jsonrpc":"2.0","id":"c","result":{}}`)
	line(ed, `{"jsonrpc":"2.0","id":"ld","method":"session/load","params":{"sessionId":"s-one","cwd":"/w","mcpServers":[]}}`)
	line(ag, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-one","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"one"}}}}`)
	line(ag, `{"jsonrpc":"2.0","id":"ld","result":{}}`)
	line(ed, `{"jsonrpc":"2.0","id":"r","method":"session/resume","params":{"sessionId":"s-two","cwd":"/w","mcpServers":[]}}`)
	line(ag, `{"jsonrpc":"2.0","id":"r","result":{}}`)
	w.Update(func(r *store.Recording) { r.Done, r.Duration = true, at })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	p, err := Recording(st, "zed")
	if err != nil {
		t.Fatal(err)
	}
	if p.Sessions != 2 {
		t.Fatalf("the page has %d sessions, want 2", p.Sessions)
	}
	pg := browsertest.Open(t, writePage(t, p))
	text := browsertest.Eval[string](pg, `document.querySelector('#list').innerText`)
	for _, m := range methods {
		if !contains(text, m) {
			t.Errorf("no row shows %s:\n%s", m, text)
		}
	}
	all := browsertest.Eval[int](pg, `document.querySelectorAll('#spacer .row').length`)
	browsertest.Eval[bool](pg, `(() => { const s = document.querySelector('#session'); s.value = '2'; s.dispatchEvent(new Event('change')); return true; })()`)
	labels := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#spacer .row .tn')].map(c => c.textContent)`)
	if len(labels) == 0 || len(labels) >= all {
		t.Fatalf("session 2 shows %d rows of %d", len(labels), all)
	}
	for _, l := range labels {
		if !strings.HasPrefix(l, "s2") {
			t.Errorf("session 2's filter shows a row of session %q", l)
		}
	}
}

// TestLLMRowsInBrowser: an LLM exchange's row shows, beside its method,
// route and status, what the answer says, as acptap show prints it: the
// tool call with its arguments, the text.
func TestLLMRowsInBrowser(t *testing.T) {
	st := sampleStore(t, "weather")
	p, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	pg := browsertest.Open(t, writePage(t, p))
	routes := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#spacer .row[data-lane=llm] .route')].map(r => r.textContent)`)
	said := browsertest.Eval[[]string](pg, `[...document.querySelectorAll('#spacer .row[data-lane=llm] .said')].map(r => r.textContent)`)
	wantSaid := []string{`tool: weather{"location":"Florence,Italy"}`, `text: "Olá!"`}
	if !slices.Equal(said, wantSaid) {
		t.Errorf("the LLM rows say %q, want %q", said, wantSaid)
	}
	for _, r := range routes {
		if r != "POST /v1/chat/completions → 200" {
			t.Errorf("an LLM row's route reads %q, want the method, the path and the status", r)
		}
	}
	if len(routes) != 2 {
		t.Errorf("%d LLM rows with a route, want 2", len(routes))
	}
	// The whole URL is the route's tooltip.
	if u := browsertest.Eval[string](pg, `document.querySelector('#spacer .row[data-lane=llm] .route').title`); u != "https://api.openai.com/v1/chat/completions" {
		t.Errorf("the route's tooltip is %q, want the URL", u)
	}
}

// TestRowLinkInBrowser: a page opened at #seq-N opens with row N selected
// and in view, a click on a row names it in the address, and a changed
// address goes to its row.
func TestRowLinkInBrowser(t *testing.T) {
	st := bigStore(t, "long", 3000)
	p, err := Recording(st, "long")
	if err != nil {
		t.Fatal(err)
	}
	target := eventIndex(t, p, func(e Event) bool { return e.Seq == 2900 })
	pg := browsertest.OpenAt(t, writePage(t, p), "seq-2900")
	if got := browsertest.Eval[int](pg, `+document.querySelector('#detail .detail-event').dataset.i`); got != target {
		t.Errorf("opened at #seq-2900, the page shows event %d (seq %d), want %d", got, p.Events[got].Seq, target)
	}
	inView := browsertest.Eval[bool](pg, `(() => { const r = document.querySelector('#spacer .row.sel'), l = document.getElementById('list').getBoundingClientRect(); if (!r) return false; const b = r.getBoundingClientRect(); return b.top >= l.top && b.bottom <= l.bottom; })()`)
	if !inView {
		t.Errorf("the row of #seq-2900 is not selected in view")
	}
	// Clicked by the script: the list draws its rows anew as it
	// scrolls, under a click of the browser's.
	first := browsertest.Eval[int](pg, `(() => { const r = document.querySelector('#spacer .row:not(.sel)'); r.click(); return +r.dataset.i; })()`)
	if got, want := browsertest.Eval[string](pg, `location.hash`), "#seq-"+itoa(int(p.Events[first].Seq)); got != want {
		t.Errorf("after a click on a row the address ends in %q, want %q", got, want)
	}
	got := browsertest.Eval[int](pg, `new Promise(done => { addEventListener('hashchange', () => setTimeout(() => done(+document.querySelector('#detail .detail-event').dataset.i), 0), {once: true}); location.hash = '#seq-10'; })`)
	if p.Events[got].Seq != 10 {
		t.Errorf("after the address changed to #seq-10 the page shows seq %d", p.Events[got].Seq)
	}
}

// har is what TestExchangeExportInBrowser reads of a HAR 1.2 log: every
// member HAR requires of a log, an entry, a request, a response and
// their timings.
type har struct {
	Log struct {
		Version string `json:"version"`
		Creator *struct {
			Name    string  `json:"name"`
			Version *string `json:"version"`
		} `json:"creator"`
		Entries []struct {
			StartedDateTime string   `json:"startedDateTime"`
			Time            *float64 `json:"time"`
			Request         struct {
				Method      string       `json:"method"`
				URL         string       `json:"url"`
				HTTPVersion string       `json:"httpVersion"`
				Cookies     []any        `json:"cookies"`
				Headers     []harNV      `json:"headers"`
				QueryString []harNV      `json:"queryString"`
				HeadersSize *int         `json:"headersSize"`
				BodySize    *int         `json:"bodySize"`
				PostData    *harPostData `json:"postData"`
			} `json:"request"`
			Response struct {
				Status      *int    `json:"status"`
				StatusText  *string `json:"statusText"`
				HTTPVersion string  `json:"httpVersion"`
				Cookies     []any   `json:"cookies"`
				Headers     []harNV `json:"headers"`
				Content     struct {
					Size     *int    `json:"size"`
					MimeType *string `json:"mimeType"`
					Text     string  `json:"text"`
				} `json:"content"`
				RedirectURL *string `json:"redirectURL"`
				HeadersSize *int    `json:"headersSize"`
				BodySize    *int    `json:"bodySize"`
			} `json:"response"`
			Cache   *struct{} `json:"cache"`
			Timings struct {
				Send    *float64 `json:"send"`
				Wait    *float64 `json:"wait"`
				Receive *float64 `json:"receive"`
			} `json:"timings"`
		} `json:"entries"`
	} `json:"log"`
}

type harNV struct{ Name, Value string }

type harPostData struct {
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// TestExchangeExportInBrowser: an exchange's detail has its request as a
// curl command, with the headers as the recording masked them, and a
// link that downloads the exchange as a HAR 1.2 log.
func TestExchangeExportInBrowser(t *testing.T) {
	st := sampleStore(t, "weather")
	p, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	p.Acptap = "v1.2.3"
	pg := browsertest.Open(t, writePage(t, p))
	i := p.Tools[0].Cause
	x := p.Events[i].Exchange
	pg.Do(chromedp.Click(chromedp.CSS(rowSel(i))))
	curl := browsertest.Eval[string](pg, `document.querySelector('#detail pre.curl').textContent`)
	want := "curl 'https://api.openai.com/v1/chat/completions' \\\n  -H 'Authorization: Bearer <redacted>' \\\n  -H 'Content-Type: application/json' \\\n  --data-raw '" + string(x.RequestBody) + "'"
	if curl != want {
		t.Errorf("the curl command is\n%s\nwant\n%s", curl, want)
	}
	// The copy button says what it did (a headless browser may refuse
	// the clipboard), and logs no error.
	pg.Do(chromedp.Click(chromedp.CSS(`#detail button.curl`)))
	if got := browsertest.Eval[string](pg, `new Promise(done => { const b = document.querySelector('#detail button.curl'); const poll = () => b.textContent !== 'copy as curl' ? done(b.textContent) : setTimeout(poll, 20); poll(); })`); got != "copied" && !strings.HasPrefix(got, "select the command") {
		t.Errorf("the copy button says %q", got)
	}

	link := browsertest.Eval[[]string](pg, `(() => { const a = document.querySelector('#detail a.har'); return [a.download, decodeURIComponent(a.href.slice(a.href.indexOf(',') + 1))]; })()`)
	if link[0] != "llm-1.har" {
		t.Errorf("the HAR downloads as %q, want llm-1.har", link[0])
	}
	var h har
	dec := json.NewDecoder(strings.NewReader(link[1]))
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("the HAR: %v\n%s", err, link[1])
	}
	l := h.Log
	if l.Version != "1.2" || l.Creator == nil || l.Creator.Name != "acptap" || l.Creator.Version == nil || *l.Creator.Version != "v1.2.3" || len(l.Entries) != 1 {
		t.Fatalf("the HAR's log: %s", link[1])
	}
	e := l.Entries[0]
	started := sampleCreated.Add(time.Duration(p.Events[i].T * float64(time.Millisecond))).Format("2006-01-02T15:04:05.000Z")
	if e.StartedDateTime != started || e.Time == nil || *e.Time != 480 {
		t.Errorf("the entry started %s and took %v, want %s and 480", e.StartedDateTime, e.Time, started)
	}
	rq := e.Request
	if rq.Method != "POST" || rq.URL != x.URL || rq.HTTPVersion == "" || rq.Cookies == nil || rq.QueryString == nil || rq.HeadersSize == nil || rq.BodySize == nil || *rq.BodySize != len(x.RequestBody) {
		t.Errorf("the request: %+v", rq)
	}
	if !slices.Contains(rq.Headers, harNV{"Authorization", "Bearer <redacted>"}) || rq.PostData == nil || rq.PostData.Text != string(x.RequestBody) || rq.PostData.MimeType != "application/json" {
		t.Errorf("the request's headers %v and body %+v", rq.Headers, rq.PostData)
	}
	rs := e.Response
	var body strings.Builder
	for _, c := range x.Chunks {
		body.Write(c.Data)
	}
	if rs.Status == nil || *rs.Status != 200 || rs.StatusText == nil || rs.Cookies == nil || rs.RedirectURL == nil || rs.HeadersSize == nil || rs.BodySize == nil ||
		rs.Content.Size == nil || *rs.Content.Size != body.Len() || rs.Content.MimeType == nil || *rs.Content.MimeType != "text/event-stream" || rs.Content.Text != body.String() {
		t.Errorf("the response: %+v", rs)
	}
	if e.Cache == nil || e.Timings.Send == nil || e.Timings.Wait == nil || *e.Timings.Wait != 120 || e.Timings.Receive == nil || *e.Timings.Receive != 360 {
		t.Errorf("the entry's cache %v and timings %+v", e.Cache, e.Timings)
	}
}

// TestFilterSearchesBodiesInBrowser: the text filter finds an exchange by
// what only its bodies hold: a request's words that JSON escapes, a tool
// result sent back, an answer's text and a tool call's arguments past
// what the row shows; and nothing for a word no event has.
func TestFilterSearchesBodiesInBrowser(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Create(store.Recording{Name: "bodies", Created: sampleCreated, Argv: []string{"my-agent"}, Cwd: "/w"}, false)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	w.Append(store.Event{Kind: store.KindFrame, Lane: store.LaneEditor, Offset: at, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"go"}]}}`)})
	long := strings.Repeat("filler words ", 12)
	chunk := func(delta string) string {
		return `data: {"choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	// 1: a request with an escaped quote and accent, answered by text
	// whose last word is past the row's cut.
	exchangeEvent(t, w, &at, `{"model":"m","stream":true,"messages":[{"role":"user","content":"say \"caf\u00e9\" twice"}]}`,
		[]byte(chunk(`{"content":"`+long+`zebra"}`)+"data: [DONE]\n\n"))
	// 2: a tool call whose arguments end past the row's cut.
	exchangeEvent(t, w, &at, `{"model":"m","stream":true,"messages":[{"role":"user","content":"write"}]}`,
		[]byte(chunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"write","arguments":"{\"text\":\"`+long+`giraffe\"}"}}]}`)+"data: [DONE]\n\n"))
	// 3: the tool's result, sent back in the request.
	exchangeEvent(t, w, &at, `{"model":"m","stream":true,"messages":[{"role":"tool","tool_call_id":"c1","content":"wrote it:\nkiwi"}]}`,
		[]byte(chunk(`{"content":"done"}`)+"data: [DONE]\n\n"))
	w.Update(func(r *store.Recording) { r.Done, r.Duration = true, at })
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	p, err := Recording(st, "bodies")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Events {
		if strings.Contains(e.Summary, "zebra") || strings.Contains(e.Summary, "giraffe") {
			t.Fatalf("a row's summary holds the word searched for: %q", e.Summary)
		}
	}
	pg := browsertest.Open(t, writePage(t, p))
	search := func(q string) []uint64 {
		t.Helper()
		b, _ := json.Marshal(q)
		return browsertest.Eval[[]uint64](pg, `new Promise(done => {
			// Cleared first, at once: the query's count then differs
			// from the unfiltered one, every row.
			const q = document.getElementById('filter'), count = document.getElementById('count');
			q.value = '';
			q.dispatchEvent(new Event('input'));
			const before = count.textContent;
			q.value = `+string(b)+`;
			q.dispatchEvent(new Event('input'));
			const poll = () => count.textContent !== before ? done([...document.querySelectorAll('#spacer .row .n')].map(n => +n.textContent)) : setTimeout(poll, 20);
			poll();
		})`)
	}
	for _, c := range []struct {
		q    string
		want []uint64
	}{
		{`"café"`, []uint64{2}},
		{"ZEBRA", []uint64{2}},
		{"giraffe", []uint64{3}},
		{"kiwi", []uint64{4}},
		{"no such word", nil},
	} {
		if got := search(c.q); !slices.Equal(got, c.want) {
			t.Errorf("searching %q finds the rows %v, want %v", c.q, got, c.want)
		}
	}
}

// TestWaterfallInBrowser: the waterfall draws each exchange as a bar on
// the session's time axis, its TTFB apart from its streaming, each turn
// as a bar and the frames as ticks; a turn zooms in, and an exchange's
// bar opens its row.
func TestWaterfallInBrowser(t *testing.T) {
	st := sampleStore(t, "weather")
	p, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	pg := browsertest.Open(t, writePage(t, p))
	pg.Do(chromedp.Click(chromedp.CSS(`#tab-waterfall`)))
	type bar struct {
		I                 int
		Left, Width, TTFB float64 // px
	}
	bars := func() []bar {
		return browsertest.Eval[[]bar](pg, `[...document.querySelectorAll('#waterfall .wf-x')].map(b => { const r = b.getBoundingClientRect(), w = b.querySelector('.wf-ttfb').getBoundingClientRect(); return {I: +b.dataset.i, Left: r.left, Width: r.width, TTFB: w.width}; })`)
	}
	whole := bars()
	var llm []int
	for i, e := range p.Events {
		if e.Exchange != nil {
			llm = append(llm, i)
		}
	}
	if len(whole) != len(llm) {
		t.Fatalf("%d exchange bars, want %d", len(whole), len(llm))
	}
	for k, b := range whole {
		x := p.Events[llm[k]].Exchange
		if b.I != llm[k] {
			t.Errorf("bar %d is event %d, want %d", k, b.I, llm[k])
		}
		if got, want := b.TTFB/b.Width, x.TTFB/x.Duration; got < want-0.02 || got > want+0.02 {
			t.Errorf("bar %d: its TTFB part is %.2f of it, want %.2f", k, got, want)
		}
	}
	// One axis: the bars' places and lengths are in the ratio of the
	// exchanges' times.
	t0, t1 := p.Events[llm[0]].T, p.Events[llm[1]].T
	pxPerMs := whole[0].Width / p.Events[llm[0]].Exchange.Duration
	if got, want := whole[1].Left-whole[0].Left, (t1-t0)*pxPerMs; got < want-2 || got > want+2 {
		t.Errorf("the second bar starts %.1fpx after the first, want %.1fpx", got, want)
	}
	if n := browsertest.Eval[int](pg, `document.querySelectorAll('#waterfall .wf-turn').length`); n != len(p.Turns) {
		t.Errorf("%d turn bars, want %d", n, len(p.Turns))
	}
	for _, l := range []string{"editor", "agent", "stderr"} {
		if n := browsertest.Eval[int](pg, `document.querySelectorAll('#waterfall .wf-tick.lane-`+l+`').length`); n == 0 {
			t.Errorf("no tick for the %s frames", l)
		}
	}
	png, _ := pg.Screenshot("waterfall.png")
	if *update {
		// docs/inspecting.md's picture of the waterfall.
		if err := os.WriteFile(filepath.Join("..", "docs", "waterfall.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Zoomed to turn 2 by its bar: the first turn's exchanges are out
	// of range. Zoomed to turn 1: its exchanges are wider.
	browsertest.Eval[bool](pg, `(document.querySelector('#waterfall .wf-turn[data-turn="1"]').click(), true)`)
	if n := len(bars()); n != 0 {
		t.Errorf("zoomed to turn 2, which has no exchange, %d bars", n)
	}
	if v := browsertest.Eval[string](pg, `document.getElementById('wf-zoom').value`); v != "1" {
		t.Errorf("zoomed by a turn's bar, the zoom says %q", v)
	}
	browsertest.Eval[bool](pg, `(() => { const z = document.getElementById('wf-zoom'); z.value = '0'; z.dispatchEvent(new Event('change')); return true; })()`)
	zoomed := bars()
	track := browsertest.Eval[float64](pg, `document.querySelector('#waterfall .wf-x').parentElement.getBoundingClientRect().width`)
	span := p.Events[p.Turns[0].Answer].T - p.Events[p.Turns[0].Prompt].T
	// The axis runs from the turn's prompt to its answer, and 1% of that
	// more on each side.
	if want := track * p.Events[llm[0]].Exchange.Duration / (span * 1.02); len(zoomed) != len(whole) || zoomed[0].Width < want-2 || zoomed[0].Width > want+2 {
		t.Errorf("zoomed to turn 1: bars %+v, want the first %.1fpx wide", zoomed, want)
	}
	if w := browsertest.Eval[float64](pg, `document.querySelector('#waterfall .wf-turn[data-turn="0"]').getBoundingClientRect().width / document.querySelector('#waterfall .wf-turn').parentElement.getBoundingClientRect().width`); w < 0.95 {
		t.Errorf("zoomed to turn 1, its bar spans %.2f of the axis", w)
	}

	// A bar opens its exchange's row.
	browsertest.Eval[bool](pg, `(document.querySelector('#waterfall .wf-x').click(), true)`)
	if !browsertest.Eval[bool](pg, `document.getElementById('view-timeline').classList.contains('on')`) {
		t.Fatalf("a click on a bar did not go to the timeline")
	}
	if got := browsertest.Eval[int](pg, `+document.querySelector('#detail .detail-event').dataset.i`); got != llm[0] {
		t.Errorf("a click on the first bar shows event %d, want %d", got, llm[0])
	}
}
