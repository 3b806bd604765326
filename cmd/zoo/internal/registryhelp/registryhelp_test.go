package registryhelp

import (
	"strings"
	"testing"
)

// TestWrite: the topic states the trust model with the values the enforcing packages hold
// (no %!verb left by a missing argument).
func TestWrite(t *testing.T) {
	var b strings.Builder
	if err := Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A registry is code", "a relative path is resolved", "sha256:", "[unpinned]",
		"--require-pinned", "ZOO_REQUIRE_PINNED=1", "setsid", "past 4 nodes a byte"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "%!") {
		t.Errorf("a verb without its value:\n%s", b.String())
	}
}
