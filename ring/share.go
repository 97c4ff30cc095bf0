package ring

// Share returns the fraction of the ring's partitions the named member
// owns in this view, in [0, 1]; 0 for a member outside the ring or a View
// with no ring.
func (v *View) Share(name string) float64 {
	if len(v.owners) == 0 {
		return 0
	}
	owned := 0
	for _, i := range v.owners {
		if v.Members[i].Name == name {
			owned++
		}
	}
	return float64(owned) / float64(len(v.owners))
}
