package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zoo-dev/zoo/variants"
)

// TestExportPassesONNXChecker runs Debian's onnx 1.12 checker (full_check, with shape
// inference) on every built-in variant's export. It skips when python3-onnx is missing.
func TestExportPassesONNXChecker(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import onnx").Run(); err != nil {
		t.Skip("Debian's python3-onnx is not installed (apt-get install python3-onnx)")
	}
	dir := t.TempDir()
	for name := range variants.Builtin() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".onnx")
			if code, _, errs := zoo(t, "export", name, "--preset", "tiny", "--onnx", "-o", path); code != 0 {
				t.Fatalf("export: exit %d: %s", code, errs)
			}
			out, err := exec.Command("/usr/bin/python3", "-c",
				"import onnx, sys; m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True); assert m.ir_version == 8",
				path).CombinedOutput()
			if err != nil {
				t.Errorf("onnx checker rejects %s: %v\n%s", name, err, out)
			}
		})
	}
}
