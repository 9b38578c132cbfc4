package timeline

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acptap/acptap/internal/testing/browsertest"
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
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "timeline.png"), png, 0o644); err != nil {
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
