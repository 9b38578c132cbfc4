// Package browsertest opens pages from disk in a real headless Chromium for tests, one browser per test binary, with the network off.
package browsertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Browsers are looked for under these names on PATH, Debian's first;
// $ACPTAP_CHROMIUM names one elsewhere.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// Path returns the browser the tests use, or "" if there is none.
func Path() string {
	if p := os.Getenv("ACPTAP_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// browser is the test binary's one browser, started on first use.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

func start() (context.Context, error) {
	browser.once.Do(func() {
		// Chromium leaves directories of its own in TMPDIR
		// (org.chromium.Chromium.*): it gets one that Close removes.
		tmp, err := os.MkdirTemp("", "acptap-browser-")
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.Env("TMPDIR="+tmp),
			chromedp.ExecPath(Path()),
			chromedp.NoSandbox, // root in CI containers
			chromedp.WindowSize(1400, 900),
			// No name resolves and no proxy answers: a page that reached
			// for the network would fail, and the test sees its request.
			// 127.0.0.1 is left: OpenURL's pages are served there, and
			// the browser reaches loopback without a proxy.
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
			chromedp.Flag("proxy-server", "127.0.0.1:9"),
			chromedp.Flag("allow-file-access-from-files", true),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		// Start the browser now, so that a broken one fails here once.
		if err := chromedp.Do(bctx); err != nil {
			bcancel()
			acancel()
			os.RemoveAll(tmp)
			browser.err = err
			return
		}
		browser.ctx = bctx
		browser.cancel = func() { bcancel(); acancel(); os.RemoveAll(tmp) }
	})
	return browser.ctx, browser.err
}

// Close stops the browser, if one was started; a TestMain calls it after
// the tests.
func Close() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

// Page is a page open in a tab of the browser.
type Page struct {
	t   testing.TB
	Ctx context.Context

	mu       sync.Mutex
	console  []string // errors, warnings and exceptions
	requests []string // URLs other than the page's own file and data: URLs
	close    func()
}

// Close closes the tab, failing the test if the page logged an error or
// an exception, or reached for anything but its own file. The end of the
// test closes it too.
func (p *Page) Close() { p.close() }

// Require skips the test when there is no browser, except in CI
// (CI=true, as .ci/run runs), where .ci/run installs one and a missing
// browser fails the test.
func Require(t testing.TB) {
	t.Helper()
	if Path() != "" {
		return
	}
	const msg = "no headless browser: install chromium (apt-get install chromium) or set ACPTAP_CHROMIUM; .ci/run installs it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Open opens the file at path in a new tab, with the network off, and
// waits until the page has set data-ready on its body. Without a browser
// the test is skipped. The tab closes at the end of the test, which then
// fails if the page logged an error or an exception, or reached for
// anything but its own file.
func Open(t testing.TB, path string) *Page {
	t.Helper()
	return OpenAt(t, path, "")
}

// OpenAt opens the file at path as Open does, at a fragment of its
// address (what follows '#'; none for "").
func OpenAt(t testing.TB, path, fragment string) *Page {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "file", Path: abs, Fragment: fragment}
	return open(t, u.String(), func(u string) bool { return strings.HasPrefix(u, "file://") }, true)
}

// OpenURL opens a page that a server of the test serves on a loopback
// address, as Open opens a file: the page may reach that server (its
// origin, the scheme, host and port of u) and nothing else.
func OpenURL(t testing.TB, u string) *Page {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		t.Fatalf("browsertest.OpenURL %q: not an absolute URL", u)
	}
	origin := pu.Scheme + "://" + pu.Host + "/"
	// Not offline: that would cut the page from its server too. The
	// browser resolves no name and reaches no proxy, and the test fails
	// on any request to another origin.
	return open(t, u, func(u string) bool { return strings.HasPrefix(u, origin) }, false)
}

// open opens target in a new tab; own says which requests are the
// page's own, offline whether the network is off.
func open(t testing.TB, target string, own func(string) bool, offline bool) *Page {
	t.Helper()
	Require(t)
	bctx, err := start()
	if err != nil {
		t.Fatalf("starting %s: %v", Path(), err)
	}
	ctx, cancel := chromedp.NewContext(bctx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	p := &Page{t: t, Ctx: ctx}
	var wg sync.WaitGroup
	p.close = sync.OnceFunc(func() {
		cancelT()
		cancel()
		wg.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, m := range p.console {
			t.Errorf("the page logged %s", m)
		}
		for _, u := range p.requests {
			t.Errorf("the page requested %s; a page must need nothing but itself", u)
		}
	})
	t.Cleanup(p.Close)
	// Open the tab, then listen before navigating.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	messages := chromedp.Console(ctx)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				p.mu.Lock()
				p.console = append(p.console, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				if m.Exception != nil && m.Exception.Exception != nil {
					p.console = append(p.console, m.Exception.Exception.Description)
				}
				p.mu.Unlock()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range requests {
			if err != nil {
				return
			}
			if u := ev.Request.URL; !own(u) && !strings.HasPrefix(u, "data:") {
				p.mu.Lock()
				p.requests = append(p.requests, u)
				p.mu.Unlock()
			}
		}
	}()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if offline {
		if _, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
			MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(target), chromedp.WaitReady(chromedp.CSS(`body[data-ready]`))); err != nil {
		t.Fatalf("opening %s: %v", target, err)
	}
	return p
}

// Do runs actions in the page's tab, failing the test on an error.
func (p *Page) Do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.Ctx, actions...); err != nil {
		p.t.Fatal(err)
	}
}

// Eval evaluates a JavaScript expression in the page and decodes its
// value into T; an expression whose value is a promise is awaited.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Screenshot saves a screenshot of the viewport as name (a .png) in the
// test's artifact directory and returns the PNG and its path.
func (p *Page) Screenshot(name string) ([]byte, string) {
	p.t.Helper()
	png, err := chromedp.Run(p.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(p.t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
	return png, path
}
