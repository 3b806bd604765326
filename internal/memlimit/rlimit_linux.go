//go:build linux

package memlimit

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// addressSpace returns the room left under the process's address-space limit (ulimit -v,
// RLIMIT_AS) above its current virtual size (VmSize), or nil when there is no limit. Past it
// an allocation fails and the Go runtime dies with a stack dump instead of an error.
func addressSpace() *Info {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur > 1<<62 {
		return nil
	}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return nil
			}
			return &Info{Available: max(int64(lim.Cur)-kb<<10, 0), Source: "ulimit -v (RLIMIT_AS) " + Bytes(int64(lim.Cur))}
		}
	}
	return nil
}
