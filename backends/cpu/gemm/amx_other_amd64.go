//go:build !linux && amd64 && !purego

package gemm

// amxRefusal says why the AMX kernels stay off on this OS: only Linux's way of granting the
// tile state (arch_prctl) is implemented, and the tiles must not be used without it.
func amxRefusal() string {
	return "the AMX kernels run on Linux only (the OS must grant the tile state)"
}
