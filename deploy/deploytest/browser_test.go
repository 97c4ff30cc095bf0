package deploytest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is one tab of Debian's headless Chromium that records what the
// page logs as an error: console errors, uncaught exceptions and the
// browser's own error entries (a failed request among them).
type browser struct {
	ctx context.Context // the tab, until the test's deadline

	mu       sync.Mutex // guards problems
	problems []string
}

// newBrowser starts Chromium for the test, stopped when it ends; the tab
// lives for at most timeout.
func newBrowser(t *testing.T, chromium string, timeout time.Duration) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	tctx, cancelTimeout := context.WithTimeout(bctx, timeout)
	t.Cleanup(cancelTimeout)
	b := &browser{ctx: tctx}
	if err := chromedp.Do(tctx); err != nil { // starts the browser and its tab
		t.Fatalf("chromium: %v", err)
	}
	if err := chromedp.Listen(tctx, b.listen); err != nil {
		t.Fatal(err)
	}
	for _, enable := range []cdp.Command[cdp.Empty, cdp.Empty]{cdplog.Enable, runtime.Enable} {
		if _, err := chromedp.Call(tctx, enable, cdp.Empty{}); err != nil {
			t.Fatalf("%s: %v", enable.Method, err)
		}
	}
	return b
}

func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			b.problems = append(b.problems, "console."+string(e.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		desc := ""
		if d.Exception != nil {
			desc = d.Exception.Description
		}
		b.problems = append(b.problems, fmt.Sprintf("exception at %s:%d: %s %s", d.URL, d.LineNumber, d.Text, desc))
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			b.problems = append(b.problems, "log: "+e.Entry.Text+" "+e.Entry.URL)
		}
	}
}

// check fails the test for every problem the page logged, except those
// expected reports true for.
func (b *browser) check(t *testing.T, expected func(string) bool) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if expected == nil || !expected(p) {
			t.Errorf("browser: %s", p)
		}
	}
}
