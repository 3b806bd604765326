package main

import (
	"os"
	"testing"

	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// TestMain lets the test binary serve plugins: the built-in variants when the CLI under test
// re-executes itself (os.Executable is the test binary here) with `__serve-variant NAME`, and
// plugintest's misbehaving plugins when ZOO_PLUGINTEST_MODE is set.
func TestMain(m *testing.M) {
	if maybeServeBuiltin(os.Args) {
		return
	}
	plugintest.MaybeServe()
	os.Exit(m.Run())
}
