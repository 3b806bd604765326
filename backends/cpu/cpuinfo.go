package cpu

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
)

var cpuModel = sync.OnceValue(func() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	if m := parseCPUModel(f); m != "" {
		return m
	}
	return runtime.GOARCH
})

// CPUModel returns the processor's model name as /proc/cpuinfo gives it ("model name" on
// x86, "Model" or "cpu model" elsewhere), with runs of spaces collapsed, or runtime.GOARCH
// where there is no such file or line. It reads the file once per process.
func CPUModel() string { return cpuModel() }

// parseCPUModel returns the first model-name value of a /proc/cpuinfo listing, or "".
func parseCPUModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "model name", "Model", "cpu model":
			if v := strings.Join(strings.Fields(val), " "); v != "" {
				return v
			}
		}
	}
	return ""
}
