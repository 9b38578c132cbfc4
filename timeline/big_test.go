package timeline

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/testing/browsertest"
)

// bigFrames is the size of the long session of the tests and of
// BenchmarkPage20000 (BENCHMARKS.md).
const bigFrames = 20000

// TestBigPageInBrowser: a page of 20,000 frames opens, draws only the
// rows in view, and scrolled to its end draws the last rows.
func TestBigPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 frames; not in -short")
	}
	st := bigStore(t, "long", bigFrames)
	p, err := Recording(st, "long")
	if err != nil {
		t.Fatal(err)
	}
	pg := browsertest.Open(t, writePage(t, p))
	if n := browsertest.Eval[int](pg, `document.querySelectorAll('#spacer .row').length`); n == 0 || n > 200 {
		t.Errorf("%d rows in the document, want the few in view (of %d events)", n, len(p.Events))
	}
	last := browsertest.Eval[int](pg, `(() => { const l = document.getElementById('list'); l.scrollTop = l.scrollHeight; l.dispatchEvent(new Event('scroll')); return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(Math.max(...[...document.querySelectorAll('#spacer .row')].map(r => +r.dataset.i)))))); })()`)
	if last != len(p.Events)-1 {
		t.Errorf("scrolled to the end, the last row drawn is event %d, want %d", last, len(p.Events)-1)
	}
	pg.Screenshot("long.png")
}

// BenchmarkPage20000 measures a page of 20,000 frames: the time from
// navigating to it to its first rows drawn in headless Chromium, and its
// size (bytes/page).
func BenchmarkPage20000(b *testing.B) {
	st := bigStore(b, "long", bigFrames)
	p, err := Recording(st, "long")
	if err != nil {
		b.Fatal(err)
	}
	path := b.TempDir() + "/page.html"
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := Write(f, p); err != nil {
		b.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var open time.Duration
	var ready, script, scroll float64
	for range b.N {
		start := time.Now()
		pg := browsertest.Open(b, path)
		open += time.Since(start)
		// The page's own clock: from the start of the navigation to the
		// first rows drawn, and the part of it its script took.
		ready += browsertest.Eval[float64](pg, `window.acptapReadyMs`)
		script += browsertest.Eval[float64](pg, `window.acptapReadyMs - window.acptapStartMs`)
		if n := browsertest.Eval[int](pg, `document.querySelectorAll('#spacer .row').length`); n == 0 {
			b.Fatal("no rows drawn")
		}
		// A jump to the middle of the list, until the rows there are
		// drawn and painted.
		scroll += browsertest.Eval[float64](pg, `new Promise(done => {
			const l = document.getElementById('list'), t0 = performance.now();
			l.scrollTop = l.scrollHeight / 2;
			requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
		})`)
		pg.Close()
	}
	b.ReportMetric(float64(fi.Size()), "bytes/page")
	b.ReportMetric(float64(len(p.Events)), "events")
	b.ReportMetric(ready/float64(b.N), "ms-to-rows")
	b.ReportMetric(script/float64(b.N), "ms-script")
	b.ReportMetric(float64(open.Milliseconds())/float64(b.N), "ms-open-tab-to-rows")
	b.ReportMetric(scroll/float64(b.N), "ms-scroll-to-middle")
	b.Log("page of " + strconv.Itoa(len(p.Events)) + " events: " + strconv.FormatInt(fi.Size(), 10) + " bytes")
}

// BenchmarkBuild20000 measures reading a 20,000-frame recording into a
// page and writing it.
func BenchmarkBuild20000(b *testing.B) {
	st := bigStore(b, "long", bigFrames)
	for range b.N {
		p, err := Recording(st, "long")
		if err != nil {
			b.Fatal(err)
		}
		if err := Write(discard{}, p); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
