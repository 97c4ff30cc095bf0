package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-rl/weir/internal/tracing"
)

// tracingFlags binds the tracing flags of `weir serve` to cfg.
func tracingFlags(fs *flag.FlagSet, cfg *tracing.Config) {
	fs.StringVar(&cfg.Endpoint, "otlp-endpoint", cfg.Endpoint, "OpenTelemetry collector for trace spans, OTLP/gRPC: http://host:4317 (plaintext) or https://host:4317 (empty: OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, else tracing off)")
	fs.Float64Var(&cfg.SampleRatio, "trace-sample-ratio", cfg.SampleRatio, "share of decisions without a sampled caller that start a trace, 0 to 1; a caller's sampled traceparent is always followed (default: OTEL_TRACES_SAMPLER, else 0)")
}

// tracingFromEnv fills what the tracing flags (or their WEIR_ variables)
// left unset from OpenTelemetry's standard variables: the endpoint from
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, the
// sampler from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, the service
// name from OTEL_SERVICE_NAME; OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn tracing off. given reports whether a flag
// was set. The exporter reads its other OTEL_EXPORTER_OTLP_ variables
// (headers, certificate, timeout, compression) itself.
func tracingFromEnv(cfg *tracing.Config, given func(string) bool, getenv func(string) string) error {
	if !given("otlp-endpoint") {
		cfg.Endpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		if cfg.Endpoint == "" {
			cfg.Endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); {
	case strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true"), exp == "none":
		cfg.Endpoint = ""
		return nil
	case exp != "" && exp != "otlp":
		return fmt.Errorf("OTEL_TRACES_EXPORTER=%s: weir exports otlp (or none)", exp)
	}
	if cfg.Endpoint == "" {
		return nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "grpc" {
			return fmt.Errorf("%s=%s: weir exports OTLP over gRPC only (protocol grpc, port 4317)", v, p)
		}
	}
	cfg.ServiceName = getenv("OTEL_SERVICE_NAME")
	if given("trace-sample-ratio") {
		return nil
	}
	return samplerFromEnv(cfg, getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
}

// samplerFromEnv sets cfg's sampling from OTEL_TRACES_SAMPLER's value name
// and OTEL_TRACES_SAMPLER_ARG's arg: the always_on/off and traceidratio
// samplers, parent-based or not. "" leaves cfg as it is.
func samplerFromEnv(cfg *tracing.Config, name, arg string) error {
	ratio := 1.0
	if arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%s: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	base, parentBased := strings.CutPrefix(name, "parentbased_")
	switch base {
	case "":
		return nil
	case "always_on":
		cfg.SampleRatio = 1
	case "always_off":
		cfg.SampleRatio = 0
	case "traceidratio":
		cfg.SampleRatio = ratio
	default:
		return fmt.Errorf("OTEL_TRACES_SAMPLER=%s: want always_on, always_off or traceidratio, each optionally parentbased_", name)
	}
	cfg.IgnoreParent = !parentBased
	return nil
}
