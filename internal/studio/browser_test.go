package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The browser tests drive headless Chromium (Debian's /usr/bin/chromium, or
// STACKBONE_CHROMIUM). One browser serves the package; each test gets its
// own tab in a fresh browser context (its own cookie jar).

var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
	path   string
}

func chromiumPath() string {
	if p := os.Getenv("STACKBONE_CHROMIUM"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.Exit(code)
}

func startBrowser() {
	browser.path = chromiumPath()
	if browser.path == "" {
		browser.err = errChromiumMissing
		return
	}
	dir, err := os.MkdirTemp("", "stackbone-chromium-")
	if err != nil {
		browser.err = err
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser.path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		allocCancel()
		browser.err = fmt.Errorf("start %s: %w", browser.path, err)
		return
	}
	browser.ctx = ctx
	browser.cancel = func() {
		cancel()
		allocCancel()
		_ = os.RemoveAll(dir)
	}
}

var errChromiumMissing = fmt.Errorf("chromium is not installed (apt-get install -y chromium, or set STACKBONE_CHROMIUM)")

// page is one browser tab on a Stackbone server.
type page struct {
	t   *testing.T
	ctx context.Context
}

// newPage opens a tab. Without Chromium the test fails on CI (CI=true) and
// is skipped elsewhere. On failure a screenshot is saved under
// STACKBONE_ARTIFACTS (or the test's temp dir)/artifacts.
func newPage(t *testing.T) *page {
	t.Helper()
	browser.once.Do(startBrowser)
	if browser.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests need Chromium: %v", browser.err)
		}
		t.Skipf("browser tests need Chromium: %v", browser.err)
	}
	artifacts := os.Getenv("STACKBONE_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(t.TempDir(), "artifacts")
	}
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	p := &page{t: t, ctx: ctx}
	// The page's console and uncaught errors, printed when the test fails.
	var consoleMu sync.Mutex
	var console []string
	if err := chromedp.Listen(ctx, func(ev any) {
		var line string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			parts := make([]string, 0, len(ev.Args))
			for _, a := range ev.Args {
				if a.Value != nil {
					parts = append(parts, string(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			line = string(ev.Type) + ": " + strings.Join(parts, " ")
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			line = fmt.Sprintf("exception: %s at %s:%d", d.Text, d.URL, d.LineNumber+1)
			if d.Exception != nil {
				line += ": " + d.Exception.Description
			}
		default:
			return
		}
		consoleMu.Lock()
		if len(console) < 200 {
			console = append(console, line)
		}
		consoleMu.Unlock()
	}); err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		consoleMu.Lock()
		if len(console) > 0 {
			t.Logf("page console:\n%s", strings.Join(console, "\n"))
		}
		consoleMu.Unlock()
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		buf, err := chromedp.Run(sctx, chromedp.FullScreenshot(90))
		if err != nil {
			t.Logf("no failure screenshot: %v", err)
			return
		}
		_ = os.MkdirAll(artifacts, 0o755)
		name := filepath.Join(artifacts, strings.ReplaceAll(t.Name(), "/", "_")+".png")
		if err := os.WriteFile(name, buf, 0o644); err == nil {
			t.Logf("failure screenshot: %s", name)
		}
		if html, err := chromedp.Run(sctx, chromedp.OuterHTML(chromedp.CSS("main"))); err == nil {
			t.Logf("page main:\n%s", html)
		}
	})
	return p
}

// do runs steps with a time limit.
func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression and decodes its value into T.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// open loads a Studio URL and waits until the app booted.
func (p *page) open(url string) {
	p.t.Helper()
	p.do(chromedp.Navigate(url))
	p.waitJS("the app to boot", `document.documentElement.dataset.ready === 'true'`)
}

// waitJS waits until a JavaScript condition is true.
func (p *page) waitJS(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!(`+cond+`)`, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		p.t.Fatalf("timed out waiting for %s (%s): %v", what, cond, err)
	}
}

// waitText waits until the element sel holds text.
func (p *page) waitText(sel, text string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf("%q in %s", text, sel), fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.textContent.includes(%s))`, js(sel), js(text)))
}

// click clicks the element sel like a mouse. It first scrolls the element to
// the middle of the viewport and waits until a click there would hit it, not
// the chat's sticky composer or header laid over it (how much of a page fits
// above the composer depends on the machine's fonts). A live update can
// re-render the element between finding and clicking it; the click is then
// tried again on the new element.
func (p *page) click(sel string) {
	p.t.Helper()
	p.waitJS(sel+" to be visible and not covered", `(() => {
		const el = document.querySelector(`+js(sel)+`);
		if (!el || !el.getClientRects().length) return false;
		el.scrollIntoView({ block: 'center', inline: 'nearest' });
		const r = el.getBoundingClientRect();
		const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return !!at && (at === el || el.contains(at));
	})()`)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
		err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Could not find node") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("browser: click %s: %v", sel, err)
	}
}

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// card is the CSS selector of a decision's card.
func card(id string) string { return fmt.Sprintf(`article.decision[data-id=%s]`, js(id)) }
