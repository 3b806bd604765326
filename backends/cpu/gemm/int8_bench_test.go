package gemm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/internal/pairtime"
)

// int8BenchShapes are an encoder's products at batch 8 × n 512 tokens (m = 4096): the
// d 768 projections, the FFN's input (n 3072) and its output (k 3072).
var int8BenchShapes = [][3]int{{4096, 768, 768}, {4096, 3072, 768}, {4096, 768, 3072}, {4096, 512, 512}, {4096, 2048, 512}, {4096, 512, 2048}}

// BenchmarkInt8 runs the int8 product (SgemmPacked with a PackBInt8 operand, quantizing A
// per call) against the fp32 one (SgemmPacked with a PackB operand) on one goroutine,
// paired call by call, on every int8 path this machine has, each against fp32 at the
// kernel level of the path (vnni512 against avx512, avx-vnni and avx2 against avx2,
// generic against generic), and reports both medians, the int8 rate (2·m·n·k per call,
// GOP/s) and the median of the per-pair speed-ups of int8. Inputs are gaussian. The
// issue's goal: at least 3× with AVX512-VNNI.
//
//	go test ./backends/cpu/gemm -run '^$' -bench Int8 -benchtime 10x
func BenchmarkInt8(b *testing.B) {
	paths := Int8Paths()
	for _, path := range paths {
		for _, s := range int8BenchShapes {
			b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", path, s[0], s[1], s[2]), func(b *testing.B) {
				benchInt8(b, path, s[0], s[1], s[2])
			})
		}
	}
}

func benchInt8(b *testing.B, path string, m, n, k int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rng := rand.New(rand.NewPCG(1, 1))
	rnd := func(n int, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * sd)
		}
		return x
	}
	a, w, c := rnd(m*k, 1), rnd(k*n, 0.05), make([]float32, m*n)
	lv := map[string]string{"amx-int8": "avx512", "vnni512": "avx512", "avx-vnni": "avx2", "avx2": "avx2", "generic": "generic"}[path]
	var pf *PackedB
	withLevel(b, lv, func() { pf = PackB(false, k, n, w, n) })
	var pi *PackedB
	withInt8Path(b, path, func() { pi = PackBInt8(false, k, n, w, n) })
	i8 := func() error { SgemmPacked(m, n, k, 1, a, k, pi, 0, c, n); return nil }
	f32 := func() error { SgemmPacked(m, n, k, 1, a, k, pf, 0, c, n); return nil }
	_, _ = i8(), f32()
	b.ResetTimer()
	r, err := pairtime.Interleave(context.Background(), i8, f32, b.N, 5*time.Millisecond, nil)
	if err != nil {
		b.Fatal(err)
	}
	med := pairtime.Median(r.A)
	b.ReportMetric(med, "int8-ms")
	b.ReportMetric(pairtime.Median(r.B), "fp32-ms")
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)/med/1e6, "int8-GOP/s")
	b.ReportMetric(r.Ratio, "speedup")
}

// BenchmarkInt8Quantize measures the row quantization alone (m = 128 rows of k 768, in
// L2 as a tile's rows are), the part of an int8 product that does not scale with n: in ns
// per row.
func BenchmarkInt8Quantize(b *testing.B) {
	const m, k = 128, 768
	rng := rand.New(rand.NewPCG(1, 2))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for _, kern := range append([]*int8Kernel{nil}, int8KernelSets()...) {
		if kern != nil && !kern.cpuOK() {
			continue
		}
		name := "generic"
		if kern != nil {
			name = kern.name
		}
		ldq, kpad, _ := int8Blocking(kern, k)
		dst := make([]byte, m*ldq)
		rs, rz := make([]float32, m), make([]int32, m)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				quantizeRows(kern, dst, ldq, a, k, m, k, kpad, 1, rs, rz)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/m, "ns/row")
		})
	}
}

// BenchmarkInt8MicroKernel measures each int8 micro-kernel alone on L1-resident panels (kg
// = 64 steps, a k of 256 for VPDPBUSD), beside the fp32 12×32 kernel (kc = 256): the
// ceilings of the drivers. cpu-GFLOP/s (the thread's CPU time) is the figure to read on a
// loaded machine.
//
//	go test ./backends/cpu/gemm -run '^$' -bench Int8MicroKernel
func BenchmarkInt8MicroKernel(b *testing.B) {
	for _, kern := range int8KernelSets() {
		if !kern.cpuOK() {
			continue
		}
		b.Run(kern.name, func(b *testing.B) {
			const kg = 64
			k := kg * kern.group
			a := make([]byte, kern.mr*4*kg)
			bb := make([]int8, kg*kern.nr*kern.group)
			c := make([]float32, kern.mr*kern.nr)
			rs, rz := make([]float32, kern.mr), make([]int32, kern.mr)
			cs, csum := make([]float32, kern.nr), make([]int32, kern.nr)
			measure(b, 2*float64(k*kern.mr*kern.nr), true, func() {
				kern.fns[kern.mr-1](kg, &a[0], &bb[0], &c[0], kern.nr, int8Store, 0, 4*kg, &rs[0], &rz[0], &cs[0], &csum[0], &cs[0])
			})
		})
	}
	for _, kern := range asmKernels[:1] {
		if !kern.ok() {
			continue
		}
		b.Run(kern.name, func(b *testing.B) {
			const kc = 256
			a := make([]float32, kc*kern.mr)
			bb := make([]float32, kc*kern.nr)
			c := make([]float32, kern.mr*kern.nr)
			measure(b, 2*float64(kc*kern.mr*kern.nr), true, func() {
				kern.fn(kc, &a[0], &bb[0], &c[0], kern.nr, 1, 1)
			})
		})
	}
}
