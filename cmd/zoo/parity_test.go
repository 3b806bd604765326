package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/variants"
)

func needORT(t *testing.T) {
	t.Helper()
	if _, err := ort.Open(); errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found: set %s or install it (%v)", ort.LibraryEnv, err)
	} else if err != nil {
		t.Fatal(err)
	}
}

func TestParityVariantAndFile(t *testing.T) {
	needORT(t)
	for _, args := range [][]string{
		{"parity", "vanilla.tiny"},
		{"parity", "--preset", "tiny", "vanilla", "--input", text},
		{"parity", "../../onnx/testdata/torch/enc_relu_op17.onnx", "--atol", "1e-5", "--rtol", "1e-5"},
	} {
		code, out, errs := zoo(t, args...)
		if code != 0 || !strings.Contains(out, "PASSED | All outputs matched") {
			t.Errorf("%v: exit %d, stderr %q\n%s", args, code, errs, out)
		}
	}
}

func TestParityJSONAndFailure(t *testing.T) {
	needORT(t)
	code, out, errs := zoo(t, "parity", "vanilla.tiny", "--json", "--atol", "0", "--rtol", "0")
	var rep parity.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Pass {
		t.Skip("bit-identical to ONNX Runtime at zero tolerance; nothing to fail")
	}
	if code != 1 || !strings.Contains(errs, "differs from ONNX Runtime") || len(rep.Outputs) != 2 || rep.Outputs[0].MinAtol <= 0 {
		t.Errorf("exit %d, stderr %q, report %+v", code, errs, rep)
	}
}

func TestParityBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"parity"},
		{"parity", "missing.onnx"},
		{"parity", "vanilla.tiny", "--atol", "-1"},
		{"parity", "../../onnx/testdata/torch/enc_relu_op17.onnx", "--input", text},
	} {
		if code, _, errs := zoo(t, args...); code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errs)
		}
	}
}

// TestParityEveryBuiltin checks every built-in variant's export against ONNX Runtime: tiny
// presets at atol 1e-5, base presets at 1e-4, layer by layer.
func TestParityEveryBuiltin(t *testing.T) {
	needORT(t)
	for name := range variants.Builtin() {
		for _, c := range []struct{ preset, atol string }{{"tiny", "1e-5"}, {"base", "1e-4"}} {
			if testing.Short() && c.preset == "base" {
				continue
			}
			t.Run(name+"."+c.preset, func(t *testing.T) {
				code, out, errs := zoo(t, "parity", name, "--preset", c.preset, "--layers", "--atol", c.atol, "--rtol", "0")
				if code != 0 || !strings.Contains(out, "every layer matches") {
					t.Errorf("exit %d, stderr %q\n%s", code, errs, out)
				}
			})
		}
	}
}

func TestParityLayersNamesFirstDivergence(t *testing.T) {
	needORT(t)
	code, out, errs := zoo(t, "parity", "vanilla.tiny", "--layers", "--atol", "0", "--rtol", "0")
	if code != 1 || !strings.Contains(errs, "first diverges from ONNX Runtime at layers.0") || !strings.Contains(out, "first divergent layer: layers.0") {
		t.Errorf("exit %d, stderr %q\n%s", code, errs, out)
	}
}
