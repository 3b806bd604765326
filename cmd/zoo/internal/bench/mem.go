package bench

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryDoc says exactly what the memory columns measure (printed in the help and every
// JSON report).
const MemoryDoc = "mem = peak RSS growth: before each row zoo collects garbage, returns free memory to the OS " +
	"(debug.FreeOSMemory), resets the kernel's peak-RSS mark (/proc/self/clear_refs) and reads VmRSS; after the " +
	"warm-up and timed runs it reads VmHWM; mem = VmHWM − VmRSS before. It counts everything the runs touched " +
	"(Go heap including garbage not yet collected, C memory, stacks; the heap is collected before each timed run), not the weights compiled beforehand. " +
	"With --against, each runtime's mem is measured the same way over its own warm-up runs (at least one), run alone"

// rssBegin frees what it can, resets the peak-RSS mark and returns the current RSS. It
// reports false where /proc does not allow that (not Linux, or a restricted sandbox).
func rssBegin() (int64, bool) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, false
	}
	rss, _, ok := readRSS()
	return rss, ok
}

// rssGrowth returns the peak RSS growth since rssBegin returned base, or nil when it
// cannot be measured.
func rssGrowth(base int64, ok bool) *int64 {
	if !ok {
		return nil
	}
	_, hwm, ok := readRSS()
	if !ok {
		return nil
	}
	g := max(hwm-base, 0)
	return &g
}

// readRSS returns VmRSS and VmHWM from /proc/self/status, in bytes.
func readRSS() (rss, hwm int64, ok bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads VmRSS and VmHWM from a /proc/PID/status listing, in bytes, and reports
// whether it found both.
func parseStatus(r io.Reader) (rss, hwm int64, ok bool) {
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, cut := strings.Cut(sc.Text(), ":")
		if !cut || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
		found++
	}
	return rss, hwm, found == 2
}
