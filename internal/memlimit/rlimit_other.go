//go:build !linux

package memlimit

// addressSpace: the address-space limit is read on Linux only.
func addressSpace() *Info { return nil }
