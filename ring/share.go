package ring

// Share returns the fraction of the ring's partitions the named member
// owns in this view, in [0, 1]; 0 for a member outside the ring or a View
// with no ring.
func (v *View) Share(name string) float64 {
	n := v.table.Partitions()
	if n == 0 {
		return 0
	}
	members := v.table.Members()
	owned := 0
	for _, o := range v.table.Owners() {
		if members[o] == name {
			owned++
		}
	}
	return float64(owned) / float64(n)
}
