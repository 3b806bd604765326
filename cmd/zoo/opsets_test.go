package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/variants"
)

// TestExportEveryOpsetParity exports every built-in variant (tiny preset) at every opset
// zoo writes, runs `zoo parity` on each file (ONNX Runtime against zoo's CPU backend) and,
// up to opset 17, Debian's onnx 1.12 checker (full_check). It skips the ONNX Runtime part
// when the library is not found and the checker when python3-onnx is missing.
func TestExportEveryOpsetParity(t *testing.T) {
	needORT(t)
	checker := exec.Command("/usr/bin/python3", "-c", "import onnx").Run() == nil
	names := make([]string, 0, len(variants.Builtin()))
	for name := range variants.Builtin() {
		names = append(names, name)
	}
	sort.Strings(names)
	dir := t.TempDir()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var checked []string
			for opset := onnx.MinOpset; opset <= onnx.MaxOpset; opset++ {
				path := filepath.Join(dir, fmt.Sprintf("%s_op%d.onnx", name, opset))
				if code, _, errs := zoo(t, "export", name, "--preset", "tiny", "--onnx", "--opset", fmt.Sprint(opset), "-o", path); code != 0 {
					t.Errorf("opset %d: export: exit %d: %s", opset, code, errs)
					continue
				}
				if code, out, errs := zoo(t, "parity", path); code != 0 || !strings.Contains(out, "PASSED | All outputs matched") {
					t.Errorf("opset %d: parity: exit %d, stderr %q\n%s", opset, code, errs, out)
				}
				if want := standardAt23[name]; opset == onnx.MaxOpset && len(want) > 0 {
					ops, meta := fileOps(t, path)
					for _, op := range want {
						if !ops[op] || !strings.Contains(meta[onnx.MetaStandard], op) {
							t.Errorf("opset %d: no standard %s node (ops %v, metadata %q)", opset, op, ops, meta[onnx.MetaStandard])
						}
					}
				}
				if checker && opset <= 17 {
					checked = append(checked, path)
				}
			}
			if len(checked) == 0 {
				return
			}
			args := append([]string{"-c", "import onnx, sys\nfor p in sys.argv[1:]: onnx.checker.check_model(onnx.load(p), full_check=True)"}, checked...)
			if out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput(); err != nil {
				t.Errorf("onnx checker rejects an export: %v\n%s", err, out)
			}
		})
	}
}

// standardAt23 lists, per variant, the standard ops its opset-23 export must use where the
// variant's math is exactly theirs.
var standardAt23 = map[string][]string{
	"vanilla": {"Attention", "LayerNormalization"},
	"gqa":     {"Attention"},
	"rope":    {"Attention", "RotaryEmbedding"},
}

// fileOps returns the op types and metadata of an ONNX file.
func fileOps(t *testing.T, path string) (map[string]bool, map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	ops, meta := map[string]bool{}, map[string]string{}
	for _, n := range m.GetGraph().GetNode() {
		ops[n.GetOpType()] = true
	}
	for _, kv := range m.GetMetadataProps() {
		meta[kv.GetKey()] = kv.GetValue()
	}
	return ops, meta
}

// TestParityTorchFixturesEveryOpset runs `zoo parity` (ONNX Runtime against zoo's CPU
// backend, atol and rtol 1e-5) on PyTorch 1.13's exports at opsets 11 to 17 and on their
// rewrites at 18 to 23 (onnx/testdata/gen_fixtures.py, gen_upconverted.py).
func TestParityTorchFixturesEveryOpset(t *testing.T) {
	needORT(t)
	var paths []string
	for _, glob := range []string{"../../onnx/testdata/torch/*.onnx", "../../onnx/testdata/torch_up/*.onnx"} {
		ps, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, ps...)
	}
	if len(paths) != 26 {
		t.Fatalf("found %d fixtures, want 14 PyTorch exports and 12 rewrites", len(paths))
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".onnx"), func(t *testing.T) {
			if code, out, errs := zoo(t, "parity", p, "--atol", "1e-5", "--rtol", "1e-5"); code != 0 || !strings.Contains(out, "PASSED | All outputs matched") {
				t.Errorf("exit %d, stderr %q\n%s", code, errs, out)
			}
		})
	}
}

// TestExportRopeInterleavedAt23 checks the interleaved rope layout too becomes RotaryEmbedding
// at opset 23 and passes parity on ONNX Runtime.
func TestExportRopeInterleavedAt23(t *testing.T) {
	needORT(t)
	path := filepath.Join(t.TempDir(), "rope.onnx")
	if code, _, errs := zoo(t, "export", "rope", "--preset", "tiny", "--set", "rope_layout=interleaved", "--onnx", "--opset", "23", "-o", path); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	if ops, meta := fileOps(t, path); !ops["RotaryEmbedding"] || !strings.Contains(meta[onnx.MetaStandard], "RotaryEmbedding") {
		t.Errorf("no standard RotaryEmbedding node: ops %v, metadata %q", ops, meta[onnx.MetaStandard])
	}
	if code, out, errs := zoo(t, "parity", path); code != 0 || !strings.Contains(out, "PASSED | All outputs matched") {
		t.Errorf("parity: exit %d, stderr %q\n%s", code, errs, out)
	}
}
