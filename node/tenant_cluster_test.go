package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// TestClusterTenantQuotaAtEachOwner: a tenant's takes entering one node
// are counted where their buckets live: the forward carries the tenant,
// so each owner creates at most the tenant's max_buckets for it and
// refuses the rest with CodeQuota, whichever node the take entered.
func TestClusterTenantQuotaAtEachOwner(t *testing.T) {
	c := newSimCluster(t)
	c.deadline = 5 * time.Second
	c.start(3)
	const quota = 5
	ctx := api.WithTenant(context.Background(), api.Tenant{Prefix: "t:", MaxBuckets: quota})
	admitted := map[string]int{}
	forwarded := 0
	for i := range 90 {
		key := fmt.Sprint("t:", i)
		owner := ownerOf(c.nodes["n1"], "hot", key)
		resp, err := c.nodes["n1"].Take(ctx, []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		var ae *api.Error
		switch {
		case err == nil && resp.Allowed && resp.Results[0].Source == api.SourceOwner:
			admitted[owner]++
			if resp.Forwarded {
				forwarded++
			}
		case errors.As(err, &ae) && ae.Code == api.CodeQuota:
		default:
			t.Fatalf("key %s (owner %s): %+v, %v", key, owner, resp, err)
		}
	}
	if forwarded == 0 {
		t.Fatal("no take was forwarded: the test proves nothing")
	}
	for _, name := range c.names() {
		if admitted[name] != quota {
			t.Fatalf("owner %s admitted %d new keys of the tenant, want %d (admitted: %v)", name, admitted[name], quota, admitted)
		}
	}
	// A take without the tenant is not counted.
	if resp, err := c.nodes["n1"].Take(context.Background(), []api.Check{{Limit: "hot", Key: "t:free", Cost: 1}}); err != nil || !resp.Allowed {
		t.Fatalf("a take without a tenant: %+v %v", resp, err)
	}
}
