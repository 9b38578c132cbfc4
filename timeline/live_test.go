package timeline

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/acptap/acptap/internal/testing/browsertest"
	"github.com/acptap/acptap/store"
)

// TestLiveMatchesRecording: a Live page fed a recording's events as show
// --follow passes them (each exchange once it ended, after frames with
// later Seqs; a line in pieces piece by piece) is the page Recording
// builds, at the end and, for the events so far, on the way.
func TestLiveMatchesRecording(t *testing.T) {
	st := sampleStore(t, "weather")
	rec, err := st.Get("weather")
	if err != nil {
		t.Fatal(err)
	}
	var events []store.Event
	if err := st.Events("weather", func(e store.Event) error {
		e.Data = append([]byte(nil), e.Data...)
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	l := NewLive()
	var held []store.Event // exchanges not ended yet: passed three events later
	pages := 0
	for i, e := range events {
		if e.Kind == store.KindExchange {
			held = append(held, e)
		} else {
			l.Add(e)
		}
		if i%3 == 2 {
			for _, x := range held {
				l.Add(x)
			}
			held = nil
		}
		if p := l.Page(rec); len(p.Events) > 0 {
			pages++
		}
	}
	for _, x := range held {
		l.Add(x)
	}
	want, err := Recording(st, "weather")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(l.Page(rec))
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("the live page at the end differs from the recording's:\n%s\nwant\n%s", got, wantJSON)
	}
	if pages == 0 {
		t.Errorf("no page on the way had a row")
	}
}

// TestLivePageInBrowser: a live page asks its server for the next
// version and shows it without a reload where the user was: an exchange
// that ended late, placed above the rows in view, does not move them,
// and the row selected stays selected; the last version ends the asking.
func TestLivePageInBrowser(t *testing.T) {
	st := bigStore(t, "long", 600)
	rec, err := st.Get("long")
	if err != nil {
		t.Fatal(err)
	}
	var events []store.Event
	if err := st.Events("long", func(e store.Event) error {
		e.Data = append([]byte(nil), e.Data...)
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The exchange of turn 3 ends late: the first version lacks it.
	l := NewLive()
	var late store.Event
	exchanges := 0
	for _, e := range events {
		if e.Kind == store.KindExchange {
			if exchanges++; exchanges == 3 {
				late = e
				continue
			}
		}
		l.Add(e)
	}
	v1 := l.Page(rec)
	v1.Live = &LiveState{URL: "data", Version: 1}
	l.Add(late)
	v2 := l.Page(rec)
	v2.Live = &LiveState{URL: "data", Version: 2, Done: true}
	next := make(chan struct{})
	var asked []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI())
		mu.Unlock()
		switch r.URL.Path {
		case "/page/":
			Write(w, v1)
		case "/page/data":
			if r.URL.Query().Get("after") != "1" {
				http.Error(w, "asked for "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v2)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	pg := browsertest.OpenURL(t, srv.URL+"/page/")
	type view struct {
		Top    float64
		TopSeq int
		Sel    int
		Rows   int
	}
	look := `(() => { const l = document.getElementById('list'), r = [...document.querySelectorAll('#spacer .row')].sort((a, b) => a.offsetTop - b.offsetTop).find(r => r.offsetTop >= l.scrollTop); const d = document.querySelector('#detail h2'); return {Top: l.scrollTop, TopSeq: +r.querySelector('.n').textContent, Sel: d ? +d.textContent.slice(1).split(' ')[0] : 0, Rows: parseInt(document.getElementById('count').textContent)}; })()`
	browsertest.Eval[bool](pg, `new Promise(done => { window.notReloaded = true; document.getElementById('list').scrollTop = 300 * 22; const poll = () => { const r = document.querySelector('#spacer .row[data-r="305"]'); if (r) { r.click(); done(true); } else setTimeout(poll, 20); }; poll(); })`)
	was := browsertest.Eval[view](pg, look)
	close(next)
	if !browsertest.Eval[bool](pg, `new Promise(done => { const end = Date.now() + 10000; const poll = () => /ended/.test(document.getElementById('live-status').textContent) ? done(true) : Date.now() > end ? done(false) : setTimeout(poll, 20); poll(); })`) {
		t.Fatalf("the page never showed the last version")
	}
	now := browsertest.Eval[view](pg, look)
	if now.Rows != was.Rows+1 || now.TopSeq != was.TopSeq || now.Sel != was.Sel || now.Top != was.Top+22 {
		t.Errorf("after an exchange came above the view: %+v, was %+v; want one row more, above, the same rows in view and the same row selected", now, was)
	}
	if !browsertest.Eval[bool](pg, `window.notReloaded === true`) {
		t.Errorf("the page reloaded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[1] != "/page/data?after=1" {
		t.Errorf("the page asked for %q, want the page and then the version after 1, once", asked)
	}
}
