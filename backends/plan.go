package backends

// LastUses returns, for each of nslots value slots, the index of the last of nsteps steps
// that reads or writes it, or -1 when no step does; io(i) gives step i's input and output
// slots (negative entries: an omitted value). Backends use it to release each intermediate
// buffer right after its last consumer. A slot out of range panics (a compiler bug).
func LastUses(nslots, nsteps int, io func(step int) (in, out []int)) []int {
	last := make([]int, nslots)
	for i := range last {
		last[i] = -1
	}
	for i := 0; i < nsteps; i++ {
		in, out := io(i)
		for _, s := range out {
			if s >= 0 {
				last[s] = i
			}
		}
		for _, s := range in {
			if s >= 0 {
				last[s] = i
			}
		}
	}
	return last
}
