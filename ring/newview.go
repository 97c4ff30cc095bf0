package ring

import (
	"slices"
	"strings"
)

// NewView computes the view that member self publishes when it knows
// members in the states given. It is a pure function: two callers with
// equal inputs get equal owners. Members are copied and sorted by name;
// self must be among them. Package ring/gossip builds every view it
// publishes with it; tests and tools use it to get views without running
// gossip (node/placement's step tables).
func NewView(epoch uint64, self string, members []Member) *View {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return buildView(epoch, self, ms)
}
