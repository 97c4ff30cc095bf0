package ring

import "testing"

func TestCommonVersion(t *testing.T) {
	m := func(s State, lo, hi uint32) Member {
		return Member{State: s, Meta: Meta{Protocol: Versions{Min: lo, Max: hi}}}
	}
	for _, tc := range []struct {
		name string
		ms   []Member
		want uint32
	}{
		{"none", nil, 1},
		{"unadvertised speaks v1", []Member{m(Alive, 0, 0), m(Alive, 1, 3)}, 1},
		{"all speak 3", []Member{m(Alive, 1, 3), m(Suspect, 2, 3)}, 3},
		{"mid-upgrade: old max wins", []Member{m(Alive, 1, 2), m(Alive, 2, 3), m(Alive, 2, 3)}, 2},
		{"failed members do not hold it back", []Member{m(Alive, 2, 3), m(Dead, 1, 1), m(Left, 1, 1)}, 3},
		{"nothing in common", []Member{m(Alive, 1, 1), m(Alive, 3, 4)}, 0},
		{"max below min reads as min", []Member{m(Alive, 2, 1)}, 2},
	} {
		if got := CommonVersion(tc.ms); got != tc.want {
			t.Errorf("%s: CommonVersion = %d, want %d", tc.name, got, tc.want)
		}
	}
	if !(Versions{}).Speaks(1) || (Versions{}).Speaks(2) {
		t.Error("zero Versions must speak exactly version 1")
	}
}
