//go:build !linux

package plugin

// becomeSubreaper is Linux-only: elsewhere a plugin's process group is what zoo kills.
func becomeSubreaper() error { return nil }

// killPlugin kills nothing beyond the process group (killGroup) outside Linux.
func killPlugin(int, bool, string) []int { return nil }
