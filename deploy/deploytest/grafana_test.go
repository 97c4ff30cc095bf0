package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard JSON the tests read. The
// decoder rejects unknown top-level fields only where noted; panels carry
// many options Grafana owns.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Schema     int     `json:"schemaVersion"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

// allPanels returns every panel, rows' nested ones included, rows left out.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" {
				out = append(out, p)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboardIsWellFormed checks what Grafana needs to import the
// dashboard and what an operator expects of it: unique ids, a Prometheus
// datasource chosen by variable, a grid position, and each panel of the
// issue present. That its queries return data is
// TestPrometheusAnswersEveryQuery's part.
func TestDashboardIsWellFormed(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" || d.Schema < 30 {
		t.Errorf("title %q uid %q schemaVersion %d", d.Title, d.UID, d.Schema)
	}
	ids := map[int]bool{}
	var titles []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
	}
	for _, p := range d.allPanels() {
		titles = append(titles, p.Title)
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		}
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %+v", p.Title, tg)
			}
			refs[tg.RefID] = true
		}
	}
	all := strings.Join(titles, "|")
	wants := []string{
		"Decisions", "Denials", "Fallback", "Decision latency", "Forward latency", "Forward errors",
		"batch size", "Members", "Ring epoch", "Limits version", "Buckets", "Leases", "reloads",
	}
	for _, want := range wants {
		if !strings.Contains(all, want) {
			t.Errorf("no panel about %q", want)
		}
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("template variables %v, want datasource and instance", vars)
	}
}
