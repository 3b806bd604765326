package backends

import (
	"slices"
	"testing"
)

func TestLastUses(t *testing.T) {
	// slot 0: input read by steps 0 and 2; 1: made by 0, read by 1; 2: made by 1, unread;
	// 3: untouched; 4: made by 2 (the output).
	steps := [][2][]int{{{0}, {1}}, {{1, -1}, {2}}, {{0}, {4}}}
	got := LastUses(5, len(steps), func(i int) ([]int, []int) { return steps[i][0], steps[i][1] })
	if want := []int{2, 1, 1, -1, 2}; !slices.Equal(got, want) {
		t.Fatalf("LastUses = %v, want %v", got, want)
	}
}
