package main

import (
	"os/exec"
	"slices"
	"strings"
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

// TestLinksOnlyTheSDK checks, as `go list -deps` shows a plugin author, that the plugin binary
// links zoo's SDK and building blocks only: no backend, no in-tree variant, no CLI.
func TestLinksOnlyTheSDK(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const zoo = "github.com/zoo-dev/zoo/"
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, zoo)
		if !ok {
			continue
		}
		linked = append(linked, rel)
		for _, never := range []string{"backends", "variants", "cmd"} {
			if rel == never || strings.HasPrefix(rel, never+"/") {
				t.Errorf("the plugin links %s: a plugin needs only zoo/... and plugin", rel)
			}
		}
	}
	if !slices.Contains(linked, "plugin") || !slices.Contains(linked, "zoo/nn") {
		t.Errorf("go list -deps shows %v, want plugin and zoo/nn among them", linked)
	}
}
