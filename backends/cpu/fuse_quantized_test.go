package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// The imported quantized forms (onnx/testdata/gen_int8.py's fixtures, and generated graphs of
// awkward shapes and extreme values) compile onto the int8 kernels (fuse_quantized.go), and
// the fused steps give the reference path's answer: bit for bit for the dynamic form,
// QLinearMatMul and MatMulInteger, within float32 rounding for QDQ.

// runQuantized compiles g fused and unfused (the reference path: each node its own kernel,
// graph.EvalNode for the quantized ops) on threads threads, checks that the fused program
// counts want of kind, and returns both programs' outputs on in.
func runQuantized(t *testing.T, g *graph.Graph, in map[string]*tensor.Tensor, threads int, kind string, want int) (fused, ref map[string]*tensor.Tensor) {
	t.Helper()
	f, p := compileBoth(t, g, backends.Options{Threads: threads})
	defer f.Close()
	defer p.Close()
	if got := f.Fusions()[kind]; got != want {
		t.Fatalf("fusions %v: %s %d, want %d", f.Fusions(), kind, got, want)
	}
	var err error
	if fused, err = f.Run(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if ref, err = p.Run(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return fused, ref
}

// sameBits fails unless got and want hold the same values bit for bit.
func sameBits(t *testing.T, name string, got, want *tensor.Tensor) {
	t.Helper()
	if got.DType != want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		t.Fatalf("%s: %v %v, want %v %v", name, got.DType, got.Shape, want.DType, want.Shape)
	}
	for i := range want.F32 {
		if math.Float32bits(got.F32[i]) != math.Float32bits(want.F32[i]) {
			t.Fatalf("%s: element %d is %v (%08x), the reference path's %v (%08x)", name, i, got.F32[i], math.Float32bits(got.F32[i]), want.F32[i], math.Float32bits(want.F32[i]))
		}
	}
	for i := range want.I64 {
		if got.I64[i] != want.I64[i] {
			t.Fatalf("%s: element %d is %d, the reference path's %d", name, i, got.I64[i], want.I64[i])
		}
	}
}

func randF32(rng *rand.Rand, scale float64, shape ...int) *tensor.Tensor {
	t := &tensor.Tensor{DType: tensor.Float32, Shape: shape, F32: make([]float32, graph.NumElements(shape))}
	for i := range t.F32 {
		t.F32[i] = float32(rng.NormFloat64() * scale)
	}
	return t
}

func randInts(rng *rand.Rand, dt tensor.DType, shape ...int) *tensor.Tensor {
	t := &tensor.Tensor{DType: dt, Shape: shape, I64: make([]int64, graph.NumElements(shape))}
	lo, span := int64(-128), 256
	if dt == tensor.Uint8 {
		lo = 0
	}
	for i := range t.I64 {
		t.I64[i] = lo + int64(rng.Intn(span))
	}
	return t
}

func TestQuantizedFusionFixtures(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	for _, c := range []struct {
		file, kind string
		rank2      bool
	}{
		{"dyn_tensor", "int8-dynamic", false}, {"dyn_channel", "int8-dynamic", false}, {"dyn_u8w", "int8-dynamic", false},
		{"qlinear", "int8-qlinear", false},
	} {
		t.Run(c.file, func(t *testing.T) {
			g, err := onnx.ImportFile(filepath.Join("..", "..", "onnx", "testdata", "int8", c.file+".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			for _, threads := range []int{1, 3} {
				x := randF32(rng, 1.5, 3, 37, 16)
				x.F32[5], x.F32[9] = 40, -60 // outliers stretch the quantization range
				fused, ref := runQuantized(t, g, map[string]*tensor.Tensor{"x": x}, threads, c.kind, 2)
				sameBits(t, c.file, fused["y"], ref["y"])
			}
		})
	}
}

// TestQuantizedFusionQDQ runs the QDQ fixtures: the fused step computes the exact integer sum
// scaled once, the reference path multiplies rounded dequantized floats; both are compared
// with a float64 evaluation of the quantized arithmetic.
func TestQuantizedFusionQDQ(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	for _, c := range []struct {
		file  string
		shape []int
	}{{"qdq_matmul", []int{2, 29, 16}}, {"qdq_gemm", []int{41, 16}}} {
		t.Run(c.file, func(t *testing.T) {
			g, err := onnx.ImportFile(filepath.Join("..", "..", "onnx", "testdata", "int8", c.file+".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			x := randF32(rng, 1.2, c.shape...)
			fused, ref := runQuantized(t, g, map[string]*tensor.Tensor{"x": x}, 2, "int8-qdq", 2)
			var worst, worstRef float64
			want := qdqFloat64(t, g, x)
			for i, w := range want {
				worst = max(worst, math.Abs(float64(fused["y"].F32[i])-w)/(1+math.Abs(w)))
				worstRef = max(worstRef, math.Abs(float64(ref["y"].F32[i])-w)/(1+math.Abs(w)))
			}
			t.Logf("largest error against float64 of the quantized arithmetic: fused %.2g, reference path %.2g", worst, worstRef)
			if worst > 1e-6 || worstRef > 1e-5 {
				t.Errorf("fused %.2g (want ≤ 1e-6), reference path %.2g (want ≤ 1e-5)", worst, worstRef)
			}
		})
	}
}

// qdqFloat64 evaluates the two-layer QDQ fixture g on x in float64 from its integers:
// quantize x (as QuantizeLinear does), sum (q − zp)(w − wzp) exactly, scale by sx·sw_j, add
// the bias, ReLU after the first layer, and quantize again before the second.
func qdqFloat64(t *testing.T, g *graph.Graph, x *tensor.Tensor) []float64 {
	t.Helper()
	init := g.InitializerMap()
	sx, zx := init["x_scale"].F32[0], init["x_zero_point"].I64[0]
	in := make([]float32, len(x.F32))
	copy(in, x.F32)
	var out []float64
	k := 16
	gemm := init["fc1.weight_quantized"].Shape[0] != k
	for layer := 1; layer <= 2; layer++ {
		p := fmt.Sprintf("fc%d", layer)
		w, ws, b := init[p+".weight_quantized"], init[p+".weight_scale"].F32, init[p+".bias"].F32
		n := len(b)
		m := len(in) / k
		out = make([]float64, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s int64
				for q := 0; q < k; q++ {
					a := graph.Quantize(in[i*k+q], sx, zx, 0, 255) - zx
					wv := w.I64[q*n+j]
					if gemm {
						wv = w.I64[j*k+q]
					}
					s += a * wv
				}
				out[i*n+j] = float64(s)*float64(sx)*float64(ws[j]) + float64(b[j])
			}
		}
		if layer == 1 {
			in = make([]float32, len(out))
			for i, v := range out {
				in[i] = float32(max(v, 0))
			}
			k = n
		}
	}
	return out
}

// quantizedGraph builds x (rows, k) → DynamicQuantizeLinear → MatMulInteger by a random
// (k, n) B of dtype bt with per-column zero points (nonzero when zp) → Cast → Mul by
// Mul(x_scale, W_scale) → Add bias, ONNX Runtime's form with every optional part used.
func quantizedGraph(t *testing.T, rng *rand.Rand, k, n int, bt tensor.DType, zp bool) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("quantized")
	x := b.Input("x", tensor.Float32, graph.Sym("rows"), graph.Fixed(int64(k)))
	q := b.OpN("DynamicQuantizeLinear", []string{x}, 3, nil)
	w := randInts(rng, bt, k, n)
	if bt == tensor.Int8 && k*n > 2 {
		w.I64[0], w.I64[1] = -128, 127 // the extremes meet a = 255 and a = 0 below
	}
	zt := &tensor.Tensor{DType: bt, Shape: []int{n}, I64: make([]int64, n)}
	if zp {
		zt = randInts(rng, bt, n)
	}
	acc := b.Op("MatMulInteger", []string{q[0], b.Param("w", w), q[2], b.Param("wz", zt)}, nil)
	cast := b.Op("Cast", []string{acc}, graph.Attrs{"to": graph.Int(int64(tensor.Float32))})
	ws := randF32(rng, 0.01, n)
	for i := range ws.F32 {
		ws.F32[i] = float32(math.Abs(float64(ws.F32[i]))) + 1e-3
	}
	scale := b.Op("Mul", []string{q[1], b.Param("ws", ws)}, nil)
	y := b.Op("Add", []string{b.Op("Mul", []string{cast, scale}, nil), b.Param("bias", randF32(rng, 1, n))}, nil)
	b.Output("y", y, tensor.Float32, graph.Sym("rows"), graph.Fixed(int64(n)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestQuantizedFusionShapes checks the dynamic form bit for bit on shapes that are not
// multiples of any tile (k and n of 1, odd, past a panel; k up to 4096), int8 and uint8
// weights with and without zero points, inputs whose quantization hits 0 and 255, and an
// all-zero input (scale 0), on every int8 path this CPU runs (gemm.Int8Paths).
func TestQuantizedFusionShapes(t *testing.T) {
	for _, path := range gemm.Int8Paths() {
		t.Run(path, func(t *testing.T) {
			if err := gemm.SetInt8Path(path); err != nil {
				t.Fatal(err)
			}
			defer gemm.SetInt8Path("")
			quantizedShapes(t)
		})
	}
}

// quantizedShapes is TestQuantizedFusionShapes on the int8 path set now.
func quantizedShapes(t *testing.T) {
	rng := rand.New(rand.NewSource(33))
	for _, c := range []struct {
		rows, k, n int
		bt         tensor.DType
		zp         bool
	}{
		{1, 1, 1, tensor.Int8, false}, {3, 7, 5, tensor.Int8, true}, {50, 33, 67, tensor.Uint8, true}, {17, 300, 129, tensor.Int8, true},
		{65, 64, 64, tensor.Uint8, false}, {5, 4096, 19, tensor.Int8, true},
		// int8 weights without a zero point run on the fused-linear path (runDynamicLinears)
		{17, 300, 129, tensor.Int8, false}, {130, 4096, 33, tensor.Int8, false}, {2, 64, 1, tensor.Int8, false},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d_%v_zp%v", c.rows, c.k, c.n, c.bt, c.zp), func(t *testing.T) {
			g := quantizedGraph(t, rng, c.k, c.n, c.bt, c.zp)
			x := randF32(rng, 1, c.rows, c.k)
			x.F32[0] = 30 // quantizes to 255; the most negative value to 0
			for _, in := range []*tensor.Tensor{x, {DType: tensor.Float32, Shape: []int{c.rows, c.k}, F32: make([]float32, c.rows*c.k)}} {
				fused, ref := runQuantized(t, g, map[string]*tensor.Tensor{"x": in}, 2, "int8-dynamic", 1)
				sameBits(t, "y", fused["y"], ref["y"])
			}
		})
	}
}

// TestQuantizedFusionMatMulInteger checks a lone MatMulInteger of int8 activations (shifted
// to u8 inside) with a run-time zero point, bit for bit.
func TestQuantizedFusionMatMulInteger(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	b := graph.NewBuilder("mmi")
	a := b.Input("a", tensor.Int8, graph.Fixed(2), graph.Sym("rows"), graph.Fixed(9))
	za := b.Input("za", tensor.Int8)
	y := b.Op("MatMulInteger", []string{a, b.Param("w", randInts(rng, tensor.Int8, 9, 6)), za, b.Param("wz", randInts(rng, tensor.Int8, 6))}, nil)
	b.Output("y", y, tensor.Int32, graph.Fixed(2), graph.Sym("rows"), graph.Fixed(6))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"a": randInts(rng, tensor.Int8, 2, 11, 9), "za": {DType: tensor.Int8, Shape: []int{}, I64: []int64{-77}}}
	fused, ref := runQuantized(t, g, in, 2, "int8-matmulinteger", 1)
	sameBits(t, "y", fused["y"], ref["y"])
}

// TestQuantizedFusionFallsBack runs the fused dynamic step on an input whose last axis is
// not the weights' k: it runs the original steps, which report the mismatch.
func TestQuantizedFusionFallsBack(t *testing.T) {
	g := quantizedGraph(t, rand.New(rand.NewSource(35)), 8, 4, tensor.Int8, true)
	g.Inputs[0].Shape = graph.Shape{graph.Sym("rows"), graph.Sym("k")}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2, 5}, F32: make([]float32, 10)}
	if _, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": x}); err == nil {
		t.Fatal("a (2, 5) input to an 8-row weight ran without an error")
	}
}

// importInt8 is g exported in quantize_dynamic's int8 form and imported again, as a user's
// int8 file reaches zoo.
func importInt8(tb testing.TB, g *graph.Graph) *graph.Graph {
	tb.Helper()
	data, err := onnx.Export(g, onnx.ExportOptions{Precision: "int8"})
	if err != nil {
		tb.Fatal(err)
	}
	qg, err := onnx.Import(data)
	if err != nil {
		tb.Fatal(err)
	}
	return qg
}

// floatLayer is one linear layer y = x·Wᵀ + b, k inputs and n outputs, as zoo writes it.
func floatLayer(k, n int) *graph.Graph {
	rng := rand.New(rand.NewSource(1))
	b := graph.NewBuilder("fl")
	x := b.Input("x", tensor.Float32, graph.Sym("rows"), graph.Fixed(int64(k)))
	w := randF32(rng, 0.05, n, k)
	y := b.Op("Add", []string{b.MatMul(x, b.Op("Transpose", []string{b.Param("fc.weight", w)}, nil)), b.Param("fc.bias", randF32(rng, 1, n))}, nil)
	b.Output("y", y, tensor.Float32, graph.Sym("rows"), graph.Fixed(int64(n)))
	g, _ := b.Build()
	return g
}

// BenchmarkQuantizedLayer times one linear layer (1024 rows by 512×2048, a feed-forward
// block's first layer, and by 2048×512, its second) in fp32, in int8 through
// Options.Precision (per-row activations, the int8 kernels' own quantization and
// dequantization), and imported in quantize_dynamic's form (the "int8-dynamic" step).
func BenchmarkQuantizedLayer(b *testing.B) {
	for _, sh := range [][3]int{{1024, 512, 2048}, {1024, 2048, 512}} {
		benchmarkQuantizedLayer(b, sh[0], sh[1], sh[2])
	}
}

func benchmarkQuantizedLayer(b *testing.B, m, k, n int) {
	g := floatLayer(k, n)
	qg := importInt8(b, g)
	x := randF32(rand.New(rand.NewSource(2)), 1, m, k)
	for _, c := range []struct {
		name string
		g    *graph.Graph
		prec string
	}{{"fp32", g, ""}, {"native-int8", g, "int8"}, {"imported-int8", qg, ""}} {
		b.Run(fmt.Sprintf("%dx%dx%d/%s", m, k, n, c.name), func(b *testing.B) {
			p, err := cpu.Backend{}.Compile(c.g, backends.Options{Threads: 2, Precision: c.prec})
			if err != nil {
				b.Fatal(err)
			}
			in := map[string]*tensor.Tensor{"x": x}
			for i := 0; i < b.N; i++ {
				if _, err := p.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(m*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestQuantizeTensorU8Definition holds gemm.QuantizeTensorU8 (the fused steps' vector
// quantization) to ONNX's definition as graph states it (DynamicQuantize), on every kernel
// level: exact ties of the scale, NaN, ±Inf, quotients past ±512, zero points 0 to 255.
func TestQuantizeTensorU8Definition(t *testing.T) {
	rng := rand.New(rand.NewSource(36))
	x := make([]float32, 4099)
	for i := range x {
		switch i % 5 {
		case 0:
			x[i] = (float32(rng.Intn(600)-300) + 0.5) * 0.037
		case 1:
			x[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30, 0}[rng.Intn(6)]
		default:
			x[i] = float32(rng.NormFloat64() * 3)
		}
	}
	prev := simd.Current().String()
	defer simd.Set(prev)
	for _, level := range simd.AvailableNames() {
		if err := simd.Set(level); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			scale float32
			zp    uint8
		}{{0.037, 0}, {0.037, 131}, {0.037, 255}, {1e-3, 7}, {250, 3}} {
			got := make([]uint8, len(x))
			gemm.QuantizeTensorU8(got, x, c.scale, int32(c.zp))
			for i, v := range x {
				if want := graph.DynamicQuantize(v, c.scale, c.zp); got[i] != want {
					t.Fatalf("%s scale %v zp %d: %v → %d, DynamicQuantize gives %d", level, c.scale, c.zp, v, got[i], want)
				}
			}
		}
	}
}

// TestRange0Definition holds gemm.Range0 (the fused steps' vector range) to graph.MinMax0 bit
// for bit on every kernel level: lengths around the vector widths, −0, NaN (passed over) and
// ±Inf (kept), all-negative and all-positive inputs.
func TestRange0Definition(t *testing.T) {
	rng := rand.New(rand.NewSource(37))
	neg0 := float32(math.Copysign(0, -1))
	prev := simd.Current().String()
	defer simd.Set(prev)
	for _, level := range simd.AvailableNames() {
		if err := simd.Set(level); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 1000} {
			for c := range 6 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
					switch c {
					case 1:
						x[i] = neg0
					case 2:
						x[i] = -float32(math.Abs(float64(x[i]))) - 1
					case 3:
						x[i] = float32(math.Abs(float64(x[i]))) + 1
					}
				}
				if n > 0 && c == 4 {
					x[rng.Intn(n)] = float32(math.NaN())
				}
				if n > 0 && c == 5 {
					x[rng.Intn(n)] = float32(math.Inf(2*rng.Intn(2) - 1))
				}
				lo, hi := gemm.Range0(x)
				wl, wh := graph.MinMax0(x)
				if math.Float32bits(lo) != math.Float32bits(wl) || math.Float32bits(hi) != math.Float32bits(wh) {
					t.Fatalf("%s n %d case %d: Range0 (%v, %v), MinMax0 (%v, %v)", level, n, c, lo, hi, wl, wh)
				}
			}
		}
	}
}

// ffnBlock is a post-norm feed-forward block as zoo writes it: LayerNorm(x + (Relu(x·W1ᵀ +
// b1)·W2ᵀ + b2)), d wide with a hidden layer of h.
func ffnBlock(d, h int) *graph.Graph {
	rng := rand.New(rand.NewSource(4))
	b := graph.NewBuilder("ffn")
	x := b.Input("x", tensor.Float32, graph.Sym("rows"), graph.Fixed(int64(d)))
	lin := func(name, in string, k, n int) string {
		w := b.Op("Transpose", []string{b.Param(name+".weight", randF32(rng, 0.1, n, k))}, nil)
		return b.Add(b.MatMul(in, w), b.Param(name+".bias", randF32(rng, 0.5, n)))
	}
	y := lin("fc2", b.Relu(lin("fc1", x, d, h)), h, d)
	out := b.LayerNorm(b.Add(x, y), b.Param("norm.weight", randF32(rng, 1, d)), b.Param("norm.bias", randF32(rng, 1, d)), 1e-5)
	b.Output("y", out, tensor.Float32, graph.Sym("rows"), graph.Fixed(int64(d)))
	g, _ := b.Build()
	return g
}

// TestQuantizedFusionResidualNorm: exported at int8 (quantize_dynamic's form), a
// feed-forward block's second layer takes its residual Add and LayerNormalization into the
// dynamic layer's epilogue (the first its bias and Relu, in the kernels' store), no Add or
// LayerNormalization step is left, and the result is the reference path's bit for bit, on
// 1 and 2 threads. In a whole exported encoder the same holds for the attention block's
// output projection (there the fused attention keeps the comparison to float tolerance).
func TestQuantizedFusionResidualNorm(t *testing.T) {
	noStepsLeft := func(g *graph.Graph, threads int, adds string) {
		t.Helper()
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		report := p.(backends.CompileReporter).CompileReport()
		if strings.Contains(report, "LayerNormalization") || (adds == "" && strings.Contains(report, " Add ")) || (adds != "" && !strings.Contains(report, adds)) {
			t.Errorf("a residual Add or LayerNormalization step is left:\n%s", report)
		}
	}
	ffn := importInt8(t, ffnBlock(48, 80))
	x := randF32(rand.New(rand.NewSource(5)), 1, 67, 48)
	for _, threads := range []int{1, 2} {
		fused, ref := runQuantized(t, ffn, map[string]*tensor.Tensor{"x": x}, threads, "int8-dynamic", 2)
		sameBits(t, "y", fused["y"], ref["y"])
		noStepsLeft(ffn, threads, "")
	}
	enc := importInt8(t, vanillaBase(t, map[string]any{"layers": int64(2), "d_model": int64(64), "heads": int64(4), "d_ff": int64(128)}))
	in := encoderInputs(2, 37)
	for j := 30; j < 37; j++ {
		in[variant.InputKeyPadding].Bool[37+j] = true
	}
	f, p := compileBoth(t, enc, backends.Options{Threads: 2})
	defer f.Close()
	defer p.Close()
	if got := f.Fusions()["int8-dynamic"]; got != 2*6+1 {
		t.Fatalf("fusions %v: int8-dynamic %d, want 13", f.Fusions(), got)
	}
	runAgree(t, f, p, in, 1e-5)
	noStepsLeft(enc, 2, " Add 1,") // the positional encoding's
}
