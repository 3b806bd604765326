package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/paritycheck"
)

// bf16Path returns this machine's bf16 path at the best kernel level ("" when it has none),
// whatever ZOO_CPU an earlier test ran zoo under (the level stays applied until the next run).
func bf16Path(t *testing.T) (path, reason string) {
	t.Helper()
	setZooCPU(t, "")
	if err := cpu.ApplyEnv(); err != nil {
		t.Fatal(err)
	}
	return gemm.BF16Path()
}

// setZooCPU sets ZOO_CPU for the test (zoo applies it at each run) and, once the test has
// restored it, applies the restored value, so that later tests run at the level they expect.
func setZooCPU(t *testing.T, level string) {
	t.Helper()
	t.Cleanup(func() { _ = cpu.ApplyEnv() }) // runs after t.Setenv's restore (cleanups are LIFO)
	t.Setenv("ZOO_CPU", level)
}

// needBF16 skips a test that computes in bf16 on a CPU without a bf16 path.
func needBF16(t *testing.T) string {
	t.Helper()
	path, why := bf16Path(t)
	if path == "" {
		t.Skipf("this CPU has no bf16 path (gemm.BF16Path: %s)", why)
	}
	return path
}

// withoutBF16 arranges for the CPU backend to have no bf16 path: ZOO_CPU=avx2 on a CPU that
// has one (its kernels need avx512), nothing on a CPU that lacks one. It skips when neither
// holds (an AVX512-BF16 CPU in a build without avx2).
func withoutBF16(t *testing.T) {
	t.Helper()
	if path, _ := bf16Path(t); path == "" {
		return
	}
	if !slices.Contains(cpu.Levels(), "avx2") {
		t.Skip("this CPU has a bf16 path and no avx2 level to turn it off with ZOO_CPU")
	}
	setZooCPU(t, "avx2")
}

// TestPrecisionFlag refuses a bad --precision on every verb that has it, with one line and
// exit 2 before any model is run, and the flags of the ONNX Runtime check with parity's bf16.
func TestPrecisionFlag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	const bad = `--precision "fp16": want fp32 or bf16 or int8 or int8-attention`
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"run", []string{"run", "vanilla.tiny", "-i", text, "--precision", "fp16"}, bad},
		{"run arrays", []string{"run", "testdata/floatin/vit.onnx", "-i", "testdata/floatin/vit-pixels.npy", "--precision", "fp16"}, bad},
		{"bench", []string{"bench", "vanilla.tiny", "--precision", "fp16"}, bad},
		{"parity", []string{"parity", "vanilla.tiny", "--precision", "fp16"}, bad},
		{"train", []string{"train", "vanilla.tiny", "-i", text, "-o", out, "--precision", "fp16"}, bad},
		{"serve", []string{"serve", "vanilla.tiny", "--precision", "fp16"}, bad},
		{"eval", []string{"eval", "vanilla.tiny", "-i", text, "--precision", "fp16"}, bad},
		{"profile", []string{"profile", "vanilla.tiny", "--precision", "fp16"}, bad},
		{"profile train", []string{"profile", "vanilla.tiny", "--train", "--precision", "fp16"}, bad},
		{"empty", []string{"run", "vanilla.tiny", "-i", text, "--precision", ""}, `--precision "": want fp32 or bf16 or int8 or int8-attention`},
		{"tf32 is cuda's env only", []string{"bench", "vanilla.tiny", "--precision=tf32"}, `--precision "tf32"`},
		{"parity bf16 --atol", []string{"parity", "vanilla.tiny", "--precision", "bf16", "--atol", "1e-3"}, "--atol belongs to the check against ONNX Runtime"},
		{"parity bf16 --layers", []string{"parity", "vanilla.tiny", "--precision", "bf16", "--layers"}, "drop --layers"},
		{"not a verb's flag", []string{"show", "vanilla.tiny", "--precision", "bf16"}, "precision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, errs := zoo(t, c.args...)
			if code != 2 || !strings.Contains(errs, c.want) {
				t.Errorf("zoo %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(c.args, " "), code, errs, c.want)
			}
			if !strings.Contains(errs, "USAGE") {
				oneLineErr(t, c.name, errs)
			}
			if c.name != "not a verb's flag" && stdout != "" {
				t.Errorf("stdout %q: want nothing before the refusal", stdout)
			}
		})
	}
}

// TestPrecisionRefusedWithoutBF16 asks for bf16 where the CPU backend has no bf16 path: every
// verb refuses in one line naming the reason, exit 2, before compiling anything.
func TestPrecisionRefusedWithoutBF16(t *testing.T) {
	withoutBF16(t)
	out := filepath.Join(t.TempDir(), "m.safetensors")
	for _, args := range [][]string{
		{"run", "vanilla.tiny", "-i", text},
		{"bench", "vanilla.tiny", "--seq", "16", "--reps", "1"},
		{"parity", "vanilla.tiny"},
		{"parity", "vanilla.tiny", "--json"},
		{"train", "vanilla.tiny", "-i", text, "-o", out, "--steps", "1", "--window", "16", "--batch", "1"},
		{"serve", "vanilla.tiny", "--addr", "127.0.0.1:0", "--grpc-addr", "off"},
		{"eval", "vanilla.tiny", "-i", text},
		{"profile", "vanilla.tiny", "--seq", "16"},
		{"profile", "vanilla.tiny", "--seq", "16", "--train"},
	} {
		args = append(args, "--precision", "bf16")
		code, stdout, errs := zoo(t, args...)
		what := "zoo " + strings.Join(args, " ")
		if code == 0 || !strings.Contains(errs, "--precision bf16: backend cpu has no bf16 path on this machine: ") {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming the reason", what, code, errs)
		}
		oneLineErr(t, what, errs)
		if stdout != "" {
			t.Errorf("%s: stdout %q, want nothing", what, stdout)
		}
	}
}

// TestBackendsBF16 checks that zoo backends names each backend's bf16 path, or why it has
// none, in its table and in its JSON (bf16, bf16_reason: always present).
func TestBackendsBF16(t *testing.T) {
	path, _ := bf16Path(t)
	cases := []struct {
		name, zooCPU string
		wantPath     string // the cpu row's bf16
		wantReason   string // in the cpu row's bf16_reason
	}{
		{name: "best level", wantPath: path},
	}
	if path != "" && slices.Contains(cpu.Levels(), "avx2") {
		cases = append(cases, struct {
			name, zooCPU string
			wantPath     string
			wantReason   string
		}{"ZOO_CPU=avx2", "avx2", "", "ZOO_CPU"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setZooCPU(t, c.zooCPU)
			code, out, errs := zoo(t, "backends", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rows []map[string]any
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			for _, r := range rows {
				p, okP := r["bf16"].(string)
				why, okW := r["bf16_reason"].(string)
				if !okP || !okW {
					t.Errorf("row %v: want string fields bf16 and bf16_reason", r)
				}
				if p == "" && why == "" {
					t.Errorf("row %v: no bf16 path and no reason", r)
				}
				if r["name"] != "cpu" {
					continue
				}
				if p != c.wantPath || (p == "") != (why != "") || !strings.Contains(why, c.wantReason) {
					t.Errorf("cpu row: bf16 %q, bf16_reason %q; want %q and a reason naming %q exactly when it is empty", p, why, c.wantPath, c.wantReason)
				}
			}
			_, text, _ := zoo(t, "backends")
			wantCell := "none ("
			if c.wantPath != "" {
				wantCell = c.wantPath
			}
			if !strings.Contains(text, "BF16") || !strings.Contains(text, wantCell) {
				t.Errorf("table lacks the BF16 column or %q:\n%s", wantCell, text)
			}
		})
	}
}

// TestParityPrecision runs zoo parity --precision bf16 on the sample text (3 windows of 37,
// 29 and 11 tokens: 77 positions) and checks the report's keys and ranges, which hold
// whether the bf16 products differ from fp32 or not.
func TestParityPrecision(t *testing.T) {
	path := needBF16(t)
	code, out, errs := zoo(t, "parity", "vanilla.tiny", "--precision", "bf16", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"precision", "max_rel_error", "mean_rel_error", "min_cosine", "mean_cosine", "cosine"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report lacks %q:\n%s", k, out)
		}
	}
	var rep paritycheck.PrecisionReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	const positions, eps = 37 + 29 + 11, 1e-6
	switch {
	case rep.Precision != "bf16" || rep.Reference != "fp32" || rep.BF16Path != path || rep.Output != "hidden":
		t.Errorf("precision %q against %q on %q, path %q; want bf16 against fp32 on hidden, path %q", rep.Precision, rep.Reference, rep.Output, rep.BF16Path, path)
	case rep.Positions != positions || len(rep.Cosine) != positions:
		t.Errorf("%d positions, %d cosines; want %d of each", rep.Positions, len(rep.Cosine), positions)
	case !(0 <= rep.MeanRel && rep.MeanRel <= rep.MaxRel) || math.IsInf(rep.MaxRel, 0) || rep.MaxRel > 0.5:
		t.Errorf("relative errors mean %g, max %g: want 0 ≤ mean ≤ max ≤ 0.5", rep.MeanRel, rep.MaxRel)
	case !(0.9 < rep.MinCosine && rep.MinCosine <= rep.MeanCosine+eps && rep.MeanCosine <= 1+eps):
		t.Errorf("cosines min %g, mean %g: want 0.9 < min ≤ mean ≤ 1", rep.MinCosine, rep.MeanCosine)
	}
	for i, c := range rep.Cosine {
		if c < rep.MinCosine-eps || c > 1+eps {
			t.Errorf("cosine[%d] = %g outside [min %g, 1]", i, c, rep.MinCosine)
		}
	}
	code, out, errs = zoo(t, "parity", "vanilla.tiny", "--precision", "bf16")
	if code != 0 || errs != "" {
		t.Fatalf("text report: exit %d, stderr %q", code, errs)
	}
	for _, w := range []string{"bf16 against fp32 on vanilla.tiny", "bf16 path " + path, "77 valid positions", "relative error  max ", "cosine          min "} {
		if !strings.Contains(out, w) {
			t.Errorf("text report lacks %q:\n%s", w, out)
		}
	}
}

// TestRunBenchPrecision checks the precision field of zoo run's and zoo bench's reports:
// fp32 by default, bf16 when asked (where the CPU has a bf16 path).
func TestRunBenchPrecision(t *testing.T) {
	path, _ := bf16Path(t)
	for _, p := range []string{"", "fp32", "bf16"} {
		want := p
		if p == "" {
			want = "fp32"
		}
		t.Run(want+"/"+p, func(t *testing.T) {
			if p == "bf16" && path == "" {
				t.Skip("this CPU has no bf16 path")
			}
			var flags []string
			if p != "" {
				flags = []string{"--precision", p}
			}
			code, out, errs := zoo(t, append([]string{"run", "vanilla.tiny", "-i", text, "--json"}, flags...)...)
			var rep map[string]any
			if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep["precision"] != want {
				t.Errorf("run --json: exit %d, stderr %q, precision %v; want %q", code, errs, rep["precision"], want)
			}
			if _, out, _ := zoo(t, append([]string{"run", "vanilla.tiny", "-i", text}, flags...)...); !strings.Contains(out, "\nprecision "+want+"\n") {
				t.Errorf("run report lacks the precision line:\n%s", out)
			}
			code, out, errs = zoo(t, append([]string{"bench", "vanilla.tiny", "--seq", "16", "--reps", "1", "--warmup", "0", "--json"}, flags...)...)
			var doc bench.Doc
			if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Rows) != 1 || len(doc.Machine.Backends) != 1 {
				t.Fatalf("bench --json: exit %d, stderr %q\n%s", code, errs, out)
			}
			if doc.Rows[0].Precision != want || doc.Machine.Backends[0].Precision != want {
				t.Errorf("bench --json: row precision %q, backend precision %q; want %q", doc.Rows[0].Precision, doc.Machine.Backends[0].Precision, want)
			}
		})
	}
}
