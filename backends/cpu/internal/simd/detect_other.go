//go:build !amd64 || purego

package simd

// available: other architectures (and the purego tag) have only the pure-Go kernels.
func available() []Level { return []Level{Generic} }
