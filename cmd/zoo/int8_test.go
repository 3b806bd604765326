package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/paritycheck"
	"github.com/zoo-dev/zoo/onnx/ort"
)

// TestInt8ExportRunsOnORT writes vanilla.tiny's int8 export with one zoo process and compares
// it with another (zoo parity FILE: ONNX Runtime runs the file, zoo imports it onto its int8
// kernels), then checks zoo parity --precision int8's report against fp32 and ONNX Runtime.
func TestInt8ExportRunsOnORT(t *testing.T) {
	if _, err := ort.Open(); err != nil {
		t.Skipf("ONNX Runtime not found: %v", err)
	}
	file := filepath.Join(t.TempDir(), "v8.onnx")
	code, out, errs := zooProcess(t, "export", "vanilla.tiny", "--onnx", "--precision", "int8", "-o", file, "--json")
	var written struct {
		Written []struct{ Precision string } `json:"written"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &written) != nil || len(written.Written) != 1 || written.Written[0].Precision != "int8" {
		t.Fatalf("export: exit %d, stderr %q, stdout %s", code, errs, out)
	}
	code, out, errs = zooProcess(t, "parity", file, "--json")
	var rep struct {
		Pass    bool
		Outputs []struct {
			Name   string
			MaxAbs float64 `json:"max_abs"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Pass {
		t.Fatalf("parity of the int8 export against ONNX Runtime: exit %d, stderr %q\n%s", code, errs, out)
	}
	t.Logf("zoo against ONNX Runtime on the int8 export: %+v (%s)", rep.Outputs, paritycheck.ORTMachine())

	code, out, errs = zooProcess(t, "parity", "vanilla.tiny", "--precision", "int8", "--json")
	var pr paritycheck.PrecisionReport
	if code != 0 || json.Unmarshal([]byte(out), &pr) != nil {
		t.Fatalf("parity --precision int8: exit %d, stderr %q\n%s", code, errs, out)
	}
	if pr.Precision != "int8" || pr.Int8Path == "" || pr.MinCosine < 0.99 {
		t.Errorf("int8 against fp32: precision %q, path %q, min cosine %g; want int8, a path, ≥ 0.99", pr.Precision, pr.Int8Path, pr.MinCosine)
	}
	if pr.ORT == nil || pr.ORT.Machine == "" || pr.ORT.MinCosine < 0.9999 || pr.ORT.Positions != 77 {
		t.Errorf("int8 against ONNX Runtime: %+v, note %q; want 77 positions, cosine ≥ 0.9999 and the machine case", pr.ORT, pr.ORTNote)
	}
}

// TestInt8Refusals: training refuses int8 in one line; export takes int8 only for the ONNX
// file and writes no bf16 file.
func TestInt8Refusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "vanilla.tiny", "-i", text, "-o", filepath.Join(dir, "m.safetensors"), "--precision", "int8"}, "--precision int8: training stays fp32"},
		{[]string{"export", "vanilla.tiny", "--weights", filepath.Join(dir, "w.safetensors"), "--precision", "int8"}, "--precision int8 applies to the ONNX file"},
		{[]string{"export", "vanilla.tiny", "--onnx", "-o", filepath.Join(dir, "m.onnx"), "--precision", "bf16"}, "export writes fp32 or int8 files"},
	} {
		code, stdout, errs := zoo(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || stdout != "" {
			t.Errorf("zoo %s: exit %d, stdout %q, stderr %q; want exit 2 naming %q", strings.Join(c.args, " "), code, stdout, errs, c.want)
		}
		oneLineErr(t, c.args[0], errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused commands wrote %v", entries)
	}
}
