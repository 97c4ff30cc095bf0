package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/internal/tracing/otlptest"
)

// TestTracingFromEnv: OpenTelemetry's standard variables fill what the
// flags left unset, a flag (or its WEIR_ variable) wins, and a variable
// Weir cannot honour is refused with the reason.
func TestTracingFromEnv(t *testing.T) {
	const ep = "http://collector:4317"
	for _, tc := range []struct {
		name  string
		flags tracing.Config // as the flags set it
		given []string
		env   map[string]string
		want  tracing.Config
		err   string
	}{
		{name: "nothing: off"},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, want: tracing.Config{Endpoint: ep}},
		{
			name: "traces endpoint first", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep},
			want: tracing.Config{Endpoint: ep},
		},
		{
			name: "flag wins", flags: tracing.Config{Endpoint: "http://flag:4317"}, given: []string{"otlp-endpoint"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, want: tracing.Config{Endpoint: "http://flag:4317"},
		},
		{
			name: "service name and parent-based ratio",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SERVICE_NAME": "rl", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
			},
			want: tracing.Config{Endpoint: ep, ServiceName: "rl", SampleRatio: 0.25},
		},
		{
			name: "always_on ignores parents", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "always_on"},
			want: tracing.Config{Endpoint: ep, SampleRatio: 1, IgnoreParent: true},
		},
		{
			name: "ratio flag wins over the sampler", flags: tracing.Config{SampleRatio: 0.5}, given: []string{"trace-sample-ratio"},
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "always_off"},
			want: tracing.Config{Endpoint: ep, SampleRatio: 0.5},
		},
		{name: "sdk disabled", flags: tracing.Config{Endpoint: ep}, given: []string{"otlp-endpoint"}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}},
		{name: "exporter zipkin", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "weir exports otlp"},
		{name: "http protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, err: "over gRPC only"},
		{name: "unknown sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "want always_on"},
		{name: "bad ratio", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "from 0 to 1"},
	} {
		cfg := tc.flags
		given := func(name string) bool { return strings.Contains(strings.Join(tc.given, ","), name) }
		err := tracingFromEnv(&cfg, given, func(k string) string { return tc.env[k] })
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v; want %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case cfg != tc.want:
			t.Errorf("%s: %+v; want %+v", tc.name, cfg, tc.want)
		}
	}
}

// TestServeRefusesAnEndpointWithoutScheme: the endpoint's form is checked
// before anything starts, with the forms it takes.
func TestServeRefusesAnEndpointWithoutScheme(t *testing.T) {
	code, _, stderr := runCmd("serve", "--cluster=false", "--otlp-endpoint", "collector:4317")
	if code == 0 || !strings.Contains(stderr, "want http://host:port (plaintext) or https://host:port (TLS)") {
		t.Fatalf("exit %d, stderr %q; want a failure naming the endpoint forms", code, stderr)
	}
}

// TestBinaryTracesThroughOTLP: a real `weir serve` configured by
// OpenTelemetry's variables alone exports a take's span to an OTLP
// receiver, flushed when SIGTERM stops it.
func TestBinaryTracesThroughOTLP(t *testing.T) {
	recv, err := otlptest.Start("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop()
	bin := buildWeir(t)
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, "serve", "--cluster=false", "--node-name", "traced", "--http-addr", httpAddr,
		"--grpc-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") && !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.Endpoint(), "OTEL_TRACES_SAMPLER=always_on", "OTEL_SERVICE_NAME=weir-test")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	waitFor(t, 20*time.Second, "the node to answer a take", func() bool {
		resp, err := hc.Post("http://"+httpAddr+"/v1/take", "application/json", strings.NewReader(`{"checks":[{"limit":"export","key":"tenant:1"}]}`))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("weir serve: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit within 20s of SIGTERM\n%s", stderr.String())
	}
	spans := recv.Spans()
	if len(spans) == 0 {
		t.Fatalf("no span exported\n%s", stderr.String())
	}
	s := spans[0]
	if s.GetName() != tracing.SpanDecision || s.Resource["service.name"] != "weir-test" || s.Resource["service.instance.id"] != "traced" {
		t.Fatalf("span %s from %v; want %s from weir-test, node traced", s.GetName(), s.Resource, tracing.SpanDecision)
	}
}
