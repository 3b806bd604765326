//go:build !amd64 || purego

package kernels

// Other architectures (and the purego tag) have no assembly kernels yet: only the pure-Go
// level exists.

var asmKernels []*microKernel

// platformLevels lists the levels in order of preference.
func platformLevels() []*level { return []*level{genericLevel} }
