//go:build !amd64 || purego

package gemm

// Other architectures (and the purego tag) have no int8 kernels: products with int8
// operands run in Go (Int8Path "generic").
var int8Kernels []*int8Kernel

// quantizeRowsFast has no vector form here.
func quantizeRowsFast(dst []byte, ldq int, wide bool, qmax int32, a []float32, lda, rows, k, kpad int, alpha float32, rs []float32, rz []int32) bool {
	return false
}

// quantizeDivFast has no vector form here.
func quantizeDivFast(dst []uint8, x []float32, scale float32, z int32) int { return 0 }

// rangeFast has no vector form here.
func rangeFast(x []float32) (lo, hi float32, ok bool) { return 0, 0, false }

func absMaxFast(x []float32) (bits uint32, done int)                               { return 0, 0 }
func absMaxColsFast(acc []uint32, x []float32) int                                 { return 0 }
func quantS8Fast(dst []int8, x []float32, one float32, inv []float32) (int, int32) { return 0, 0 }

func packRows4Fast(q []int8, b []float32, ldb int, inv []float32, sum []int32, n, nr, panelBytes int) int {
	return 0
}

func quantRowWith(d []byte, wide bool, row []float32, kpad int, inv float32, z int32) bool {
	return false
}

func prefetchRows(x []float32, ld, rows, width int) {}
