package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve built-in variants when the CLI under test re-executes
// itself (os.Executable is the test binary here) with `__serve-variant NAME`.
func TestMain(m *testing.M) {
	if maybeServeBuiltin(os.Args) {
		return
	}
	os.Exit(m.Run())
}
