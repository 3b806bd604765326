//go:build blasbench && cgo

package blasbench

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import "unsafe"

// SetThreads sets OpenBLAS's thread count (its pool is process-wide).
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// CoreName reports the kernel family OpenBLAS selected at load (e.g. "SkylakeX", "Haswell").
func CoreName() string { return C.GoString(C.openblas_get_corename()) }

// Sgemm is cblas_sgemm on row-major operands with kernels.Sgemm's signature. One cgo call
// per GEMM (≈20 ns) is negligible at benchmark sizes.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda), (*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}
