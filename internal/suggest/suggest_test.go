package suggest

import "testing"

func TestClosest(t *testing.T) {
	cands := []string{"list", "show", "run", "export", "new", "heads", "ZOO_THREADS"}
	for _, c := range []struct{ name, want string }{
		{"lsit", "list"},     // adjacent swap: one edit
		{"nwe", "new"},       // adjacent swap in a short name
		{"expotr", "export"}, // swap at the end
		{"head", "heads"},    // deletion
		{"ZOO_THRADS", "ZOO_THREADS"},
		{"frobnicate", ""}, // nothing close
		{"xy", ""},
	} {
		if got := Closest(c.name, cands); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := DidYouMean("lsit", cands); got != ` (did you mean "list"?)` {
		t.Errorf("DidYouMean = %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"abc", "abc", 0}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}} {
		if got := distance(c.a, c.b); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
