package ring

// Without returns the view this one would be if member name were gone:
// the owners the other members compute once name has left. A member uses
// it on itself to hand its keys over before leaving, and a new owner uses
// it to find the member that owned a key before it joined. The majority
// decision of v is kept, so on a majority side the ring is still built
// from live members only (a dead member never comes back as an owner just
// because the member count changed). The result is not published; its
// Self is unchanged even when name is Self.
func (v *View) Without(name string) *View {
	members := make([]Member, 0, len(v.Members))
	for _, m := range v.Members {
		if m.Name != name {
			members = append(members, m)
		}
	}
	return buildViewMajority(v.Epoch, v.Self, members, partitionCount, v.Majority)
}
