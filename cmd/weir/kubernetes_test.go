package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/weir-rl/weir/node"
	"github.com/weir-rl/weir/node/limits"
)

// The manifests in deploy/kubernetes are checked here, beside the flag set
// they pass flags to: every object decodes strictly into its k8s.io/api
// type (an unknown or misspelt field fails), and the StatefulSet's flags,
// ports, probe paths, join name, mounts and grace period agree with what
// `weir serve` accepts and does.

const k8sDir = "../../deploy/kubernetes"

// kustomization is the part of a kustomize Kustomization these manifests
// use; decoding is strict, so a field outside it fails the test.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
}

// manifests holds every object of deploy/kubernetes, decoded strictly.
type manifests struct {
	kust       kustomization
	namespace  *corev1.Namespace
	secret     *corev1.Secret
	configMap  *corev1.ConfigMap
	services   map[string]*corev1.Service
	sts        *appsv1.StatefulSet
	pdb        *policyv1.PodDisruptionBudget
	namespaces map[string]bool // metadata.namespace of every namespaced object
}

// decodeStrict decodes one YAML document into v as the API server does:
// field names match case-sensitively, and an unknown or duplicate field is
// an error. (encoding/json, under sigs.k8s.io/yaml.UnmarshalStrict,
// matches names case-insensitively and would accept "clusterIp".)
func decodeStrict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{services: map[string]*corev1.Service{}, namespaces: map[string]bool{}}
	kb, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeStrict(kb, &m.kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			listed = append(listed, filepath.Base(f))
		}
	}
	slices.Sort(listed)
	res := slices.Sorted(slices.Values(m.kust.Resources))
	if !slices.Equal(listed, res) {
		t.Errorf("kustomization resources %v, but the directory holds %v", res, listed)
	}
	for _, name := range m.kust.Resources {
		b, err := os.ReadFile(filepath.Join(k8sDir, name))
		if err != nil {
			t.Fatalf("kustomization lists %s: %v", name, err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---")) {
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			if err := m.add(doc); err != nil {
				t.Errorf("%s document %d: %v", name, i, err)
			}
		}
	}
	if m.namespace == nil || m.secret == nil || m.configMap == nil || m.sts == nil || m.pdb == nil || len(m.services) != 2 {
		t.Fatalf("want a Namespace, Secret, ConfigMap, StatefulSet, PDB and two Services; got %+v", m)
	}
	return m
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

// add decodes doc strictly into the typed object its apiVersion and kind
// name.
func (m *manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj interface{ GetNamespace() string }
	switch gvk := tm.APIVersion + " " + tm.Kind; gvk {
	case "v1 Namespace":
		m.namespace = &corev1.Namespace{}
		return decodeStrict(doc, m.namespace)
	case "v1 Secret":
		m.secret = &corev1.Secret{}
		obj = m.secret
	case "v1 ConfigMap":
		m.configMap = &corev1.ConfigMap{}
		obj = m.configMap
	case "v1 Service":
		s := &corev1.Service{}
		if err := decodeStrict(doc, s); err != nil {
			return err
		}
		m.services[s.Name] = s
		m.namespaces[s.Namespace] = true
		return nil
	case "apps/v1 StatefulSet":
		m.sts = &appsv1.StatefulSet{}
		obj = m.sts
	case "policy/v1 PodDisruptionBudget":
		m.pdb = &policyv1.PodDisruptionBudget{}
		obj = m.pdb
	default:
		return fmt.Errorf("unexpected object %q", gvk)
	}
	if err := decodeStrict(doc, obj); err != nil {
		return err
	}
	m.namespaces[obj.GetNamespace()] = true
	return nil
}

func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	if m.kust.Kind != "Kustomization" || m.kust.Namespace != m.namespace.Name {
		t.Errorf("kustomization kind %q namespace %q, want Kustomization in %q", m.kust.Kind, m.kust.Namespace, m.namespace.Name)
	}
	if len(m.namespaces) != 1 || !m.namespaces[m.namespace.Name] {
		t.Errorf("objects live in namespaces %v, want only %q", m.namespaces, m.namespace.Name)
	}
	// The decoder does catch a misspelt field: the guard itself works.
	bad := []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n")
	if err := decodeStrict(bad, &corev1.Service{}); err == nil {
		t.Error("strict decoding accepted spec.clusterIp (should be clusterIP)")
	}
}

// container returns the StatefulSet's weir container.
func (m *manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "weir" {
		t.Fatalf("want one container named weir, got %d", len(cs))
	}
	return cs[0]
}

// expandArgs replaces $(VAR) as the kubelet does, from env entries; a
// fieldRef gets a stand-in value of the right shape.
func expandArgs(t *testing.T, c corev1.Container) []string {
	t.Helper()
	vals := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			vals[e.Name] = map[string]string{"metadata.name": "weir-0", "status.podIP": "10.1.2.3"}[e.ValueFrom.FieldRef.FieldPath]
			if vals[e.Name] == "" {
				t.Errorf("env %s: field %s has no stand-in", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			vals[e.Name] = "536870912"
		default:
			vals[e.Name] = e.Value
		}
	}
	re := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var out []string
	for _, a := range c.Args {
		out = append(out, re.ReplaceAllStringFunc(a, func(s string) string {
			name := re.FindStringSubmatch(s)[1]
			v, ok := vals[name]
			if !ok {
				t.Errorf("arg %q refers to $(%s), which the container does not define", a, name)
			}
			return v
		}))
	}
	return out
}

// parsedServe is the StatefulSet's command line as `weir serve` parses it.
type parsedServe struct {
	cfg   node.Config
	cf    clusterFlags
	given map[string]string // flag name → value, as given
}

// parseServe parses args with the very flag set `weir serve` builds.
func parseServe(t *testing.T, args []string, env map[string]string) parsedServe {
	t.Helper()
	p := parsedServe{cfg: node.DefaultConfig(), given: map[string]string{}}
	pf := processFlags{logFormat: "text"}
	fs := newFlagSet("serve")
	serveFlags(fs, &p.cfg, &p.cf, &pf)
	if err := parseWithEnv(fs, args, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("weir serve rejects the StatefulSet's args %q: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Errorf("weir serve would ignore positional args %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { p.given[f.Name] = f.Value.String() })
	if err := p.cf.apply(&p.cfg); err != nil {
		t.Fatalf("weir serve: %v", err)
	}
	if err := p.cfg.Validate(); err != nil {
		t.Fatalf("the StatefulSet's flags give an invalid node.Config: %v", err)
	}
	return p
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

func TestKubernetesManifestsAgreeWithTheBinary(t *testing.T) {
	m := loadManifests(t)
	checkAgreesWithBinary(t, m, m.namespace.Name)
}

// checkAgreesWithBinary checks the objects of m, deployed in namespace ns,
// against what `weir serve` accepts and does: flags, ports, Services,
// join name, mounts, grace period, security and probes. The manifests of
// deploy/kubernetes and the Helm chart's output both go through it.
func checkAgreesWithBinary(t *testing.T, m *manifests, ns string) {
	t.Helper()
	c := m.container(t)

	// Flags: every one is a flag of weir serve and the set parses into a
	// valid config. WEIR_ environment variables would be flags too.
	env := map[string]string{}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "WEIR_") {
			env[e.Name] = e.Value
		}
	}
	p := parseServe(t, expandArgs(t, c), env)
	for name := range env {
		if _, ok := p.given[strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "WEIR_"), "_", "-"))]; !ok {
			t.Errorf("env %s names no weir serve flag", name)
		}
	}
	if p.cfg.NodeName != "weir-0" || p.cfg.Ring.AdvertiseAddr != "10.1.2.3" {
		t.Errorf("node name %q, advertise %q: want the pod's name and IP", p.cfg.NodeName, p.cfg.Ring.AdvertiseAddr)
	}
	if !p.cfg.Clustered {
		t.Error("the StatefulSet runs nodes without gossip")
	}

	// Ports: each listener's port is a named container port.
	ports := map[string]corev1.ContainerPort{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp
	}
	for name, want := range map[string]struct {
		port  int32
		proto corev1.Protocol
	}{
		"http":       {port(t, p.cfg.HTTPAddr), corev1.ProtocolTCP},
		"grpc":       {port(t, p.cfg.GRPCAddr), corev1.ProtocolTCP},
		"gossip-tcp": {int32(p.cfg.Ring.BindPort), corev1.ProtocolTCP},
		"gossip-udp": {int32(p.cfg.Ring.BindPort), corev1.ProtocolUDP},
		"peer":       {port(t, p.cfg.PeerAddr), corev1.ProtocolTCP},
	} {
		if cp, ok := ports[name]; !ok || cp.ContainerPort != want.port || cp.Protocol != want.proto {
			t.Errorf("container port %s = %+v, want %d/%s", name, cp, want.port, want.proto)
		}
	}

	// Services target ports the container has, and select its pods.
	podLabels := m.sts.Spec.Template.Labels
	for _, s := range m.services {
		for k, v := range s.Spec.Selector {
			if podLabels[k] != v {
				t.Errorf("service %s selects %s=%s, pods have %q", s.Name, k, v, podLabels[k])
			}
		}
		for _, sp := range s.Spec.Ports {
			cp, ok := ports[sp.TargetPort.String()]
			if sp.TargetPort.Type != intstr.String || !ok || cp.Protocol != sp.Protocol || cp.ContainerPort != sp.Port {
				t.Errorf("service %s port %s targets %q (%s %d), which the container does not serve", s.Name, sp.Name, sp.TargetPort.String(), sp.Protocol, sp.Port)
			}
		}
	}
	client := m.services[m.sts.Name]
	if client == nil || client.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("no client Service named %s (as the StatefulSet) with a cluster IP", m.sts.Name)
	}

	// Join: the seed is the headless Service's DNS name on the gossip port.
	headless := m.services[m.sts.Spec.ServiceName]
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("serviceName %q: want a headless Service that publishes not-ready pods", m.sts.Spec.ServiceName)
	}
	wantJoin := fmt.Sprintf("%s.%s.svc.cluster.local:%d", headless.Name, ns, p.cfg.Ring.BindPort)
	if !slices.Equal(p.cfg.Ring.Join, []string{wantJoin}) {
		t.Errorf("--join %v, want [%s]", p.cfg.Ring.Join, wantJoin)
	}
	if m.sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Error("podManagementPolicy must be Parallel: a joining pod is not ready until another pod runs")
	}

	// Secret and limits come from their objects, mounted as directories
	// (a subPath mount would never see the ConfigMap change).
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		if vm.SubPath != "" {
			t.Errorf("volume %s mounted with subPath: it would not update", vm.Name)
		}
		mounts[vm.Name] = vm
	}
	for _, v := range m.sts.Spec.Template.Spec.Volumes {
		switch {
		case v.Secret != nil:
			key := strings.TrimPrefix(p.cfg.ClusterSecretFile, mounts[v.Name].MountPath+"/")
			if v.Secret.SecretName != m.secret.Name || m.secret.StringData[key] == "" && len(m.secret.Data[key]) == 0 {
				t.Errorf("--cluster-secret-file %s is not key %q of secret %s", p.cfg.ClusterSecretFile, key, m.secret.Name)
			}
		case v.ConfigMap != nil:
			key := strings.TrimPrefix(p.cfg.LimitsPath, mounts[v.Name].MountPath+"/")
			data, ok := m.configMap.Data[key]
			if v.ConfigMap.Name != m.configMap.Name || !ok {
				t.Fatalf("--limits %s is not key %q of configmap %s", p.cfg.LimitsPath, key, m.configMap.Name)
			}
			if _, err := limits.Parse([]byte(data), "configmap"); err != nil {
				t.Errorf("the ConfigMap's limits file is rejected: %v", err)
			}
		}
	}

	// Graceful termination outlasts the shutdown's own bound: the
	// in-flight requests, then the handoff and the leave (3×LeaveTimeout),
	// whatever --leave-timeout the manifest sets.
	grace := time.Duration(*m.sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	if need := p.cfg.ShutdownBound(); grace < need {
		t.Errorf("terminationGracePeriodSeconds %v < the shutdown's bound %v (shutdown %v + 3 × leave %v)", grace, need, p.cfg.ShutdownTimeout, p.cfg.LeaveTimeout)
	}

	// Non-root, read-only, no privileges.
	psc, csc := m.sts.Spec.Template.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || csc == nil || csc.ReadOnlyRootFilesystem == nil ||
		!*csc.ReadOnlyRootFilesystem || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Error("want runAsNonRoot, readOnlyRootFilesystem and no privilege escalation")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("want cpu and memory requests and a memory limit")
	}

	// The PDB covers the pods and leaves a majority up.
	for k, v := range m.pdb.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("pdb selects %s=%s, pods have %q", k, v, podLabels[k])
		}
	}
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 || *m.sts.Spec.Replicas < 3 {
		t.Error("want 3 or more replicas and maxUnavailable 1")
	}

	// Probes: the paths answer 200 on a real node started from these
	// flags (on loopback ports, without gossip, with the ConfigMap's
	// limits).
	for name, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.String() != "http" {
			t.Fatalf("%s probe: want an httpGet on the http port", name)
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %s and %s, want /readyz and /healthz", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	cfg := p.cfg
	cfg.HTTPAddr, cfg.GRPCAddr, cfg.Clustered, cfg.ClusterSecretFile = "127.0.0.1:0", "127.0.0.1:0", false, ""
	cfg.LimitsPath = filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(cfg.LimitsPath, []byte(m.configMap.Data["limits.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, node.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Shutdown(context.Background()) }()
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		resp, err := http.Get("http://" + n.HTTPAddr() + pr.HTTPGet.Path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("probe %s: %d, want 200", pr.HTTPGet.Path, resp.StatusCode)
		}
	}
}
