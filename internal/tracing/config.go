package tracing

import (
	"fmt"
	"math"
	"net/url"
)

// Config configures a Tracer. The zero Config is tracing off.
type Config struct {
	// Endpoint is the OTLP/gRPC collector as a URL: http://host:port for
	// plaintext, https://host:port for TLS (the system roots, or the
	// exporter's own OTEL_EXPORTER_OTLP_CERTIFICATE). "" turns tracing off.
	// Default "".
	Endpoint string
	// SampleRatio is the share of decisions that start a trace of their own
	// (no sampled parent from the caller), by trace id. Range [0, 1];
	// default 0: only traces a caller sampled are recorded.
	SampleRatio float64
	// IgnoreParent samples by SampleRatio alone, whatever the caller's
	// sampled flag says (OTEL_TRACES_SAMPLER=traceidratio, always_on,
	// always_off). Default false: parent-based, a sampled parent is always
	// recorded and an unsampled one never.
	IgnoreParent bool
	// ServiceName is the service.name resource attribute. Default "" means
	// "weir".
	ServiceName string
}

// Enabled reports whether c turns tracing on (an endpoint is set).
func (c Config) Enabled() bool { return c.Endpoint != "" }

// Validate reports the first field out of range. It changes nothing.
func (c Config) Validate() error {
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("tracing: sample ratio %v out of range [0, 1]", c.SampleRatio)
	}
	if c.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return fmt.Errorf("tracing: OTLP endpoint %q: %w", c.Endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tracing: OTLP endpoint %q: want http://host:port (plaintext) or https://host:port (TLS)", c.Endpoint)
	}
	return nil
}
