package cpu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/internal/pairtime"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// vanillaBase builds the seed's base encoder (6 layers, d 512, 8 heads, d_ff 2048, ReLU) with
// the variant's defaults, overridden by set.
func vanillaBase(tb testing.TB, set map[string]any) *graph.Graph {
	tb.Helper()
	v := vanilla.New()
	cfg, err := variant.Resolve(v.Describe(), set)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// encoderInputs returns tokens and an all-valid key-padding mask of shape (batch, n).
func encoderInputs(batch, n int) map[string]*tensor.Tensor {
	ids := make([]int64, batch*n)
	for i := range ids {
		ids[i] = int64('a'+i%26) + 1
	}
	tokens, _ := tensor.FromInt64(ids, batch, n)
	mask, _ := tensor.FromBool(make([]bool, batch*n), batch, n)
	return map[string]*tensor.Tensor{variant.InputTokens: tokens, variant.InputKeyPadding: mask}
}

// BenchmarkVanillaVsORT runs the vanilla base encoder on this backend (fused and unfused)
// and on ONNX Runtime (zoo's own export of the same graph), all with 2 threads, in one
// process so the ratios come from the same run on the same (noisy, shared) machine. Each
// sub-benchmark reports tokens/s and GFLOP/s (graph.Cost FLOPs over wall time); the
// "paired" one alternates zoo and ORT run by run and reports both medians and the median
// of the per-pair speed ratios, the figure to quote on a shared machine, where the
// neighbours' load drifts between consecutive sub-benchmarks by more than the difference
// being measured. ORT is skipped when its library is not installed (see package onnx/ort).
//
//	go test ./backends/cpu -run '^$' -bench 'VanillaVsORT/.*/.*/paired' -benchtime 20x -short
func BenchmarkVanillaVsORT(b *testing.B) {
	g := vanillaBase(b, nil)
	const threads = 2
	fused, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads})
	if err != nil {
		b.Fatal(err)
	}
	defer fused.Close()
	unfused, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads, NoFusion: true})
	if err != nil {
		b.Fatal(err)
	}
	defer unfused.Close()
	var sess *ort.Session
	if rt, err := ort.Open(); err == nil {
		data, err := onnx.Export(g, onnx.ExportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if sess, err = rt.NewSession(data, ort.SessionOptions{Threads: threads}); err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
	} else {
		b.Logf("ONNX Runtime unavailable, its sub-benchmarks are skipped: %v", err)
	}
	shapes := []struct{ batch, n int }{{1, 128}, {1, 512}, {8, 128}}
	for _, sh := range shapes {
		in := encoderInputs(sh.batch, sh.n)
		cost, err := g.Cost(map[string][]int{variant.InputTokens: {sh.batch, sh.n}, variant.InputKeyPadding: {sh.batch, sh.n}})
		if err != nil {
			b.Fatal(err)
		}
		runners := []struct {
			name string
			run  func() error
		}{
			{"zoo", func() error { _, err := fused.Run(context.Background(), in); return err }},
			{"zoo-nofusion", func() error { _, err := unfused.Run(context.Background(), in); return err }},
			{"ort", func() error {
				if sess == nil {
					return nil
				}
				_, err := sess.Run(in, nil)
				return err
			}},
		}
		b.Run(fmt.Sprintf("b=%d/n=%d/paired", sh.batch, sh.n), func(b *testing.B) {
			if sess == nil {
				b.Skip("ONNX Runtime unavailable")
			}
			benchPaired(b, runners[0].run, runners[2].run)
		})
		for _, r := range runners {
			b.Run(fmt.Sprintf("b=%d/n=%d/%s", sh.batch, sh.n, r.name), func(b *testing.B) {
				if r.name == "ort" && sess == nil {
					b.Skip("ONNX Runtime unavailable")
				}
				if os.Getenv("ZOO_BENCH_NOFUSION") == "" && r.name == "zoo-nofusion" && testing.Short() {
					b.Skip("short")
				}
				if err := r.run(); err != nil { // warm-up: first-run allocations, page faults
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if err := r.run(); err != nil {
						b.Fatal(err)
					}
				}
				sec := time.Since(start).Seconds()
				b.ReportMetric(float64(sh.batch*sh.n)*float64(b.N)/sec, "tokens/s")
				b.ReportMetric(float64(cost.FLOPs)*float64(b.N)/sec/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkTorchExportVsORT runs PyTorch's own base encoder, exported to ONNX by PyTorch,
// on this backend and on ONNX Runtime (2 threads each, paired as in BenchmarkVanillaVsORT):
// how fast zoo runs a graph it did not build. The files are made by
// scripts/torch_encoder_export.py; the benchmark skips unless ZOO_TORCH_EXPORTS names their
// folder.
//
//	/usr/bin/python3 scripts/torch_encoder_export.py /tmp/torch-exports
//	ZOO_TORCH_EXPORTS=/tmp/torch-exports go test ./backends/cpu -run '^$' -bench TorchExportVsORT -benchtime 20x
func BenchmarkTorchExportVsORT(b *testing.B) {
	dir := os.Getenv("ZOO_TORCH_EXPORTS")
	if dir == "" {
		b.Skip("ZOO_TORCH_EXPORTS is not set (see scripts/torch_encoder_export.py)")
	}
	rt, err := ort.Open()
	if err != nil {
		b.Skipf("ONNX Runtime unavailable: %v", err)
	}
	const threads = 2
	for _, opset := range []int{14, 17} {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("torch_base_op%d.onnx", opset)))
		if err != nil {
			b.Fatal(err)
		}
		g, err := onnx.Import(data)
		if err != nil {
			b.Fatal(err)
		}
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads})
		if err != nil {
			b.Fatal(err)
		}
		sess, err := rt.NewSession(data, ort.SessionOptions{Threads: threads})
		if err != nil {
			b.Fatal(err)
		}
		for _, sh := range []struct{ batch, n int }{{1, 128}, {1, 512}, {8, 128}} {
			src, _ := tensor.New(tensor.Float32, sh.batch, sh.n, 512)
			for i := range src.F32 {
				src.F32[i] = float32(i%13)/6 - 1
			}
			mask, _ := tensor.New(tensor.Bool, sh.batch, sh.n)
			in := map[string]*tensor.Tensor{"src": src, "src_key_padding_mask": mask}
			b.Run(fmt.Sprintf("op%d/b=%d/n=%d/paired", opset, sh.batch, sh.n), func(b *testing.B) {
				benchPaired(b,
					func() error { _, err := p.Run(context.Background(), in); return err },
					func() error { _, err := sess.Run(in, nil); return err })
			})
		}
		sess.Close()
		p.Close()
	}
}

// benchPaired runs zoo and ref alternately b.N times each (which goes first alternates too,
// each after pairGap of quiet) and reports the median time of each and the median over
// pairs of ref time / zoo time.
func benchPaired(b *testing.B, zoo, ref func() error) {
	for _, f := range []func() error{zoo, ref} { // warm-up
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	r, err := pairtime.Interleave(context.Background(), zoo, ref, b.N, pairGap, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(pairtime.Median(r.A), "zoo-ms")
	b.ReportMetric(pairtime.Median(r.B), "ort-ms")
	b.ReportMetric(r.Ratio, "speedup")
}

// pairGap is the idle time before each run of benchPaired: both runtimes keep their workers
// spinning for a while after a run (zoo for 2 ms), and the other must not pay for it.
const pairGap = 20 * time.Millisecond
