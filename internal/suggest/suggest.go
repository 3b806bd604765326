// Package suggest finds the closest known name to a mistyped one, for "did you mean" hints.
package suggest

import "fmt"

// Closest returns the candidate with the smallest edit distance to name, if that distance is
// at most a third of name's length (at least 1 and at most 3); otherwise it returns "".
func Closest(name string, candidates []string) string {
	limit := len(name) / 3
	if limit < 1 {
		limit = 1
	}
	if limit > 3 {
		limit = 3
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean returns ` (did you mean "x"?)` for the closest candidate, or "".
func DidYouMean(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// distance is the Levenshtein distance over bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
