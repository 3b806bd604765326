// Package kernels holds the CPU backend's numeric kernels. Every kernel has a pure-Go
// reference twin (the *Generic functions) that documents it and serves as the test oracle
// for the SIMD versions chosen at start-up.
package kernels

// SgemmGeneric computes C = alpha·op(A)·op(B) + beta·C for row-major float32 matrices, where
// op(A) is m×k (A is k×m when transA), op(B) is k×n (B is n×k when transB), and lda, ldb, ldc
// are row strides in elements. When beta is 0, C is overwritten without being read (so NaNs
// in C do not propagate), as in BLAS.
func SgemmGeneric(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		crow := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(crow)
		} else if beta != 1 {
			for j := range crow {
				crow[j] *= beta
			}
		}
		for p := 0; p < k; p++ {
			var av float32
			if transA {
				av = a[p*lda+i]
			} else {
				av = a[i*lda+p]
			}
			av *= alpha
			if transB {
				for j := 0; j < n; j++ {
					crow[j] += av * b[j*ldb+p]
				}
			} else {
				brow := b[p*ldb : p*ldb+n]
				for j, bv := range brow {
					crow[j] += av * bv
				}
			}
		}
	}
}

// Sgemm is the entry point the backend calls; it dispatches to the best kernel level.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	SgemmGeneric(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Level names the kernel level in use ("generic" until SIMD kernels are selected).
func Level() string { return "generic" }
