package main

import (
	"testing"

	"github.com/zoo-dev/zoo/plugin/conformance"
)

// TestConformance runs zoo's plugin conformance kit on the variant, served in this process
// through the real plugin gRPC server. `zoo plugin test ./talkingheads` runs the same checks on
// the built executable.
func TestConformance(t *testing.T) {
	r := conformance.RunVariant(TalkingHeads{}, conformance.Options{})
	t.Logf("\n%s", r)
	if !r.OK() {
		t.Fatal("the variant does not conform")
	}
}
