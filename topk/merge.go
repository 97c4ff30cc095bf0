package topk

// Summary is a sketch's heaviest keys, as sent from one part of a stream to
// whoever merges the parts.
type Summary struct {
	// Entries are the reported keys, heaviest first.
	Entries []Entry
	// Floor bounds the weight, in this part, of every key not in Entries.
	Floor int64
}

// Merge combines summaries of disjoint parts of one stream (one per node,
// say) and returns the n heaviest keys (all for n < 1). A key missing from
// a part may still have weight there, up to that part's Floor, so it is
// counted as Floor with Floor as error. The bounds of Entry hold for the
// merged answer: Count-Err ≤ true ≤ Count for the whole stream, and Denied
// is a lower bound.
func Merge(parts []Summary, n int) []Entry {
	byKey := map[string]*Entry{}
	var order []string
	var floors int64
	for _, p := range parts {
		floors += p.Floor
		for _, e := range p.Entries {
			a, ok := byKey[e.Key]
			if !ok {
				a = &Entry{Key: e.Key}
				byKey[e.Key] = a
				order = append(order, e.Key)
			}
			// The parts that do not report the key are added below as the
			// sum of their floors: all floors minus those of the parts that
			// do report it.
			a.Count += e.Count - p.Floor
			a.Err += e.Err - p.Floor
			a.Denied += e.Denied
		}
	}
	out := make([]Entry, 0, len(order))
	for _, k := range order {
		e := *byKey[k]
		e.Count += floors
		e.Err += floors
		out = append(out, e)
	}
	sortEntries(out)
	if n > 0 && n < len(out) {
		out = out[:n]
	}
	return out
}
