package onnx_test

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/quant"
	"github.com/zoo-dev/zoo/zoo/tensor"
	xcpu "golang.org/x/sys/cpu"
)

// TestQuantizeDynamicMatchesORTsForm checks zoo's int8 export transform (zoo/quant) against
// testdata/gen_int8.py's independent numpy re-implementation of ONNX Runtime's
// quantize_dynamic: the same float model (int8/float.onnx) quantized per tensor and per
// channel gives the same nodes and the same quantized weights, scales and zero points.
func TestQuantizeDynamicMatchesORTsForm(t *testing.T) {
	float, err := onnx.ImportFile(filepath.Join("testdata", "int8", "float.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file      string
		perTensor bool
	}{{"dyn_tensor.onnx", true}, {"dyn_channel.onnx", false}} {
		t.Run(c.file, func(t *testing.T) {
			want, err := onnx.ImportFile(filepath.Join("testdata", "int8", c.file))
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := quant.Dynamic(float, quant.Options{PerTensor: c.perTensor})
			if err != nil {
				t.Fatal(err)
			}
			if st.Layers != 2 {
				t.Errorf("%d layers rewritten, want 2", st.Layers)
			}
			if g, w := ops(got), ops(want); !slices.Equal(g, w) {
				t.Errorf("ops %v, want ONNX Runtime's %v", g, w)
			}
			for _, in := range want.Initializers {
				g := got.Initializer(in.Name)
				if g == nil {
					t.Errorf("no initializer %s", in.Name)
					continue
				}
				if g.DType != in.Tensor.DType || !slices.Equal(g.Shape, in.Tensor.Shape) || !slices.Equal(g.I64, in.Tensor.I64) || !slices.Equal(g.F32, in.Tensor.F32) {
					t.Errorf("initializer %s: %v %v differs from ONNX Runtime's form %v %v", in.Name, g.DType, g.Shape, in.Tensor.DType, in.Tensor.Shape)
				}
			}
			if len(got.Initializers) != len(want.Initializers) {
				t.Errorf("%d initializers, want %d", len(got.Initializers), len(want.Initializers))
			}
		})
	}
}

func ops(g *graph.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Op)
	}
	return out
}

// TestInt8LayerMatchesORT runs one linear layer in quantize_dynamic's form (int8 weights over
// the whole range, per-column scales, inputs whose quantized rows are all 255 or all 0, so
// that pairs of products leave int16) on zoo and on ONNX Runtime and compares both with a
// float64 evaluation of the quantized arithmetic: exact integer sums Σ(q − zp)·w, then
// sum·x_scale·w_scale_j + b_j. zoo's must agree to float32 rounding on every CPU. ONNX
// Runtime's agrees where its u8s8 kernels are exact (VNNI); on x86 without VNNI its int16
// saturation shows, and the test says so instead of failing.
func TestInt8LayerMatchesORT(t *testing.T) {
	rt, err := ort.Open()
	if errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found: set %s or install it (%v)", ort.LibraryEnv, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	const k, n, rows = 96, 40, 6
	rng := rand.New(rand.NewSource(41))
	b := graph.NewBuilder("int8_layer")
	x := b.Input("x", tensor.Float32, graph.Sym("rows"), graph.Fixed(k))
	w := &tensor.Tensor{DType: tensor.Float32, Shape: []int{n, k}, F32: make([]float32, n*k)}
	for i := range w.F32 {
		w.F32[i] = float32(rng.NormFloat64())
	}
	bias := &tensor.Tensor{DType: tensor.Float32, Shape: []int{n}, F32: make([]float32, n)}
	for i := range bias.F32 {
		bias.F32[i] = float32(rng.NormFloat64())
	}
	y := b.Op("Add", []string{b.MatMul(x, b.Op("Transpose", []string{b.Param("fc.weight", w)}, nil)), b.Param("fc.bias", bias)}, nil)
	b.Output("y", y, tensor.Float32, graph.Sym("rows"), graph.Fixed(n))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := onnx.Export(g, onnx.ExportOptions{Precision: "int8"})
	if err != nil {
		t.Fatal(err)
	}
	qg, err := onnx.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	in := &tensor.Tensor{DType: tensor.Float32, Shape: []int{rows, k}, F32: make([]float32, rows*k)}
	for i := range in.F32 {
		switch r := i / k; {
		case r == 0:
			in.F32[i] = 3 // quantizes to 255 (the maximum of the tensor)
		case r == 1:
			in.F32[i] = -1 // quantizes to 0
		default:
			in.F32[i] = float32(rng.NormFloat64())
		}
	}
	feeds := map[string]*tensor.Tensor{"x": in}
	p, err := cpu.Backend{}.Compile(qg, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.(*cpu.Program).Fusions()["int8-dynamic"] != 1 {
		t.Fatalf("the layer did not compile onto the int8 kernels: %v", p.(*cpu.Program).Fusions())
	}
	got, err := p.Run(context.Background(), feeds)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.NewSession(data, ort.SessionOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Run(feeds, []string{"y"})
	if err != nil {
		t.Fatal(err)
	}
	// float64 of the quantized arithmetic.
	init := qg.InitializerMap()
	qw, ws := init["fc.weight_quantized"], init["fc.weight_scale"].F32
	lo, hi := graph.MinMax0(in.F32)
	xs, zp := graph.DynamicQuantParams(lo, hi)
	exact := make([]float64, rows*n)
	for i := 0; i < rows; i++ {
		for j := 0; j < n; j++ {
			var sum int64
			for q := 0; q < k; q++ {
				sum += (int64(graph.DynamicQuantize(in.F32[i*k+q], xs, zp)) - int64(zp)) * qw.I64[q*n+j]
			}
			exact[i*n+j] = float64(sum)*float64(xs)*float64(ws[j]) + float64(bias.F32[j])
		}
	}
	worst := func(v []float32) float64 {
		var e float64
		for i, x := range exact {
			e = max(e, math.Abs(float64(v[i])-x)/(1+math.Abs(x)))
		}
		return e
	}
	ez, eo := worst(got["y"].F32), worst(want["y"].F32)
	machine := int8Machine()
	t.Logf("%s; largest error against float64 of the quantized arithmetic: zoo %.2g, ONNX Runtime %s %.2g", machine, ez, rt.Version, eo)
	if ez > 1e-6 {
		t.Errorf("zoo's int8 layer is %.2g from the exact quantized arithmetic, want ≤ 1e-6", ez)
	}
	switch {
	case xcpu.X86.HasAVX512VNNI || xcpu.X86.HasAVXVNNI:
		if eo > 1e-6 {
			t.Errorf("ONNX Runtime with VNNI is %.2g from the exact quantized arithmetic, want ≤ 1e-6", eo)
		}
	case eo > 1e-6:
		t.Logf("ONNX Runtime differs from ONNX's definition here (int16 saturation of its u8s8 kernels), zoo does not")
	}
}

// int8Machine names this test's machine case.
func int8Machine() string {
	switch {
	case xcpu.X86.HasAVX512VNNI || xcpu.X86.HasAVXVNNI:
		return "x86 with VNNI (ONNX Runtime's u8s8 sums exact)"
	case xcpu.X86.HasAVX2:
		return "x86 without VNNI (ONNX Runtime's u8s8 sums saturate in int16)"
	}
	return "not x86"
}

// TestInt8FixturesMatchORT runs every quantized fixture of testdata/int8 (gen_int8.py) on
// zoo (its quantized layers compiled onto the int8 kernels) and on ONNX Runtime. The dynamic
// and QLinearMatMul forms agree to float32 rounding where ONNX Runtime's u8s8 sums are exact
// (VNNI); the QDQ forms, which ONNX Runtime rewrites into its own integer kernels, to within
// one quantization step of the second layer's input (a value on a rounding boundary may land
// on either side).
func TestInt8FixturesMatchORT(t *testing.T) {
	rt, err := ort.Open()
	if errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found: set %s or install it (%v)", ort.LibraryEnv, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(42))
	for _, c := range []struct {
		file, kind string
		shape      []int
		tol        float64
	}{
		{"dyn_tensor", "int8-dynamic", []int{2, 19, 16}, 1e-6}, {"dyn_channel", "int8-dynamic", []int{2, 19, 16}, 1e-6},
		{"dyn_u8w", "int8-dynamic", []int{2, 19, 16}, 1e-6}, {"qlinear", "int8-qlinear", []int{2, 19, 16}, 1e-6},
		{"qdq_matmul", "int8-qdq", []int{2, 19, 16}, 0.05}, {"qdq_gemm", "int8-qdq", []int{37, 16}, 0.05},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "int8", c.file+".onnx")
			g, err := onnx.ImportFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if n := p.(*cpu.Program).Fusions()[c.kind]; n != 2 {
				t.Fatalf("fusions %v: want 2 %s", p.(*cpu.Program).Fusions(), c.kind)
			}
			x := &tensor.Tensor{DType: tensor.Float32, Shape: c.shape, F32: make([]float32, graph.NumElements(c.shape))}
			for i := range x.F32 {
				x.F32[i] = float32(rng.NormFloat64())
			}
			feeds := map[string]*tensor.Tensor{"x": x}
			got, err := p.Run(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := rt.NewSession(data, ort.SessionOptions{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want, err := s.Run(feeds, []string{"y"})
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i, w := range want["y"].F32 {
				worst = max(worst, math.Abs(float64(got["y"].F32[i]-w))/(1+math.Abs(float64(w))))
			}
			t.Logf("%s: largest difference from ONNX Runtime %.2g (%s)", c.kind, worst, int8Machine())
			if vnni := xcpu.X86.HasAVX512VNNI || xcpu.X86.HasAVXVNNI; worst > c.tol && (vnni || c.kind == "int8-qdq") {
				t.Errorf("zoo differs from ONNX Runtime by %.2g, want ≤ %g", worst, c.tol)
			}
		})
	}
}
