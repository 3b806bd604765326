package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/zoo-dev/zoo/internal/hostile"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// asZooEnv, set to 1, makes the test binary run as zoo itself (main's code path: run on
// os.Args), so that tests can signal and time a real zoo process without building one.
const asZooEnv = "ZOOTEST_AS_ZOO"

// peakFileEnv names a file into which this test binary, run as zoo, writes its peak resident
// memory in bytes (VmHWM) when zoo returns: its own, unlike the rusage of a child, which also
// counts the memory of the test process that started it (Linux keeps the larger across exec).
const peakFileEnv = "ZOOTEST_PEAK_FILE"

// TestMain lets the test binary serve plugins: the built-in variants when the CLI under test
// re-executes itself (os.Executable is the test binary here) with `__serve-variant NAME`, and
// plugintest's misbehaving plugins when ZOO_PLUGINTEST_MODE is set; and be zoo (asZooEnv).
// The tests get a cache directory of their own (the Describe cache lives there).
func TestMain(m *testing.M) {
	if maybeServeBuiltin(os.Args) {
		return
	}
	plugintest.MaybeServe()
	if os.Getenv(asZooEnv) == "1" {
		code := run(os.Args, os.Stdout, os.Stderr)
		if f := os.Getenv(peakFileEnv); f != "" {
			peak, err := hostile.PeakRSS()
			if err != nil {
				fmt.Fprintln(os.Stderr, "zootest:", err)
			}
			_ = os.WriteFile(f, []byte(strconv.FormatInt(peak, 10)), 0o644)
		}
		os.Exit(code)
	}
	cache, err := os.MkdirTemp("", "zoo-test-cache-")
	if err == nil {
		os.Setenv("XDG_CACHE_HOME", cache)
	}
	code := m.Run()
	if err == nil {
		os.RemoveAll(cache)
	}
	os.Exit(code)
}
