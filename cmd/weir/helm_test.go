package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The Helm chart in deploy/helm/weir is rendered here by Helm's own engine
// (helm.sh/helm/v3, as `helm template` renders it), its output decoded
// strictly into k8s.io/api types and put through the same checks against
// the binary as deploy/kubernetes; with its default values it must render
// deploy/kubernetes' objects, so the two cannot drift apart.

const chartDir = "../../deploy/helm/weir"

// helmLabels are the labels the chart adds for Helm's bookkeeping, which
// the plain manifests do not carry.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// renderChart renders the chart as `helm template NAME deploy/helm/weir -n
// NS` with vals over values.yaml, and decodes every object strictly.
func renderChart(t *testing.T, name, ns string, vals map[string]any) (*manifests, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatalf("chart: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: name, Namespace: ns, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	m := &manifests{services: map[string]*corev1.Service{}, namespaces: map[string]bool{}}
	for _, file := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(file, "NOTES.txt") {
			continue
		}
		for i, doc := range strings.Split(out[file], "\n---") {
			if len(strings.TrimSpace(string(stripComments([]byte(doc))))) == 0 {
				continue
			}
			if err := m.add([]byte(doc)); err != nil {
				t.Errorf("%s document %d: %v\n%s", file, i, err, doc)
			}
		}
	}
	if m.secret == nil && vals["clusterSecret"] == nil || m.configMap == nil || m.sts == nil || m.pdb == nil || len(m.services) != 2 {
		t.Fatalf("the chart renders %+v; want a Secret, ConfigMap, StatefulSet, PDB and two Services", m)
	}
	return m, nil
}

// TestHelmChartAgreesWithTheBinary: the chart rendered with its defaults,
// and with another release name, namespace, size, ports and extra flags,
// passes the manifests' checks against `weir serve`, in one namespace.
func TestHelmChartAgreesWithTheBinary(t *testing.T) {
	m, err := renderChart(t, "weir", "weir", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkAgreesWithBinary(t, m, "weir")

	m, err = renderChart(t, "edge", "rl", map[string]any{
		"replicaCount": 5,
		"ports":        map[string]any{"http": 9090},
		"extraArgs":    []any{"--resp-addr=:6380"},
		"image":        map[string]any{"tag": "v1.2.3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAgreesWithBinary(t, m, "rl")
	c := m.container(t)
	if *m.sts.Spec.Replicas != 5 || c.Image != "weir:v1.2.3" || m.sts.Name != "edge" || m.sts.Spec.ServiceName != "edge-gossip" {
		t.Errorf("values not applied: replicas %d, image %s, names %s/%s", *m.sts.Spec.Replicas, c.Image, m.sts.Name, m.sts.Spec.ServiceName)
	}
	if p := parseServe(t, expandArgs(t, c), nil); p.cfg.RESPAddr != ":6380" || p.cfg.HTTPAddr != ":9090" {
		t.Errorf("extraArgs and ports.http: resp %q, http %q", p.cfg.RESPAddr, p.cfg.HTTPAddr)
	}
	if len(m.namespaces) != 1 || !m.namespaces["rl"] {
		t.Errorf("objects in namespaces %v, want the release's rl", m.namespaces)
	}
}

// TestHelmChartSecret: without a cluster secret the chart refuses to
// render; with existingSecret it makes no Secret and mounts the named one.
func TestHelmChartSecret(t *testing.T) {
	if _, err := renderChart(t, "weir", "weir", map[string]any{"clusterSecret": map[string]any{"value": ""}}); err == nil ||
		!strings.Contains(err.Error(), "clusterSecret.value or clusterSecret.existingSecret is required") {
		t.Errorf("no cluster secret: %v, want a render error saying what to set", err)
	}
	m, err := renderChart(t, "weir", "weir", map[string]any{"clusterSecret": map[string]any{"existingSecret": "mine"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.secret != nil {
		t.Error("existingSecret: the chart still makes a Secret")
	}
	for _, v := range m.sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "mine" {
			t.Errorf("existingSecret: mounts %s, want mine", v.Secret.SecretName)
		}
	}
}

// TestHelmChartRendersTheManifests: with its defaults, as release weir in
// namespace weir, the chart renders every object of deploy/kubernetes but
// the Namespace (helm install --create-namespace makes it), field for field,
// with kustomization.yaml's labels and Helm's own added.
func TestHelmChartRendersTheManifests(t *testing.T) {
	want := loadManifests(t)
	got, err := renderChart(t, "weir", "weir", nil)
	if err != nil {
		t.Fatal(err)
	}
	var kustLabels map[string]string
	for _, l := range want.kust.Labels {
		kustLabels = l.Pairs
	}
	type pair struct{ want, got runtime.Object }
	pairs := map[string]pair{
		"Secret": {want.secret, got.secret}, "ConfigMap": {want.configMap, got.configMap},
		"StatefulSet": {want.sts, got.sts}, "PodDisruptionBudget": {want.pdb, got.pdb},
	}
	if len(want.services) != len(got.services) {
		t.Errorf("services %v, want %v", slices.Collect(maps.Keys(got.services)), slices.Collect(maps.Keys(want.services)))
	}
	for name, s := range want.services {
		pairs["Service "+name] = pair{s, got.services[name]}
	}
	for what, p := range pairs {
		w, g := p.want.DeepCopyObject(), p.got.DeepCopyObject()
		wm, gm := w.(metav1.Object), g.(metav1.Object)
		// kustomize adds its labels to every object's metadata; Helm adds its own.
		wl := maps.Clone(wm.GetLabels())
		if wl == nil {
			wl = map[string]string{}
		}
		maps.Copy(wl, kustLabels)
		wm.SetLabels(wl)
		gl := maps.Clone(gm.GetLabels())
		for _, l := range helmLabels {
			if gl[l] == "" {
				t.Errorf("%s: no %s label", what, l)
			}
			delete(gl, l)
		}
		gm.SetLabels(gl)
		if !equality.Semantic.DeepEqual(w, g) {
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			t.Errorf("%s: the chart renders\n%s\ndeploy/kubernetes has\n%s", what, gy, wy)
		}
	}
}

// TestHelmChartRefusesMisspeltValues: values.schema.json makes a value the
// chart does not know, or one of the wrong type, a render error instead of
// a setting silently ignored.
func TestHelmChartRefusesMisspeltValues(t *testing.T) {
	for _, vals := range []map[string]any{
		{"replicas": 5},
		{"image": map[string]any{"tags": "v1"}},
		{"ports": map[string]any{"http": "8080"}},
		{"logFormat": "xml"},
		{"extraArgs": []any{"resp-addr=:6380"}},
	} {
		if _, err := renderChart(t, "weir", "weir", vals); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("values %v: %v, want a schema error", vals, err)
		}
	}
}
