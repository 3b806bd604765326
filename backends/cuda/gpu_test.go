package cuda_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cuda"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// GPUTestsEnv gates the end-to-end GPU checks (they need a device and take minutes); set to
// 1, it also turns a missing device into a failure rather than a skip.
const GPUTestsEnv = "ZOO_GPU_TESTS"

func needGPU(t testing.TB) {
	t.Helper()
	if os.Getenv(GPUTestsEnv) != "1" {
		t.Skipf("set %s=1 to run the end-to-end GPU checks", GPUTestsEnv)
	}
	if p := (cuda.Backend{}).Probe(); !p.Available {
		t.Fatalf("%s=1 but no usable CUDA device: %s", GPUTestsEnv, p.Reason)
	}
}

// loadRegistry reads registry.yaml ($ZOO_REGISTRY, else the repository's).
func loadRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	path := os.Getenv("ZOO_REGISTRY")
	if path == "" {
		path = filepath.Join("..", "..", "registry.yaml")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read registry: %v", err)
	}
	r, err := registry.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// buildVariant builds variant name at preset with seed 1.
func buildVariant(t testing.TB, reg *registry.Registry, name, preset string) *graph.Graph {
	t.Helper()
	v, ok := variants.Builtin()[name]
	if !ok {
		t.Fatalf("no builtin variant %s", name)
	}
	var layers []map[string]any
	for _, e := range reg.Entries() {
		if e.Name == name {
			layers = append(layers, e.Defaults)
			if p, ok := e.Presets[preset]; ok {
				layers = append(layers, p)
			} else {
				t.Skipf("%s has no preset %s", name, preset)
			}
		}
	}
	cfg, err := variant.Resolve(v.Describe(), layers...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// encoderInputs returns tokens and a padding mask (the last pad positions of row 1 are
// padding) for a batch of b sequences of n tokens.
func encoderInputs(g *graph.Graph, b, n, pad int) (map[string]*tensor.Tensor, []bool, error) {
	ids := make([]int64, b*n)
	for i := range ids {
		ids[i] = int64(1 + (i*37+11)%200)
	}
	mask := make([]bool, b*n)
	if b > 1 {
		for j := n - pad; j < n; j++ {
			mask[n+j] = true
			ids[n+j] = 0
		}
	}
	tok, _ := tensor.FromInt64(ids, b, n)
	m, _ := tensor.FromBool(mask, b, n)
	in := map[string]*tensor.Tensor{}
	for _, vi := range g.Inputs {
		switch vi.Name {
		case variant.InputTokens:
			in[vi.Name] = tok
		case variant.InputKeyPadding:
			in[vi.Name] = m
		default:
			return nil, nil, fmt.Errorf("unexpected graph input %q", vi.Name)
		}
	}
	return in, mask, nil
}

// compareValid returns the largest |got-want|/max(1,|want|) over valid (unpadded)
// positions of outputs shaped (B, n, ...).
func compareValid(got, want *tensor.Tensor, mask []bool, b, n int) (float64, error) {
	if !tensor.SameShape(got.Shape, want.Shape) {
		return 0, fmt.Errorf("shape %s, want %s", tensor.ShapeString(got.Shape), tensor.ShapeString(want.Shape))
	}
	per := 1
	if len(want.Shape) >= 2 && want.Shape[0] == b && want.Shape[1] == n {
		per = len(want.F32) / (b * n)
	} else {
		mask = nil
	}
	worst := 0.0
	for i, w := range want.F32 {
		if mask != nil && mask[i/per] {
			continue
		}
		g := got.F32[i]
		if math.IsNaN(float64(w)) != math.IsNaN(float64(g)) {
			return math.Inf(1), fmt.Errorf("element %d is %v, want %v", i, g, w)
		}
		if math.IsNaN(float64(w)) {
			continue
		}
		d := math.Abs(float64(g)-float64(w)) / math.Max(1, math.Abs(float64(w)))
		worst = math.Max(worst, d)
	}
	return worst, nil
}

func runOn(t testing.TB, b backends.Backend, g *graph.Graph, opts backends.Options, in map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	p, err := b.Compile(g, opts)
	if err != nil {
		t.Fatalf("%s: compile: %v", b.Name(), err)
	}
	defer p.Close()
	out, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: run: %v", b.Name(), err)
	}
	return out
}

// TestVariantsMatchCPU compares CUDA with the CPU reference for every built-in variant at
// the tiny and base presets (fp32, tolerance 1e-4 relative to max(1, |want|)), checks that
// a second run of the same program (reusing pooled memory) is bitwise identical, and that
// the unfused program (backends.Options.NoFusion) agrees with the fused one within 1e-4;
// it logs which attention kernels ran.
func TestVariantsMatchCPU(t *testing.T) {
	needGPU(t)
	reg := loadRegistry(t)
	var names []string
	for name := range variants.Builtin() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, preset := range []string{"tiny", "base"} {
			t.Run(name+"."+preset, func(t *testing.T) {
				g := buildVariant(t, reg, name, preset)
				const b, n = 2, 64
				in, mask, err := encoderInputs(g, b, n, 5)
				if err != nil {
					t.Fatal(err)
				}
				want := runOn(t, cpu.Backend{}, g, backends.Options{}, in)
				p, err := cuda.Backend{}.Compile(g, backends.Options{})
				if err != nil {
					t.Fatalf("cuda: compile: %v", err)
				}
				defer p.Close()
				got, err := p.Run(context.Background(), in)
				if err != nil {
					t.Fatalf("cuda: run: %v", err)
				}
				again, err := p.Run(context.Background(), in)
				if err != nil {
					t.Fatalf("cuda: second run: %v", err)
				}
				unfused := runOn(t, cuda.Backend{}, g, backends.Options{NoFusion: true}, in)
				cp, _ := p.(interface { // *cuda.Program, which exists only with cgo
					Fusions() map[string]int
					AttentionKernels() map[string]int
				})
				for out, w := range want {
					d, err := compareValid(got[out], w, mask, b, n)
					if err != nil || d > 1e-4 {
						t.Errorf("%s: output %s differs from the CPU: max rel diff %.3g (tolerance 1e-4) %v", name, out, d, err)
					}
					du, err := compareValid(unfused[out], w, mask, b, n)
					if err != nil || du > 1e-4 {
						t.Errorf("%s: unfused output %s differs from the CPU: max rel diff %.3g (tolerance 1e-4) %v", name, out, du, err)
					}
					t.Logf("%s.%s %s: max rel diff vs CPU %.3g fused, %.3g unfused; fusions %v, attention kernels %v", name, preset, out, d, du, cp.Fusions(), cp.AttentionKernels())
					if d2, _ := compareValid(again[out], got[out], nil, b, n); d2 != 0 {
						t.Errorf("%s: second run differs from the first by %.3g", out, d2)
					}
				}
			})
		}
	}
}

// TestPrecisionModes runs every built-in variant at the base preset with TF32 and bf16
// matrix products and reports their distance from fp32 on the GPU over valid positions:
// ‖out − ref‖ / ‖ref‖ (the check: under 1e-2 for TF32, 5e-2 for bf16) and the largest
// |out − ref| / max(1, |ref|).
func TestPrecisionModes(t *testing.T) {
	needGPU(t)
	reg := loadRegistry(t)
	var names []string
	for name := range variants.Builtin() {
		names = append(names, name)
	}
	sort.Strings(names)
	const b, n = 2, 64
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			g := buildVariant(t, reg, name, "base")
			in, mask, err := encoderInputs(g, b, n, 5)
			if err != nil {
				t.Fatal(err)
			}
			ref := runOn(t, cuda.Backend{}, g, backends.Options{}, in)
			outs := map[string]*tensor.Tensor{}
			for _, prec := range []string{"tf32", "bf16"} {
				got := runOn(t, cuda.Backend{}, g, backends.Options{Precision: prec}, in)
				outs[prec] = got[variant.OutputHidden]
				r, worst, err := relL2(got[variant.OutputHidden], ref[variant.OutputHidden], mask, b, n)
				tol := map[string]float64{"tf32": 1e-2, "bf16": 5e-2}[prec]
				t.Logf("PRECISION %s %s vs fp32: rel L2 %.3g, max rel %.3g", name, prec, r, worst)
				if err != nil || !(r <= tol) {
					t.Errorf("%s %s: rel L2 %.3g > %.g (%v)", name, prec, r, tol, err)
				}
			}
			// The two modes must differ: bf16 rounds every product's inputs to bf16 (cuBLAS's
			// FAST_16BF compute type, which the backend used before, ran TF32 on an H200).
			if r, _, err := relL2(outs["bf16"], outs["tf32"], mask, b, n); err == nil {
				t.Logf("PRECISION %s bf16 vs tf32: rel L2 %.3g", name, r)
				if r == 0 {
					t.Errorf("%s: bf16's output equals tf32's: the products' inputs were not rounded to bf16", name)
				}
			}
		})
	}
}

// relL2 returns ‖got − want‖ / ‖want‖ and the largest |got − want| / max(1, |want|) over
// valid positions of outputs shaped (B, n, ...).
func relL2(got, want *tensor.Tensor, mask []bool, b, n int) (float64, float64, error) {
	if !tensor.SameShape(got.Shape, want.Shape) {
		return 0, 0, fmt.Errorf("shape %s, want %s", tensor.ShapeString(got.Shape), tensor.ShapeString(want.Shape))
	}
	per := len(want.F32) / (b * n)
	var num, den, worst float64
	for i, w := range want.F32 {
		if mask[i/per] {
			continue
		}
		d := float64(got.F32[i]) - float64(w)
		if math.IsNaN(d) {
			return math.NaN(), math.NaN(), fmt.Errorf("element %d is %v, want %v", i, got.F32[i], w)
		}
		num += d * d
		den += float64(w) * float64(w)
		worst = math.Max(worst, math.Abs(d)/math.Max(1, math.Abs(float64(w))))
	}
	return math.Sqrt(num / den), worst, nil
}

// BenchmarkVanillaBase runs the seed's base encoder at batch 32, n=512 on the GPU and
// reports tokens/s (compare: scripts/gpu/bench_torch.py on the same machine).
func BenchmarkVanillaBase(b *testing.B) {
	needGPU(b)
	g := buildVariant(b, loadRegistry(b), "vanilla", "base")
	const batch, n = 32, 512
	in, _, err := encoderInputs(g, batch, n, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, prec := range []string{"fp32", "tf32"} {
		b.Run(prec, func(b *testing.B) {
			p, err := cuda.Backend{}.Compile(g, backends.Options{Precision: prec})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Run(context.Background(), in); err != nil { // warm-up: pool, cuBLAS heuristics
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/batch")
		})
	}
}
