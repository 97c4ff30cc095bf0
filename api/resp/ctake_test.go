package resp_test

import (
	"context"
	"slices"
	"testing"
)

// TestCTake: WEIR.CTAKE answers the flat array its doc gives, a repeated
// request id is answered with the first decision and spends nothing more
// (the owner's deduplication, as a gRPC Take's request_id), and a cost of
// 0 means 1.
func TestCTake(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	ctx := context.Background()
	v, err := c.Do(ctx, "WEIR.CTAKE", "req-1", "1000", "export", "k", "2", "search", "k", "0").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		int64(1), int64(0), int64(7), int64(0), int64(0),
		"export", int64(1), int64(4), int64(6), int64(0), int64(1000), int64(0), int64(3000),
		"search", int64(1), int64(2), int64(3), int64(0), int64(1000), int64(0), int64(3000),
	}
	if !slices.Equal(v, want) {
		t.Fatalf("WEIR.CTAKE: %v\nwant %v", v, want)
	}
	again, err := c.Do(ctx, "WEIR.CTAKE", "req-1", "0", "export", "k", "2", "search", "k", "0").Slice()
	if err != nil || !slices.Equal(again, want) {
		t.Errorf("retry with the same id: %v, %v; want the first decision %v", again, err, want)
	}
	if got := ints(t, c, "WEIR.TAKE", "export", "k", "1"); !slices.Equal(got, []int64{1, 3, 0, 1500}) {
		t.Errorf("export after a take and its retry: %v, want 3 left (spent once)", got)
	}
	// No id: each is a take of its own.
	for _, left := range []int64{2, 1, 0} {
		v, err := c.Do(ctx, "WEIR.CTAKE", "", "0", "export", "k", "1").Slice()
		if err != nil || v[0] != int64(1) || v[7] != left {
			t.Errorf("WEIR.CTAKE without id: %v, %v; want allowed with %d left", v, err, left)
		}
	}
	v, err = c.Do(ctx, "WEIR.CTAKE", "", "0", "export", "k", "1").Slice()
	if err != nil || v[0] != int64(0) || v[1] != int64(500) || v[6] != int64(0) || v[9] != int64(500) {
		t.Errorf("WEIR.CTAKE on an empty bucket: %v, %v; want denied, retry after 500 ms", v, err)
	}
}
