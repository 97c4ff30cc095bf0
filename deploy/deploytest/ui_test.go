package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestStatusPageInChromium opens /ui of one node of a 3-node cluster under
// load in Debian's headless Chromium: the page must show three members, a
// non-zero decision rate and the heaviest key, log no console error and
// throw no exception. A screenshot goes to the test's artifact directory
// (kept with go test -artifacts -outputdir DIR).
func TestStatusPageInChromium(t *testing.T) {
	chromium := needTool(t, "chromium")
	c := startCluster(t)

	// Load while the page polls: takes at every node until the test ends.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			body := fmt.Sprintf(`{"checks":[{"limit":"quota","key":"tenant:%d","cost":1}]}`, min(i%7, 3))
			if resp, err := c.hc.Post(c.bases[i%3]+"/v1/take", "application/json", strings.NewReader(body)); err == nil {
				_ = resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	defer wg.Wait()
	defer stop()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	tctx, cancelTimeout := context.WithTimeout(bctx, 45*time.Second)
	defer cancelTimeout()

	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			desc := ""
			if d.Exception != nil {
				desc = d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %s:%d: %s %s", d.URL, d.LineNumber, d.Text, desc))
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	}
	if err := chromedp.Do(tctx); err != nil { // starts the browser and its tab
		t.Fatalf("chromium: %v", err)
	}
	if err := chromedp.Listen(tctx, listen); err != nil {
		t.Fatal(err)
	}
	for _, enable := range []cdp.Command[cdp.Empty, cdp.Empty]{cdplog.Enable, runtime.Enable} {
		if _, err := chromedp.Call(tctx, enable, cdp.Empty{}); err != nil {
			t.Fatalf("%s: %v", enable.Method, err)
		}
	}

	const ready = `document.querySelectorAll('#members tbody tr').length === 3 &&
		Number(document.getElementById('decision-rate').dataset.value) > 0 &&
		document.querySelector('#hot tbody tr') !== null`
	if err := chromedp.Do(tctx,
		chromedp.Navigate(c.bases[0]+"/ui/"),
		chromedp.Poll[chromedp.Void](ready, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(200*time.Millisecond)),
	); err != nil {
		t.Fatalf("the page never showed three members, a decision rate and a hot key: %v", err)
	}
	members, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#members tbody tr')].map(r => r.dataset.member + ' ' + r.cells[1].textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	rate, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#decision-rate")))
	if err != nil {
		t.Fatal(err)
	}
	hotKey, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#hot tbody tr td.key")))
	if err != nil {
		t.Fatal(err)
	}
	errHidden, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`document.getElementById('error').hidden`))
	if err != nil {
		t.Fatal(err)
	}
	errText, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById('error').textContent`))
	shot, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"n1 alive", "n2 alive", "n3 alive"}
	if got, _ := json.Marshal(members); string(got) != mustJSON(want) {
		t.Errorf("members shown %v, want %v", members, want)
	}
	if !errHidden {
		t.Errorf("the page shows an error: %s", errText)
	}
	if hotKey == "" {
		t.Error("no hot key shown")
	}
	t.Logf("decision rate shown: %s/s, heaviest key %s", rate, hotKey)
	path := filepath.Join(t.ArtifactDir(), "status.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
