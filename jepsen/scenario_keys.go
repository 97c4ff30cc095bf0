package jepsen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// pickKeys finds one hot key owned by each node (sc.HotKeys 0; with
// sc.HotKeys 1, the first hot key, whichever node owns it) and names the
// cold keys, returning every key's owner (by node name) as node 1 sees it.
func pickKeys(ctx context.Context, c *Prober, sc ScenarioConfig, n int) (map[BucketID]string, []string, []string, error) {
	if sc.HotKeys == 1 && !sc.Standalone {
		owner, hot, cold, err := pickKeys(ctx, c, ScenarioConfig{Hot: sc.Hot, Cold: sc.Cold, ColdKeys: sc.ColdKeys}, n)
		if err != nil {
			return nil, nil, nil, err
		}
		first := slices.MinFunc(hot, func(a, b string) int { return cmp.Compare(keyNum(a), keyNum(b)) })
		for _, k := range hot {
			if k != first {
				delete(owner, BucketID{sc.Hot.Name, k})
			}
		}
		return owner, []string{first}, cold, nil
	}
	owner := make(map[BucketID]string)
	hot := make([]string, n)
	if sc.Standalone {
		for i := range n {
			hot[i] = "hot-" + strconv.Itoa(i)
		}
	} else {
		found := 0
		for j := 0; j < 1000 && found < n; j++ {
			k := "hot-" + strconv.Itoa(j)
			in, err := c.Info(ctx, 1, sc.Hot.Name, k)
			if err != nil {
				return nil, nil, nil, err
			}
			i, err := strconv.Atoi(strings.TrimPrefix(in.Owner, "n"))
			if err != nil || i < 1 || i > n {
				return nil, nil, nil, fmt.Errorf("jepsen: unexpected owner %q", in.Owner)
			}
			if hot[i-1] == "" {
				hot[i-1] = k
				owner[BucketID{sc.Hot.Name, k}] = in.Owner
				found++
			}
		}
		if found < n {
			return nil, nil, nil, errors.New("jepsen: could not find a hot key for every node")
		}
	}
	cold := make([]string, sc.ColdKeys)
	for j := range cold {
		cold[j] = "cold-" + strconv.Itoa(j)
		if sc.Standalone {
			continue
		}
		in, err := c.Info(ctx, 1, sc.Cold.Name, cold[j])
		if err != nil {
			return nil, nil, nil, err
		}
		owner[BucketID{sc.Cold.Name, cold[j]}] = in.Owner
	}
	return owner, hot, cold, nil
}

// pickLeaseKeys finds one key of the concurrency limit owned by each node
// and adds their owners to owner.
func pickLeaseKeys(ctx context.Context, c *Prober, sc ScenarioConfig, n int, owner map[BucketID]string) ([]string, error) {
	keys := make([]string, n)
	if sc.Standalone {
		for i := range n {
			keys[i] = "lease-" + strconv.Itoa(i)
		}
		return keys, nil
	}
	found := 0
	for j := 0; j < 1000 && found < n; j++ {
		k := "lease-" + strconv.Itoa(j)
		in, err := c.Info(ctx, 1, sc.Conc.Name, k)
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(strings.TrimPrefix(in.Owner, "n"))
		if err != nil || i < 1 || i > n {
			return nil, fmt.Errorf("jepsen: unexpected owner %q", in.Owner)
		}
		if keys[i-1] == "" {
			keys[i-1] = k
			owner[BucketID{sc.Conc.Name, k}] = in.Owner
			found++
		}
	}
	if found < n {
		return nil, errors.New("jepsen: could not find a lease key for every node")
	}
	return keys, nil
}

// keyNum is the number of a picked key ("hot-7" is 7).
func keyNum(k string) int {
	n, _ := strconv.Atoi(k[strings.LastIndexByte(k, '-')+1:])
	return n
}
