package cpu_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
)

// peakChildEnv makes the test binary act as the measured child process.
const peakChildEnv = "ZOO_CPU_PEAK_CHILD"

// TestPeakMemoryLongSequence runs a 1-layer vanilla encoder (d 512, 8 heads, d_ff 2048) at
// batch 1, n = 8192 in a fresh child process and checks that its peak resident memory
// (VmHWM) stays below 1 GB: the fused attention never materialises the 8×8192×8192 score
// tensor (2 GiB on its own), and the buffer pool recycles activations.
func TestPeakMemoryLongSequence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 200 GFLOP model")
	}
	if os.Getenv(peakChildEnv) == "1" {
		peakChild(t)
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc/self/status for VmHWM")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeakMemoryLongSequence$", "-test.v")
	cmd.Env = append(os.Environ(), peakChildEnv+"=1", "GOGC=100")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var kb int64 = -1
	for _, line := range strings.Split(string(out), "\n") {
		if _, v, ok := strings.Cut(line, "PEAK_KB="); ok {
			kb, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if kb < 0 {
		t.Fatalf("child did not report its peak:\n%s", out)
	}
	t.Logf("peak resident memory at n=8192: %.0f MiB", float64(kb)/1024)
	if kb*1024 >= 1e9 {
		t.Fatalf("peak resident memory %d KiB is not below 1 GB", kb)
	}
}

func peakChild(t *testing.T) {
	const n = 8192
	g := vanillaBase(t, map[string]any{"layers": int64(1), "max_len": int64(n)})
	p, err := cpu.Backend{}.Compile(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := p.(*cpu.Program).Fusions(); f["attention"] != 1 {
		t.Fatalf("attention did not fuse: %v", f)
	}
	out, err := p.Run(context.Background(), encoderInputs(1, n))
	if err != nil {
		t.Fatal(err)
	}
	if h := out["hidden"]; h == nil || h.Shape[1] != n {
		t.Fatalf("hidden = %v", h)
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			fmt.Printf("PEAK_KB=%s\n", strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
}
