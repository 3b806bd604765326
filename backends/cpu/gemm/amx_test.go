//go:build amd64 && !purego

package gemm

import (
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestInt8PathRefused: a path whose CPU has the instructions but whose OS keeps them off
// (AMX without Linux's leave) does not run, and says why in the OS's words.
func TestInt8PathRefused(t *testing.T) {
	k := &int8Kernel{name: "tiles", fns: []int8Fn{nil}, needs: "X", level: 0,
		hasCPU: func() bool { return true }, refused: func() string { return "the OS said no" }}
	if k.cpuOK() || k.ok() {
		t.Fatal("a refused path runs")
	}
	if why := k.why(); why != "the OS said no (the tiles path)" {
		t.Fatalf("why = %q", why)
	}
	k.refused = func() string { return "" }
	if !k.cpuOK() {
		t.Fatal("a granted path does not run")
	}
}

// TestAMXGranted: on a Linux CPU with AMX-INT8 the tile state is granted (ARCH_REQ_XCOMP_PERM),
// so the amx-int8 path runs at the avx512 level.
func TestAMXGranted(t *testing.T) {
	if !cpu.X86.HasAMXInt8 || !cpuAVX512 {
		t.Skip("this CPU has no AMX-INT8 (or no AVX-512): the amx-int8 path is not for it")
	}
	if why := amxRefusal(); why != "" {
		if !strings.Contains(why, "Linux") && !strings.Contains(why, "only") {
			t.Fatalf("amxRefusal = %q: not a reason", why)
		}
		t.Skipf("the OS keeps AMX off here: %s", why)
	}
	amx := int8Kernels[0]
	if amx.name != "amx-int8" || !amx.cpuOK() {
		t.Fatalf("%s: cpuOK false with the tile state granted: %s", amx.name, amx.why())
	}
}
