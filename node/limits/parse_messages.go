package limits

import (
	"strconv"
	"strings"

	"github.com/weir-rl/weir/internal/textdist"
)

// clip shortens a value quoted in a message.
func clip(s string) string {
	const n = 48
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, s := range names {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// suggest returns the known name closest to s when it is a likely typo.
func suggest(s string, known []string) string {
	if len(s) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := textdist.Levenshtein(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
