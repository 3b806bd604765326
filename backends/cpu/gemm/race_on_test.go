//go:build race

package gemm

// raceEnabled reports that the race detector is on. It makes sync.Pool drop a random
// share of what is put back, so a steady state without allocations cannot be measured.
const raceEnabled = true
