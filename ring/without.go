package ring

// Without returns the view this one would be if member name were gone:
// the owners the other members compute once name has left. A member uses
// it on itself to hand its keys over before leaving, and a new owner uses
// it to find the member that owned a key before it joined. The result is
// not published; its Self is unchanged even when name is Self.
func (v *View) Without(name string) *View {
	members := make([]Member, 0, len(v.Members))
	for _, m := range v.Members {
		if m.Name != name {
			members = append(members, m)
		}
	}
	w := buildView(v.Epoch, v.Self, members)
	if name == v.Self && w.Live > 0 {
		// buildView counted live members as seen by self; without self the
		// majority is decided among the rest.
		w.Majority = 2*w.Live > len(members)
	}
	return w
}
