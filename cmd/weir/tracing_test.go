package main

import (
	"strings"
	"testing"

	"github.com/weir-rl/weir/internal/tracing"
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
