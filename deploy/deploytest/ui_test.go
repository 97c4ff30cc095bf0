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

	"github.com/chromedp/chromedp"
)

// TestStatusPageInChromium opens /ui of one node of a 3-node cluster under
// load in Debian's headless Chromium: the page must show three members, a
// non-zero decision rate, the heaviest key, the limits file version, and
// the charts of the last minutes drawn in total and per member, log no
// console error and throw no exception. A screenshot goes to the test's artifact directory
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

	b := newBrowser(t, chromium, 45*time.Second)
	tctx := b.ctx

	// The page refreshes every 2 s. Under load a refresh can find a member
	// suspect, or its counters a moment late (shown "unreachable"), and the
	// decision rate needs two refreshes: wait until one refresh shows three
	// live members, a decision rate, a hot key and no error, and judge the
	// page's state at that moment. A refresh that failed is still caught:
	// the browser logs the failed request.
	if err := chromedp.Do(tctx, chromedp.Navigate(c.bases[0]+"/ui/")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	page, err := chromedp.Run(tctx, chromedp.Poll[statusPage](
		`((p) => p.members.length === 3 && p.members.every(m => m.endsWith(" alive")) && p.rate > 0 && p.hotKey !== "" && p.errHidden &&
		  p.chartPoints >= 3 && p.chartLast > 0 && p.nodeCharts === 3 ? p : false)(`+statusPageJS+`)`,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(200*time.Millisecond)))
	if err != nil {
		last, _ := chromedp.Run(tctx, chromedp.Evaluate[statusPage](statusPageJS))
		t.Fatalf("the page never showed three live members, a decision rate, a hot key, the charts and no error: %v; last shown: %+v", err, last)
	}
	shot, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"n1 alive", "n2 alive", "n3 alive"}
	if got, _ := json.Marshal(page.Members); string(got) != mustJSON(want) {
		t.Errorf("members shown %v, want %v", page.Members, want)
	}
	// The card says which file version is in force, not a count that could
	// be read as the number of members.
	if page.Versions != "v7" {
		t.Errorf("limits file version card %q, want v7", page.Versions)
	}
	t.Logf("decision rate shown: %s/s, heaviest key %s; total chart %d points, last %.1f/s", page.RateText, page.HotKey, page.ChartPoints, page.ChartLast)
	path := filepath.Join(t.ArtifactDir(), "status.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	b.check(t, nil)
}

// statusPage is what the status page shows, as statusPageJS reads it.
type statusPage struct {
	Members   []string `json:"members"` // "name state" per row, in order
	Rate      float64  `json:"rate"`    // the decision rate's value; 0 when none
	RateText  string   `json:"rateText"`
	HotKey    string   `json:"hotKey"` // the first hot key; empty when none
	ErrHidden bool     `json:"errHidden"`
	ErrText   string   `json:"errText"`
	// Versions is the limits file version card's text.
	Versions string `json:"versions"`
	// ChartPoints is the fewest points of the total chart's three lines,
	// ChartLast its decisions line's latest value.
	ChartPoints int     `json:"chartPoints"`
	ChartLast   float64 `json:"chartLast"`
	// NodeCharts counts the member rows whose chart has every line drawn
	// with two points or more.
	NodeCharts int `json:"nodeCharts"`
}

// statusPageJS evaluates to a statusPage of the page as it is now.
const statusPageJS = `(() => {
  const rate = document.getElementById('decision-rate');
  const hot = document.querySelector('#hot tbody tr td.key');
  const err = document.getElementById('error');
  return {
    members: [...document.querySelectorAll('#members tbody tr')].map(r => r.dataset.member + ' ' + r.cells[1].textContent),
    rate: Number(rate.dataset.value) || 0,
    rateText: rate.textContent,
    hotKey: hot ? hot.textContent : "",
    errHidden: err.hidden,
    errText: err.textContent,
    versions: document.getElementById('versions').textContent,
    chartPoints: ((ls) => ls.length === 3 ? Math.min(...ls.map(l => Number(l.dataset.n))) : 0)([...document.querySelectorAll('#chart-total polyline')]),
    chartLast: Number(document.querySelector('#chart-total polyline.series-decisions')?.dataset.last) || 0,
    nodeCharts: [...document.querySelectorAll('#members tbody tr')].filter(r => {
      const ls = [...r.querySelectorAll('svg.spark polyline')];
      return ls.length === 3 && ls.every(l => Number(l.dataset.n) >= 2);
    }).length,
  };
})()`

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
