//go:build !amd64 || purego

package gemm

import "runtime"

// Other architectures (and the purego tag) have no assembly kernels yet: only the pure-Go
// level exists.

var asmKernels []*microKernel

// platformLevels lists the levels in order of preference.
func platformLevels() []*level { return []*level{genericLevel} }

// transposeFast has no vector code here: Transpose runs transposeGo.
func transposeFast(dst, src []float32, rows, cols, lds, ldd int) (fr, fc int) { return 0, 0 }

// packBTransFast has no fast path here; packB falls back to its Go loop.
func packBTransFast(panel, b []float32, off, ldb, kcb, nr int) bool { return false }

// packAFast has no fast path here; packA falls back to its Go loop.
func packAFast(panel, a []float32, off, lda, kcb, mr, mrb int, alpha float32) bool {
	return false
}

// prefetchL2 is a no-op here.
func prefetchL2(p *float32, lines int) {}

// packBRowsFast has no fast path here; packB falls back to its Go loop.
func packBRowsFast(dst, b []float32, ldb, pc, jc, kcb, pieces, nr int) bool { return false }

// bf16Kernel is nil: only the pure-Go bf16 twin exists here.
var bf16Kernel *microKernel

// cvtBF16Fast has no fast path here; the caller rounds in Go.
func cvtBF16Fast(dst []uint16, src []float32) bool { return false }

// bf16Unavailable says why there is no bf16 kernel.
func bf16Unavailable() string {
	return "this build has no bf16 kernels (they are amd64 assembly; GOARCH " + runtime.GOARCH + " or the purego tag)"
}
