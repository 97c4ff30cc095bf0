package node_test

import (
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3" // Any types of the example
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

// TestRLQSEnvoyExampleDecodes decodes deploy/envoy/envoy-rlqs.yaml (the
// README's RLQS configuration) strictly into Envoy's bootstrap proto,
// every typed_config included, and runs Envoy's generated validation on
// it: a misspelt field or a wrong type fails here, since no Envoy binary
// runs in CI.
func TestRLQSEnvoyExampleDecodes(t *testing.T) {
	raw, err := os.ReadFile("../deploy/envoy/envoy-rlqs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	hcm := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig()
	if hcm == nil || len(hcm.GetValue()) == 0 {
		t.Fatal("no http_connection_manager config")
	}
}
