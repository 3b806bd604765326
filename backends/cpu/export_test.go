package cpu

// LinearCuts exposes linearCuts to the external tests.
var LinearCuts = linearCuts

// LinearTiles returns linearTiles' tiles as {r0, r1, c0, c1, band}.
func LinearTiles(m, n, k, threads int, colsOK bool) [][5]int {
	var out [][5]int
	for _, t := range linearTiles(m, n, k, threads, colsOK) {
		out = append(out, [5]int{t.r0, t.r1, t.c0, t.c1, t.band})
	}
	return out
}

// PoisonBuffers makes p's buffer pool hand out NaN-filled buffers (bufPool.poison).
func PoisonBuffers(p *Program) { p.pool.poison = true }
