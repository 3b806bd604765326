//go:build amd64 && !purego

package gemm

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// Linux keeps the AMX tile data (8 KiB of state a thread) off until a process asks for it:
// the first tile instruction of a process that did not ask faults. arch_prctl's
// ARCH_REQ_XCOMP_PERM asks for the XTILEDATA component (18) for the whole process, once,
// and ARCH_GET_XCOMP_PERM says what was granted.
const (
	archGetXcompPerm = 0x1022
	archReqXcompPerm = 0x1023
	xfeatureTileData = 18
)

// amxRefusal asks Linux once for the tile data and returns why it was not granted ("" when
// it was): a kernel before 5.16, or one that refuses (a signal stack too small for the
// larger signal frame is one reason it gives).
var amxRefusal = sync.OnceValue(func() string {
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureTileData, 0); e != 0 {
		return fmt.Sprintf("Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %v)", e)
	}
	var mask uint64
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archGetXcompPerm, uintptr(unsafe.Pointer(&mask)), 0); e != 0 || mask&(1<<xfeatureTileData) == 0 {
		return fmt.Sprintf("Linux did not grant the AMX tile state (arch_prctl ARCH_GET_XCOMP_PERM: %#x, %v)", mask, e)
	}
	return ""
})
