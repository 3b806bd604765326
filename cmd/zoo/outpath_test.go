package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An existing read-only output file is neither replaced nor touched by run, whatever the
// format, and the refusal comes before any work.
func TestRunKeepsReadOnlyOutput(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"out.json", "out.npy", "out.safetensors"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("keep"), 0o444); err != nil {
			t.Fatal(err)
		}
		code, out, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "--output", p)
		if code != 2 || out != "" || !strings.Contains(errs, "read-only") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and one line saying read-only", name, code, out, errs)
		}
		if b, _ := os.ReadFile(p); string(b) != "keep" {
			t.Errorf("%s was replaced: %q", name, b)
		}
	}
}
