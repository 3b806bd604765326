//go:build amd64 && !purego

package simd

import "golang.org/x/sys/cpu"

// available reads the CPU's features. AVX-512F is reported by x/sys/cpu only when the OS
// also saves the zmm and mask state.
func available() []Level {
	var ls []Level
	if cpu.X86.HasAVX512F {
		ls = append(ls, AVX512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ls = append(ls, AVX2)
	}
	return append(ls, Generic)
}
