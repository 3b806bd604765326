//go:build !amd64 || purego

package gemm

// Other architectures (and the purego tag) have no assembly kernels yet: only the pure-Go
// level exists.

var asmKernels []*microKernel

// platformLevels lists the levels in order of preference.
func platformLevels() []*level { return []*level{genericLevel} }

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
