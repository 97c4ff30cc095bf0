package grpcapi

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/apitest"
)

// The fuzz target checks that no input panics the conversion of a request
// message, that whatever it accepts satisfies the input checks (so the
// Decider only ever sees well-formed requests), and that whatever it
// rejects is CodeInvalid. Its seed corpus lives in testdata/fuzz.

var fuzzLimits = inputLimits{maxKeyBytes: apitest.FuzzMaxKeyBytes, maxChecks: apitest.FuzzMaxChecks}

// FuzzProtoRequests decodes arbitrary bytes as each gRPC request message, as
// the gRPC codec does, and runs the conversion and checks of the server.
func FuzzProtoRequests(f *testing.F) {
	for _, m := range []proto.Message{
		&weirv1.TakeRequest{Id: 7, Checks: []*weirv1.Check{{Limit: "export", Key: "tenant:acme", Cost: 1}, {Limit: "x", Key: "y", Cost: -1}}},
		&weirv1.AcquireRequest{Limit: "export-db", Key: "k", Holder: "h", TtlMs: 30000, WaitMs: 10},
		&weirv1.RenewRequest{Id: "l-1", TtlMs: -5},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var take weirv1.TakeRequest
		if proto.Unmarshal(data, &take) == nil {
			checks, err := checksFromProto(take.GetChecks(), fuzzLimits)
			if err != nil {
				apitest.WantInvalid(t, err)
			} else {
				apitest.WantValidChecks(t, checks)
			}
		}
		var acq weirv1.AcquireRequest
		if proto.Unmarshal(data, &acq) == nil {
			req, err := acquireFromProto(&acq, fuzzLimits)
			if err != nil {
				apitest.WantInvalid(t, err)
			} else if req.Key == "" || req.TTL < 0 || req.Wait < 0 {
				t.Fatalf("accepted %+v", req)
			}
		}
		var renew weirv1.RenewRequest
		if proto.Unmarshal(data, &renew) == nil {
			if err := api.ValidateLeaseID(renew.GetId()); err != nil {
				if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeInvalid {
					t.Fatalf("lease id error %v", err)
				}
			}
		}
	})
}
