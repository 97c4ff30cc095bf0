package ring

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{},
		{GRPCAddr: "10.0.0.1:8081", LimitsVersion: 7, Incarnation: 1_700_000_000_000_000_000},
		{GRPCAddr: "[::1]:1", LimitsVersion: -1, Incarnation: math.MinInt64},
		{LimitsVersion: math.MaxInt64},
		{GRPCAddr: "10.0.0.1:8081", APIAddr: "10.0.0.1:8080", HTTPAddr: "10.0.0.1:80", Incarnation: 5},
		{HTTPAddr: "h:1"},
	} {
		for _, flags := range []byte{0, metaLeaving} {
			got, gotFlags, err := decodeMeta(m.appendFlags(nil, flags))
			if err != nil || got != m || gotFlags != flags {
				t.Errorf("round trip %+v %d: got %+v %d, %v", m, flags, got, gotFlags, err)
			}
		}
	}
	if b := (Meta{GRPCAddr: "10.0.0.1:8081", LimitsVersion: 3, Incarnation: 1 << 60}).appendTo(nil); len(b) > 32 {
		t.Errorf("meta not compact: %d bytes", len(b))
	}
	if err := (Meta{GRPCAddr: string(make([]byte, maxMetaLen))}).Validate(); err == nil {
		t.Error("oversized meta validated")
	}
	for _, bad := range [][]byte{{2}, {1}, {3, 0, 0, 0}, {1, 0}, {1, 0, 0x80}, {1, 0, 2}, {2, 0, 0, 0, 5, 'a'}, {2, 0, 0, 0, 0, 0}} {
		if _, _, err := decodeMeta(bad); err == nil {
			t.Errorf("decodeMeta(%v) accepted", bad)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(Meta{GRPCAddr: "a:1", LimitsVersion: 2, Incarnation: 3}.appendTo(nil))
	f.Add([]byte{})
	f.Add(Meta{GRPCAddr: "a:1", APIAddr: "b:2", HTTPAddr: "c:3"}.appendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, flags, err := decodeMeta(b)
		if err != nil || len(b) == 0 {
			return
		}
		if got, gotFlags, err := decodeMeta(m.appendFlags(nil, flags)); err != nil || got != m || gotFlags != flags {
			t.Fatalf("re-encode of %+v: %+v %v", m, got, err)
		}
	})
}

func TestHashKey(t *testing.T) {
	for _, tc := range []struct{ limit, key, want string }{
		{"api", "tenant:acme", "api\x00tenant:acme"},
		{"api", "tenant:{acme}:route", "acme"},
		{"export", "{acme}", "acme"},
		{"api", "a{}b", "api\x00a{}b"},     // empty tag: whole key
		{"api", "a{b", "api\x00a{b"},       // no closing brace
		{"api", "a}b{c}d", "c"},            // first '{' then first '}' after it
		{"api", "x{{y}}", "{y"},            // as in Redis
		{"api", "x{}{y}", "api\x00x{}{y}"}, // the first tag is empty: no tag
		{"", "", "\x00"},
	} {
		if got := HashKey(tc.limit, tc.key); got != tc.want {
			t.Errorf("HashKey(%q, %q) = %q, want %q", tc.limit, tc.key, got, tc.want)
		}
	}
}

func members(states ...State) []Member {
	ms := make([]Member, len(states))
	for i, s := range states {
		ms[i] = Member{Name: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("10.0.0.%d:7946", i+1), State: s}
	}
	return ms
}

func owners(v *View, keys int) map[string]string {
	out := make(map[string]string, keys)
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		m, ok := v.Owner(k)
		if !ok {
			panic("no owner")
		}
		out[k] = m.Name
	}
	return out
}

func TestBuildViewMajorityRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		states   []State
		live     int
		majority bool
		ring     []string // members that may own keys
	}{
		{"all alive", []State{Alive, Alive, Alive}, 3, true, []string{"n0", "n1", "n2"}},
		{"one of three lost", []State{Alive, Alive, Dead}, 2, true, []string{"n0", "n1"}},
		{"isolated", []State{Alive, Dead, Dead}, 1, false, []string{"n0", "n1", "n2"}},
		{"even split", []State{Alive, Alive, Dead, Dead}, 2, false, []string{"n0", "n1", "n2", "n3"}},
		{"3 of 5", []State{Dead, Dead, Alive, Alive, Alive}, 3, true, []string{"n2", "n3", "n4"}},
		{"2 of 5", []State{Alive, Alive, Dead, Dead, Dead}, 2, false, []string{"n0", "n1", "n2", "n3", "n4"}},
		{"alone", []State{Alive}, 1, true, []string{"n0"}},
		{"self left", []State{Left, Alive, Alive}, 2, true, []string{"n1", "n2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := buildView(1, "n0", members(tc.states...))
			if v.Live != tc.live || v.Majority != tc.majority {
				t.Fatalf("live %d majority %v, want %d %v", v.Live, v.Majority, tc.live, tc.majority)
			}
			allowed := map[string]bool{}
			for _, n := range tc.ring {
				allowed[n] = true
				if !v.InRing(n) {
					t.Errorf("InRing(%s) false", n)
				}
			}
			seen := map[string]int{}
			for _, o := range owners(v, 3000) {
				if !allowed[o] {
					t.Fatalf("key owned by %s, outside ring %v", o, tc.ring)
				}
				seen[o]++
			}
			for _, n := range tc.ring {
				if seen[n] < 3000/len(tc.ring)/3 {
					t.Errorf("%s owns %d of 3000 keys: unbalanced %v", n, seen[n], seen)
				}
			}
		})
	}
}

// TestBuildViewMinorityKeepsOwners checks that a minority node maps every
// key exactly as the full healthy ring does, and that the majority side
// moves only the lost member's keys (mostly).
func TestBuildViewMinorityKeepsOwners(t *testing.T) {
	full := owners(buildView(1, "n0", members(Alive, Alive, Alive)), 2000)
	minority := owners(buildView(2, "n2", members(Dead, Dead, Alive)), 2000)
	for k, o := range full {
		if minority[k] != o {
			t.Fatalf("minority maps %s to %s, full ring to %s", k, minority[k], o)
		}
	}
	major := owners(buildView(2, "n0", members(Alive, Alive, Dead)), 2000)
	moved := 0
	for k, o := range full {
		if o != "n2" && major[k] != o {
			moved++
		}
	}
	if moved > 2000/10 {
		t.Errorf("%d keys of surviving members moved", moved)
	}
}

func TestViewLookups(t *testing.T) {
	v := buildView(3, "n1", members(Alive, Dead, Alive))
	if m, ok := v.Member("n1"); !ok || m.State != Dead {
		t.Fatalf("Member(n1) = %+v %v", m, ok)
	}
	if _, ok := v.Member("zz"); ok {
		t.Fatal("unknown member found")
	}
	var zero View
	if _, ok := zero.Owner("k"); ok {
		t.Fatal("zero view has an owner")
	}
	// Hash tags route every limit of a tenant to one owner.
	v5 := buildView(1, "n0", members(Alive, Alive, Alive, Alive, Alive))
	want, _ := v5.Owner(HashKey("api", "tenant:{acme}:a"))
	for i := range 50 {
		got, _ := v5.Owner(HashKey(fmt.Sprintf("limit-%d", i), fmt.Sprintf("t:{acme}:route-%d", i)))
		if got.Name != want.Name {
			t.Fatalf("limit-%d: {acme} owned by %s, want %s", i, got.Name, want.Name)
		}
	}
	// Without the tag, the same keys spread over members.
	spread := map[string]bool{}
	for i := range 50 {
		o, _ := v5.Owner(HashKey(fmt.Sprintf("limit-%d", i), "tenant:acme"))
		spread[o.Name] = true
	}
	if len(spread) < 3 {
		t.Fatalf("untagged keys of 50 limits landed on %d members", len(spread))
	}
}

func TestBuildViewLargeCluster(t *testing.T) {
	// More ring members than partitions: one partition each, no panic in
	// the bounded-load placement.
	states := make([]State, 30)
	v := buildViewN(1, "n0", members(states...), 11)
	if v.table.Partitions() != 30 {
		t.Fatalf("partitions %d", v.table.Partitions())
	}
	v.Owner("k")
}

func TestTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	meta := Meta{GRPCAddr: "10.0.0.2:8081", LimitsVersion: 2}
	tb := newTable("a", Meta{}, t0)
	steps := []struct {
		name    string
		do      func() bool
		changed bool
		want    string // name:state,... sorted
	}{
		{"b joins", func() bool {
			return tb.apply(event{kind: evJoin, name: "b", addr: "10.0.0.2:7946", meta: meta.appendTo(nil)}, at(0))
		}, true, "a:alive b:alive"},
		{"c joins", func() bool { return tb.apply(event{kind: evJoin, name: "c", addr: "10.0.0.3:7946"}, at(0)) }, true, "a:alive b:alive c:alive"},
		{"same join again", func() bool { return tb.apply(event{kind: evJoin, name: "c", addr: "10.0.0.3:7946"}, at(time.Second)) }, false, "a:alive b:alive c:alive"},
		{"c fails", func() bool {
			return tb.apply(event{kind: evLeave, name: "c", addr: "10.0.0.3:7946"}, at(2*time.Second))
		}, true, "a:alive b:alive c:dead"},
		{"not yet forgotten", func() bool { return tb.expire(at(2*time.Second+time.Minute-1), time.Minute) }, false, "a:alive b:alive c:dead"},
		{"forgotten after ForgetAfter", func() bool { return tb.expire(at(2*time.Second+time.Minute), time.Minute) }, true, "a:alive b:alive"},
		{"late leave of forgotten c ignored", func() bool { return tb.apply(event{kind: evLeave, name: "c"}, at(3*time.Minute)) }, false, "a:alive b:alive"},
		{"self dead is refuted, ignored", func() bool { return tb.apply(event{kind: evLeave, name: "a"}, at(3*time.Minute)) }, false, "a:alive b:alive"},
		{"b announces its leave", func() bool {
			return tb.apply(event{kind: evUpdate, name: "b", addr: "10.0.0.2:7946", meta: meta.appendFlags(nil, metaLeaving)}, at(4*time.Minute))
		}, false, "a:alive b:alive"},
		{"b leaves gracefully", func() bool {
			return tb.apply(event{kind: evLeave, name: "b", addr: "10.0.0.2:7946"}, at(4*time.Minute))
		}, true, "a:alive"},
	}
	for _, s := range steps {
		if got := s.do(); got != s.changed {
			t.Fatalf("%s: changed %v, want %v", s.name, got, s.changed)
		}
		got := ""
		for i, m := range tb.list() {
			if i > 0 {
				got += " "
			}
			got += m.Name + ":" + m.State.String()
		}
		if got != s.want {
			t.Fatalf("%s: members %q, want %q", s.name, got, s.want)
		}
	}
	if _, ok := tb.left["10.0.0.2:7946"]; !ok {
		t.Fatal("left address not recorded")
	}
	if got := tb.rejoinTargets([]string{"10.0.0.2:7946", "10.0.0.9:7946"}); len(got) != 1 || got[0] != "10.0.0.9:7946" {
		t.Fatalf("rejoin targets %v: a seed that left must be skipped", got)
	}
	tb.expire(at(4*time.Minute+time.Minute), time.Minute)
	if len(tb.left) != 0 {
		t.Fatal("left address kept past ForgetAfter")
	}
	// b comes back (restarted): known again, its address is dialable again.
	tb.apply(event{kind: evJoin, name: "b", addr: "10.0.0.2:7946"}, at(6*time.Minute))
	tb.apply(event{kind: evJoin, name: "d", addr: "10.0.0.4:7946"}, at(6*time.Minute))
	tb.apply(event{kind: evLeave, name: "d", addr: "10.0.0.4:7946"}, at(6*time.Minute))
	tb.members["a"].m.Addr = "10.0.0.1:7946"
	got := tb.rejoinTargets([]string{"10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.4:7946", "10.0.0.5:7946"})
	if fmt.Sprint(got) != "[10.0.0.4:7946 10.0.0.5:7946]" {
		t.Fatalf("rejoin targets %v: want the failed member then the unknown seed", got)
	}
	if tb.forget("b") || tb.forget("a") || tb.forget("zz") {
		t.Fatal("forgot a live member, self or an unknown one")
	}
	if !tb.forget("d") || tb.members["d"] != nil {
		t.Fatal("Forget of a dead member failed")
	}
	// Address and metadata changes are changes; an update revives.
	if !tb.apply(event{kind: evUpdate, name: "b", addr: "10.0.0.7:7946"}, at(7*time.Minute)) {
		t.Fatal("address change not reported")
	}
	if tb.apply(event{kind: evJoin, name: "e", meta: []byte{9}}, at(7*time.Minute)); tb.badMeta != 1 {
		t.Fatal("bad meta not counted")
	}
	if !tb.setSelfMeta(meta) || tb.setSelfMeta(meta) {
		t.Fatal("setSelfMeta change detection")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Name = "a"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	lc := LocalConfig()
	lc.Name = "a"
	if err := lc.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no name":         func(c *Config) { c.Name = "" },
		"port":            func(c *Config) { c.BindPort = 70000 },
		"adv port":        func(c *Config) { c.AdvertisePort = -1 },
		"no bind addr":    func(c *Config) { c.BindAddr = "" },
		"key size":        func(c *Config) { c.GossipKey = make([]byte, 31) },
		"forget":          func(c *Config) { c.ForgetAfter = 0 },
		"debounce":        func(c *Config) { c.RebuildDebounce = -1 },
		"rejoin":          func(c *Config) { c.RejoinInterval = 0 },
		"empty seed":      func(c *Config) { c.Join = []string{""} },
		"probe timeout":   func(c *Config) { c.Timing.ProbeTimeout = 2 * c.Timing.ProbeInterval },
		"probe interval":  func(c *Config) { c.Timing.ProbeInterval = 0 },
		"suspicion":       func(c *Config) { c.Timing.SuspicionMult = 0 },
		"suspicion max":   func(c *Config) { c.Timing.SuspicionMaxTimeoutMult = 0 },
		"indirect":        func(c *Config) { c.Timing.IndirectChecks = -1 },
		"retransmit":      func(c *Config) { c.Timing.RetransmitMult = 0 },
		"gossip interval": func(c *Config) { c.Timing.GossipInterval = 0 },
		"gossip nodes":    func(c *Config) { c.Timing.GossipNodes = 0 },
		"gossip dead":     func(c *Config) { c.Timing.GossipToTheDeadTime = -1 },
		"push pull":       func(c *Config) { c.Timing.PushPullInterval = -1 },
		"tcp timeout":     func(c *Config) { c.Timing.TCPTimeout = 0 },
		"reclaim":         func(c *Config) { c.Timing.DeadNodeReclaimTime = -1 },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
	if _, err := New(Config{}, Meta{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

func TestSplitSeed(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"10.0.0.1:7000", "10.0.0.1", "7000"},
		{"10.0.0.1", "10.0.0.1", "7946"},
		{"weir.svc", "weir.svc", "7946"},
		{"weir.svc:1", "weir.svc", "1"},
		{"::1", "::1", "7946"},
		{"[::1]:5", "::1", "5"},
	} {
		h, p, err := splitSeed(tc.in, 7946)
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("splitSeed(%q) = %q %q %v", tc.in, h, p, err)
		}
	}
}

func BenchmarkOwner(b *testing.B) {
	v := buildView(1, "n0", members(Alive, Alive, Alive, Alive, Alive))
	hk := HashKey("api", "tenant:acme:route:export")
	b.ReportAllocs()
	for b.Loop() {
		v.Owner(hk)
	}
}

func BenchmarkOwnerParallel(b *testing.B) {
	v := buildView(1, "n0", members(Alive, Alive, Alive, Alive, Alive))
	hk := HashKey("api", "tenant:acme:route:export")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			v.Owner(hk)
		}
	})
}

func BenchmarkBuildView(b *testing.B) {
	ms := members(Alive, Alive, Alive, Alive, Alive, Alive, Alive)
	b.ReportAllocs()
	for b.Loop() {
		buildView(1, "n0", ms)
	}
}

func TestResolveSeeds(t *testing.T) {
	cfg := LocalConfig()
	cfg.Name = "a"
	cfg.BindPort = 7946
	cfg.Join = []string{"10.0.0.1", "localhost:7000", "[::ffff:10.0.0.2]:5", "no-such-host.invalid"}
	r, err := New(cfg, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	got, all := r.resolveSeeds(t.Context())
	if all {
		t.Error("an unresolvable name reported as resolved")
	}
	want := map[string]bool{"10.0.0.1:7946": true, "127.0.0.1:7000": true, "10.0.0.2:5": true}
	for _, a := range got {
		if a == "[::1]:7000" {
			continue // localhost may also resolve to ::1
		}
		if !want[a] {
			t.Errorf("unexpected seed %s", a)
		}
		delete(want, a)
	}
	if len(want) != 0 {
		t.Errorf("seeds %v missing %v", got, want)
	}
}
