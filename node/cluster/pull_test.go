package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/transport"
)

// slowHolder is a previous owner's peer service that serves a pull only
// once released, handing over a bucket in debt: the holder that extracts
// the key's state while the request that asked for it gives up.
type slowHolder struct {
	release chan struct{}
	served  chan struct{}
}

func (h slowHolder) Serve(_ context.Context, _ string, reqs []transport.Request) []transport.Reply {
	out := make([]transport.Reply, len(reqs))
	for i, r := range reqs {
		if r.Op != transport.OpPull || len(r.Checks) == 0 {
			continue
		}
		<-h.release
		out[i].State.Buckets = []bucket.Entry{{
			Name: "hot", Key: r.Checks[0].Key,
			Snapshot: bucket.Snapshot{Algorithm: bucket.TokenBucket, Count: 3},
		}}
		close(h.served)
	}
	return out
}

func (slowHolder) Handoff(context.Context, string, transport.State) error { return nil }

func (slowHolder) Replicate(context.Context, string, transport.Replica) error {
	return nil
}

func (slowHolder) Report(context.Context, transport.ReportRequest) transport.Report {
	return transport.Report{}
}

// TestPullOutlivesTheRequestThatStartedIt: the holder extracts a key's
// state when it serves the pull, so a pull's reply must be taken in even
// when the request that started it gave up waiting (its deadline passed,
// answered as overload). Abandoned, the debt would be nowhere, and the next
// request would start the key from a fresh bucket: the join that
// over-admitted a hot key by most of its capacity.
func TestPullOutlivesTheRequestThatStartedIt(t *testing.T) {
	c, eng := member(t)
	h := slowHolder{release: make(chan struct{}), served: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(h, nil)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = c.pullOne(ctx, lis.Addr().String(), api.Check{Limit: "hot", Key: "k"})
	if !errors.Is(err, engine.ErrOwnerLate) {
		t.Fatalf("pull past its caller's deadline: %v, want ErrOwnerLate", err)
	}
	close(h.release) // the holder extracts and answers only now
	<-h.served
	deadline := time.Now().Add(10 * time.Second)
	for !eng.HasBucket("hot", "k") {
		if time.Now().After(deadline) {
			t.Fatal("the state the holder handed over after its asker gave up was never taken in")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e, ok := eng.SnapshotBucket(time.Now(), "hot", "k")
	if !ok || e.Snapshot.Count > 3 {
		t.Fatalf("taken in %+v, want at most the 3 tokens handed over", e.Snapshot)
	}
	if !c.wasFetched("hot", "k") {
		t.Fatal("the key is not recorded as pulled")
	}
}

// TestUnjoinedNodeWaitsForItsJoinWithinHalfTheDeadline: a batch of
// forwards reaching a node that has not joined yet waits for the join,
// once, for no more than half of what is left of the forwards' deadline,
// and then answers NotOwner in time for the sender to fall back.
func TestUnjoinedNodeWaitsForItsJoinWithinHalfTheDeadline(t *testing.T) {
	c, _ := member(t)
	c.rules.Seeds = 1 // started with a seed it never reaches: never joined
	if c.placement().Joined() {
		t.Fatal("a node that reached none of its seeds reports joined")
	}
	start := time.Now()
	r := transport.Request{Op: transport.OpTake, Checks: []api.Check{{Limit: "hot", Key: "k", Cost: 1}}, Deadline: start.Add(time.Second)}
	reps := peerHandler{c: c}.Serve(context.Background(), "n2", []transport.Request{r, r})
	took := time.Since(start)
	if rep := reps[0]; !rep.NotOwner || !reps[1].NotOwner {
		t.Fatalf("an unjoined node answered %+v, want NotOwner", rep)
	}
	if took < 400*time.Millisecond || took >= time.Second {
		t.Fatalf("answered after %v, want about half the 1s deadline", took)
	}
}
