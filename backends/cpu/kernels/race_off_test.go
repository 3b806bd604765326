//go:build !race

package kernels

// raceEnabled reports that the race detector is on (see race_on_test.go).
const raceEnabled = false
