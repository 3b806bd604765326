package vec

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// TestGeneratedUpToDate guards against hand edits of, or a forgotten go generate for, the
// committed assembly: vec_amd64.s must be exactly what internal/asmgen.py prints. The
// generator is a Python script; without python3 the test skips.
func TestGeneratedUpToDate(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	want, err := exec.Command(py, "internal/asmgen.py").Output()
	if err != nil {
		t.Fatalf("run internal/asmgen.py: %v", err)
	}
	got, err := os.ReadFile("vec_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("vec_amd64.s is stale: run go generate ./backends/cpu/vec")
	}
}
