package cpu_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// TestInt8Probe checks that Probe reports gemm's int8 path.
func TestInt8Probe(t *testing.T) {
	path, why := gemm.Int8Path()
	if p := (cpu.Backend{}).Probe(); p.Int8 != path || p.Int8Reason != why || p.Int8 == "" {
		t.Errorf("Probe says int8 %q (%q), gemm.Int8Path %q (%q)", p.Int8, p.Int8Reason, path, why)
	}
}

// TestInt8Programs runs every built-in variant (small dimensions, batch 2 with padding) in
// fp32 and int8, fused and unfused, on every int8 path this machine has, and checks that
// int8 really quantized the linear layers (the hidden states differ from fp32, and the
// unfused program still counts its int8 products) and do not depend on the thread count,
// while staying close to fp32: each
// position's cosine similarity at least 0.99 and its largest error under 15 % of its
// largest value; fused and unfused int8 agree as closely. Paths that quantize the weights
// to the same bits (gemm.Int8WeightBits) compute the same results, so every path's hidden
// states equal the first such path's.
func TestInt8Programs(t *testing.T) {
	names, in := smallBuiltins()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			g := smallBuiltin(t, name)
			run := func(opts backends.Options) (*tensor.Tensor, map[string]int) { return runHidden(t, g, opts, in) }
			fp32, _ := run(backends.Options{Threads: 2})
			d := fp32.Shape[len(fp32.Shape)-1]
			first := map[int]*tensor.Tensor{}
			firstPath := map[int]string{}
			for _, path := range gemm.Int8Paths() {
				if err := gemm.SetInt8Path(path); err != nil {
					t.Fatal(err)
				}
				i8, _ := run(backends.Options{Threads: 2, Precision: "int8"})
				one, _ := run(backends.Options{Threads: 1, Precision: "int8"})
				plain, f := run(backends.Options{Threads: 2, Precision: "int8", NoFusion: true})
				if err := gemm.SetInt8Path(""); err != nil {
					t.Fatal(err)
				}
				if same(fp32.F32, i8.F32) {
					t.Fatalf("%s: int8 hidden states equal fp32's bit for bit: nothing was quantized", path)
				}
				if !same(one.F32, i8.F32) {
					// Tiles, and the inputs quantized once for several of them, differ with
					// the thread count; each row is quantized the same way regardless.
					t.Fatalf("%s: int8 hidden states differ between 1 and 2 threads", path)
				}
				if f["matmul"]+f["linear"] == 0 {
					t.Fatalf("%s: the unfused int8 program runs no int8 product: %v", path, f)
				}
				closeTo(t, path+" int8 vs fp32", i8.F32, fp32.F32, d, 0.99, 0.15)
				closeTo(t, path+" int8 unfused vs fused", plain.F32, i8.F32, d, 0.99, 0.15)
				bits := gemm.Int8WeightBits(path)
				if first[bits] == nil {
					first[bits], firstPath[bits] = i8, path
				} else if !same(first[bits].F32, i8.F32) {
					t.Fatalf("int8 path %s gives other bits than %s", path, firstPath[bits])
				}
			}
		})
	}
}

// TestInt8FeatureMaps: an int8-attention program holds performer's random-feature
// projections as int8 (two maps a layer, counted under "int8-feature-map"), an int8 program
// keeps them fp32, and the int8-attention hidden states stay within int8's error of fp32.
func TestInt8FeatureMaps(t *testing.T) {
	g := smallBuiltin(t, "performer")
	_, in := smallBuiltins()
	run := func(prec string) (*tensor.Tensor, map[string]int) {
		return runHidden(t, g, backends.Options{Threads: 2, Precision: prec}, in)
	}
	fp32, _ := run("fp32")
	_, f8 := run("int8")
	qa, fa := run("int8-attention")
	if f8["int8-feature-map"] != 0 || fa["int8-feature-map"] != 4 || fa["random-features"] != 4 {
		t.Fatalf("int8-feature-map: int8 %d, int8-attention %d of %d feature maps; want 0 and 4 of 4", f8["int8-feature-map"], fa["int8-feature-map"], fa["random-features"])
	}
	d := fp32.Shape[len(fp32.Shape)-1]
	closeTo(t, "int8-attention vs fp32", qa.F32, fp32.F32, d, 0.99, 0.15)
}

// runHidden compiles g with opts, runs it on in and returns its hidden states and the
// program's fusion counts.
func runHidden(t *testing.T, g *graph.Graph, opts backends.Options, in map[string]*tensor.Tensor) (*tensor.Tensor, map[string]int) {
	t.Helper()
	p := compileProgram(t, g, opts)
	defer p.Close()
	out, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out["hidden"], p.Fusions()
}

// TestInt8WeightBytes checks that an int8 program holds at most 30 % of the fp32 program's
// weight bytes (the fp32 copies are not kept), on a vanilla encoder of the base width (2
// layers; the token and position tables stay fp32).
func TestInt8WeightBytes(t *testing.T) {
	g := vanillaBase(t, map[string]any{"layers": int64(2), "max_len": int64(128)})
	bytes := map[string]int64{}
	for _, prec := range []string{"fp32", "int8"} {
		p, err := cpu.Backend{}.Compile(g, backends.Options{Precision: prec})
		if err != nil {
			t.Fatal(err)
		}
		bytes[prec] = p.(*cpu.Program).WeightBytes()
		// The program still runs after compile dropped the fp32 weights.
		if _, err := p.Run(context.Background(), encoderInputs(1, 8)); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	ratio := float64(bytes["int8"]) / float64(bytes["fp32"])
	t.Logf("weights: fp32 %d bytes, int8 %d bytes (%.3f)", bytes["fp32"], bytes["int8"], ratio)
	if ratio > 0.30 {
		t.Errorf("the int8 program holds %.2f of fp32's weight bytes, want at most 0.30", ratio)
	}
}

// BenchmarkVanillaInt8 runs the vanilla base encoder (2 threads) in fp32 and int8, and in
// fp32 and int8-attention, paired run by run, and reports both medians and the median of the
// per-pair speed-ups (the goal: at least 3× with AVX512-VNNI, 1.6× on AVX2 alone, at
// batch 8, n = 512).
// Where this CPU has better kernels, it also runs both at the avx2 kernel level on the avx2
// int8 path (sub-benchmarks named avx2/…): the instructions an AVX2-only CPU has, on this
// CPU's cores.
//
//	go test ./backends/cpu -run '^$' -bench VanillaInt8 -benchtime 10x
func BenchmarkVanillaInt8(b *testing.B) {
	g := vanillaBase(b, nil)
	best, _ := gemm.Int8Path()
	configs := [][2]string{{simd.Current().String(), best}}
	if best != "avx2" && slices.Contains(gemm.Int8Paths(), "avx2") {
		configs = append(configs, [2]string{"avx2", "avx2"})
	}
	prev := simd.Current().String()
	defer simd.Set(prev)
	defer gemm.SetInt8Path("")
	for _, c := range configs {
		if err := simd.Set(c[0]); err != nil {
			b.Fatal(err)
		}
		if err := gemm.SetInt8Path(c[1]); err != nil {
			b.Fatal(err)
		}
		for _, prec := range []string{"int8", "int8-attention"} {
			benchPrecision(b, g, prec, c[1]+"/"+prec+"/", [][2]int{{1, 128}, {8, 128}, {8, 512}})
		}
	}
}

// TestInt8SiblingLinears checks that int8 linear layers on one input, run as one step
// (runInt8Siblings: bands of rows quantized a block at a time, every layer's product on
// each block; or the shared quantized rows of shareInt8Rows where the product is cut by
// columns), give each layer's output bit for bit as that layer compiled alone does (its
// own tiles quantizing their own rows), on every int8 path this machine has: one row,
// rows that leave the row block partly filled, tall inputs over several bands and blocks,
// one, two and three threads.
func TestInt8SiblingLinears(t *testing.T) {
	r := rand.New(rand.NewSource(31))
	const k = 72
	type layer struct {
		name string
		w, b *tensor.Tensor
		relu bool
	}
	layers := []layer{{"q", randT(r, k, 64), randT(r, 64), false}, {"k", randT(r, k, 96), randT(r, 96), true}, {"v", randT(r, k, 130), nil, false}}
	build := func(ls []layer) *graph.Graph {
		b := graph.NewBuilder("siblings")
		x := b.Input("x", tensor.Float32, graph.Sym("m"), graph.Fixed(k))
		for _, l := range ls {
			y := b.MatMul(x, b.Const(l.w))
			if l.b != nil {
				y = b.Add(y, b.Const(l.b))
			}
			if l.relu {
				y = b.Relu(y)
			}
			b.Output(l.name, y, tensor.Float32)
		}
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, path := range gemm.Int8Paths() {
		t.Run(path, func(t *testing.T) {
			if err := gemm.SetInt8Path(path); err != nil {
				t.Fatal(err)
			}
			defer gemm.SetInt8Path("")
			for _, threads := range []int{1, 2, 3} {
				opts := backends.Options{Threads: threads, Precision: "int8"}
				all := compileProgram(t, build(layers), opts)
				if fu := all.Fusions(); fu["shared-input"] != 1 {
					t.Fatalf("fusions %v, want one shared-input group", fu)
				}
				alone := make([]*cpu.Program, len(layers))
				for i := range layers {
					alone[i] = compileProgram(t, build(layers[i:i+1]), opts)
				}
				for _, m := range []int{1, 5, 37, 300, 1100} {
					in := map[string]*tensor.Tensor{"x": randT(r, m, k)}
					for i := range layers {
						runBitwise(t, fmt.Sprintf("threads %d, m %d: with its siblings (fused) or alone (unfused)", threads, m), all, alone[i], in)
					}
				}
			}
		})
	}
}

// BenchmarkBuiltinsInt8 runs every built-in variant's base preset (registry.yaml's, seed 0)
// at batch 8, n = 512, 2 threads, in fp32 and int8 and in fp32 and int8-attention, paired
// run by run (benchPrecision), on the int8 path and kernel level in force (ZOO_INT8,
// ZOO_CPU): the speed-ups scripts/int8-bench.sh reports. A pair's two runs meet the same
// moment of a shared machine's load, which drifts by more than the differences measured
// between separate rounds.
//
//	ZOO_INT8=vnni512 go test ./backends/cpu -run '^$' -bench 'BuiltinsInt8/(vanilla|sparse)/' -benchtime 8x
func BenchmarkBuiltinsInt8(b *testing.B) {
	reg, err := registry.LoadFile(filepath.Join("..", "..", "registry.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	names, _ := smallBuiltins()
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			e, _, err := reg.Lookup(name)
			if err != nil {
				b.Fatal(err)
			}
			v := variants.Builtin()[name]
			cfg, err := variant.Resolve(v.Describe(), e.Presets["base"])
			if err != nil {
				b.Fatal(err)
			}
			g, err := v.Build(context.Background(), cfg, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, prec := range []string{"int8", "int8-attention"} {
				benchPrecision(b, g, prec, prec+"/", [][2]int{{8, 512}})
			}
		})
	}
}
