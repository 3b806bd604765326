//go:build cgo && linux

package cuda

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// The GPU checks that need the package's internals: NVRTC and every kernel, the fused
// attention against its unfused steps, and the benchmark (device time without the output
// download). scripts/gpu-check.sh runs them with ZOO_GPU_TESTS=1 (ZOO_GPU_BENCH=1 for the
// benchmark); without it they skip.

func needDevice(t testing.TB) {
	t.Helper()
	if os.Getenv("ZOO_GPU_TESTS") != "1" {
		t.Skip("set ZOO_GPU_TESTS=1 to run the end-to-end GPU checks")
	}
	if p := (Backend{}).Probe(); !p.Available {
		t.Fatalf("ZOO_GPU_TESTS=1 but no usable CUDA device: %s", p.Reason)
	}
}

// TestNVRTCCompilesEveryKernel compiles kernels.cu afresh (no cache) for this device,
// loads it, finds every entry point kernels.cu declares and reports each one's registers,
// static shared memory and local memory (spills).
func TestNVRTCCompilesEveryKernel(t *testing.T) {
	needDevice(t)
	re := regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(`)
	var declared []string
	for _, m := range re.FindAllStringSubmatch(kernelSource, -1) {
		declared = append(declared, m[1])
	}
	sort.Strings(declared)
	names := slices.Sorted(slices.Values(kernelNames))
	if !slices.Equal(declared, names) {
		t.Errorf("kernels.cu declares %v; kernelNames lists %v", declared, names)
	}
	d, err := getDevice()
	if err != nil {
		t.Fatalf("open the device (compiles and loads kernels.cu): %v", err)
	}
	t.Logf("device module: %s", d.image)
	l := d.l
	arch := fmt.Sprintf("sm_%d%d", l.major, l.minor)
	cubin := nvrtcHasCubin()
	if !cubin {
		arch = fmt.Sprintf("compute_%d%d", l.major, l.minor)
	}
	start := time.Now()
	img, log, err := nvrtcCompile(kernelSource, "kernels.cu", nvrtcOptions(arch), cubin)
	if err != nil {
		t.Fatalf("NVRTC %d.%d, %s: %v\n%s", l.nvrtcMajor, l.nvrtcMinor, arch, err, log)
	}
	t.Logf("NVRTC %d.%d compiled kernels.cu for %s in %v: %d bytes of %s", l.nvrtcMajor, l.nvrtcMinor, arch, time.Since(start).Round(time.Millisecond), len(img), map[bool]string{true: "CUBIN", false: "PTX"}[cubin])
	if strings.TrimSpace(log) != "" {
		t.Logf("NVRTC log:\n%s", log)
	}
	err = d.with(func() error {
		m, err := cuLoadModule(img)
		if err != nil {
			return err
		}
		for _, name := range declared {
			f, err := cuFunc(m, name)
			if err != nil {
				return err
			}
			regs, _ := cuFuncAttr(f, funcNumRegisters)
			shared, _ := cuFuncAttr(f, funcSharedBytes)
			local, _ := cuFuncAttr(f, funcLocalBytes)
			maxThreads, _ := cuFuncAttr(f, funcMaxThreads)
			t.Logf("kernel %-18s %3d registers, %5d B shared, %4d B local, up to %d threads per block", name, regs, shared, local, maxThreads)
			if local > 0 && strings.HasPrefix(name, "zoo_attention_t") {
				t.Logf("WARNING: %s spills to local memory (%d B per thread): slower, not wrong", name, local)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// attentionGraph is y = softmax(Q·Kᵀ/√dh + mask)·V over inputs q, k, v [B, n, H, dh] and an
// additive mask [B, 1, 1, n], with the head transposes around it as a model writes them
// (K's as one [0 2 3 1] Transpose when kt is set, else [0 2 1 3] then [0 1 3 2]); rank5
// adds a leading axis of 1 to every value, which the fused kernels do not take.
func attentionGraph(dh int, kt, rank5 bool) (*graph.Graph, error) {
	b := graph.NewBuilder("attention")
	dims := func(n ...string) []graph.Dim {
		var d []graph.Dim
		for _, s := range n {
			d = append(d, graph.Sym(s))
		}
		return d
	}
	q := b.Input("q", tensor.Float32, dims("b", "n", "h", "d")...)
	k := b.Input("k", tensor.Float32, dims("b", "n", "h", "d")...)
	v := b.Input("v", tensor.Float32, dims("b", "n", "h", "d")...)
	m := b.Input("mask", tensor.Float32, dims("b", "o", "p", "n")...)
	head, kperm, out := []int64{0, 2, 1, 3}, []int64{0, 2, 3, 1}, []int64{0, 2, 1, 3}
	if rank5 {
		q, k, v, m = b.Unsqueeze(q, 0), b.Unsqueeze(k, 0), b.Unsqueeze(v, 0), b.Unsqueeze(m, 0)
		head, kperm, out = []int64{0, 1, 3, 2, 4}, []int64{0, 1, 3, 4, 2}, []int64{0, 1, 3, 2, 4}
	}
	qh, vh := b.Transpose(q, head...), b.Transpose(v, head...)
	var kth string
	if kt {
		kth = b.Transpose(k, kperm...)
	} else {
		r := len(head)
		sw := make([]int64, r)
		for i := range sw {
			sw[i] = int64(i)
		}
		sw[r-2], sw[r-1] = sw[r-1], sw[r-2]
		kth = b.Transpose(b.Transpose(k, head...), sw...)
	}
	s := b.Add(b.Div(b.MatMul(qh, kth), b.ConstFloat(float32(math.Sqrt(float64(dh))))), m)
	y := b.Transpose(b.MatMul(b.Softmax(s, -1), vh), out...)
	if rank5 {
		y = b.Op("Squeeze", []string{y, b.ConstInts(0)}, nil)
	}
	b.Output("y", y, tensor.Float32)
	return b.Build()
}

func randTensor(rng *rand.Rand, shape ...int) *tensor.Tensor {
	t, _ := tensor.New(tensor.Float32, shape...)
	for i := range t.F32 {
		t.F32[i] = float32(rng.NormFloat64())
	}
	return t
}

// runProgram compiles g on the GPU with opts, runs it on in and returns the outputs and the
// program's attention-kernel counts.
func runProgram(t *testing.T, g *graph.Graph, opts backends.Options, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, map[string]int, map[string]int) {
	t.Helper()
	pr, err := Backend{}.Compile(g, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	defer pr.Close()
	out, err := pr.Run(context.Background(), in)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	p := pr.(*Program)
	return out, p.Fusions(), p.AttentionKernels()
}

// maxRelDiff is the largest |a-b| / max(1, |b|), skipping positions where b is NaN (rows
// whose keys are all masked; a must be NaN there too).
func maxRelDiff(a, b *tensor.Tensor, valid func(i int) bool) (float64, error) {
	if !slices.Equal(a.Shape, b.Shape) {
		return 0, fmt.Errorf("shape %v, want %v", a.Shape, b.Shape)
	}
	worst := 0.0
	for i := range b.F32 {
		if valid != nil && !valid(i) {
			continue
		}
		x, y := float64(a.F32[i]), float64(b.F32[i])
		if math.IsNaN(y) || math.IsNaN(x) {
			if math.IsNaN(x) != math.IsNaN(y) {
				return math.Inf(1), fmt.Errorf("element %d: %v, want %v", i, x, y)
			}
			continue
		}
		worst = math.Max(worst, math.Abs(x-y)/math.Max(1, math.Abs(y)))
	}
	return worst, nil
}

// TestFusedAttentionMatchesUnfused runs attention graphs through the fused step and through
// the same steps unfused (backends.Options.NoFusion), for head widths that take the tiled
// kernels (32, 64) and the per-row one (16, 100, 128), sequence lengths around the tile
// sizes, a key-padding mask with masked keys, Kᵀ written as one or two Transposes, and a
// rank-5 graph that must fall back to the unfused steps; and checks which kernel ran.
func TestFusedAttentionMatchesUnfused(t *testing.T) {
	needDevice(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		dh, n  int
		kt, r5 bool
		kernel string
	}{
		{64, 512, false, false, "zoo_attention_t64"},
		{64, 77, true, false, "zoo_attention_t64"},
		{32, 200, false, false, "zoo_attention_t32"},
		{32, 1, true, false, "zoo_attention_t32"},
		{16, 100, false, false, "zoo_attention"},
		{100, 65, true, false, "zoo_attention"},
		{128, 130, false, false, "zoo_attention"},
		{64, 40, false, true, "unfused"},
		{64, 300, false, false, "zoo_attention_bf16_d64"},
		{32, 77, true, false, "zoo_attention_bf16_d32"},
		{16, 50, false, false, "zoo_attention"}, // bf16, but no tensor-core kernel for 16 features
	} {
		t.Run(fmt.Sprintf("dh%d-n%d-kt%v-rank5%v", c.dh, c.n, c.kt, c.r5), func(t *testing.T) {
			g, err := attentionGraph(c.dh, c.kt, c.r5)
			if err != nil {
				t.Fatal(err)
			}
			const B, H = 2, 3
			mask, _ := tensor.New(tensor.Float32, B, 1, 1, c.n)
			for j := c.n - c.n/4; j < c.n; j++ { // batch 1's last quarter of keys is padding
				mask.F32[c.n+j] = float32(math.Inf(-1))
			}
			in := map[string]*tensor.Tensor{"q": randTensor(rng, B, c.n, H, c.dh), "k": randTensor(rng, B, c.n, H, c.dh), "v": randTensor(rng, B, c.n, H, c.dh), "mask": mask}
			prec, tol := "", 1e-4
			if strings.Contains(c.kernel, "bf16") || c.dh == 16 && c.n == 50 {
				// bf16 against the fp32 unfused steps: Q, K, V and P rounded to bf16.
				prec, tol = "bf16", 3e-2
			}
			got, fusions, kernels := runProgram(t, g, backends.Options{Precision: prec}, in)
			want, nofusions, _ := runProgram(t, g, backends.Options{NoFusion: true}, in)
			if fusions["attention"] != 1 || len(nofusions) != 0 {
				t.Errorf("fusions %v (want one attention), with NoFusion %v (want none)", fusions, nofusions)
			}
			if kernels[c.kernel] != 1 {
				t.Errorf("attention kernels run: %v, want %s", kernels, c.kernel)
			}
			d, err := maxRelDiff(got["y"], want["y"], nil)
			t.Logf("%v (%s): fused vs fp32 unfused max rel diff %.3g", kernels, map[string]string{"": "fp32"}[prec]+prec, d)
			if err != nil || d > tol {
				t.Errorf("fused differs from unfused by %.3g (tolerance %g) %v", d, tol, err)
			}
		})
	}
}

// TestBenchVanilla times vanilla base (the seed's encoder: 6 layers, d_model 512, 8 heads)
// at batch 32 and n = 512 and 2048 in each precision, fused and unfused: "device" is a Run
// that ends after a stream sync without downloading the outputs (as a PyTorch forward on
// the GPU ends), "e2e" a full Run with hidden and logits copied to host memory. Each line is
// the median of the timed runs after two warm-ups. Set ZOO_GPU_BENCH=1 (it takes a minute).
func TestBenchVanilla(t *testing.T) {
	needDevice(t)
	if os.Getenv("ZOO_GPU_BENCH") != "1" {
		t.Skip("set ZOO_GPU_BENCH=1 to run the benchmark")
	}
	reps := 10
	g := buildBuiltin(t, "vanilla", "base")
	ns := []int{512, 2048}
	if s := os.Getenv("ZOO_GPU_BENCH_N"); s != "" {
		ns = nil
		for _, f := range strings.Split(s, ",") {
			var n int
			fmt.Sscan(f, &n)
			ns = append(ns, n)
		}
	}
	const batch = 32
	for _, n := range ns {
		ids := make([]int64, batch*n)
		for i := range ids {
			ids[i] = int64(1 + (i*37+11)%200)
		}
		tok, _ := tensor.FromInt64(ids, batch, n)
		mask, _ := tensor.FromBool(make([]bool, batch*n), batch, n)
		in := map[string]*tensor.Tensor{variant.InputTokens: tok, variant.InputKeyPadding: mask}
		for _, prec := range []string{"fp32", "tf32", "bf16"} {
			for _, fuse := range []bool{true, false} {
				pr, err := Backend{}.Compile(g, backends.Options{Precision: prec, NoFusion: !fuse})
				if err != nil {
					t.Fatal(err)
				}
				p := pr.(*Program)
				median := func(download bool) float64 {
					p.noDownload = !download
					var ms []float64
					for i := 0; i < reps+2; i++ {
						start := time.Now()
						if _, err := p.Run(context.Background(), in); err != nil {
							t.Fatalf("n=%d %s: %v", n, prec, err)
						}
						if i >= 2 {
							ms = append(ms, float64(time.Since(start).Microseconds())/1e3)
						}
					}
					sort.Float64s(ms)
					return ms[len(ms)/2]
				}
				dev := median(false)
				e2e := median(true)
				mode := "fused"
				if !fuse {
					mode = "unfused"
				}
				// One run with a sync after every step: where the time goes, by op.
				p.noDownload, p.stepTimes = true, map[string]time.Duration{}
				start := time.Now()
				if _, err := p.Run(context.Background(), in); err != nil {
					t.Fatal(err)
				}
				total := time.Since(start)
				ops := slices.SortedFunc(maps.Keys(p.stepTimes), func(a, b string) int { return int(p.stepTimes[b] - p.stepTimes[a]) })
				var parts []string
				for _, op := range ops {
					parts = append(parts, fmt.Sprintf("%s %.2f", op, float64(p.stepTimes[op].Microseconds())/1e3))
				}
				t.Logf("PROFILE zoo n=%d %s %s: %.2f ms with a sync per step: %s", n, prec, mode, float64(total.Microseconds())/1e3, strings.Join(parts, ", "))
				p.stepTimes = nil
				t.Logf("BENCH zoo n=%d %s %s: device %.2f ms/batch (%.0f tokens/s), e2e %.2f ms/batch; attention kernels %v",
					n, prec, mode, dev, float64(batch*n)/dev*1e3, e2e, p.AttentionKernels())
				pr.Close()
			}
		}
	}
}
