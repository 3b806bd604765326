//go:build amd64 && !purego

package gemm

// int8Kernels lists the int8 kernel sets in order of preference; int8Active takes the first
// that runs here.
var int8Kernels []*int8Kernel

// quantizeRowsFast quantizes with AVX2 where the CPU has it; it reports whether it did.
func quantizeRowsFast(dst []byte, ldq int, wide bool, a []float32, lda, rows, k, kpad int, alpha float32, rs []float32, rz []int32) bool {
	return false
}
