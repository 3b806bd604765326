package cpu

import (
	"math"
	"math/bits"
	"sync"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Activation memory planner.
//
// A Program keeps a free list of float32 buffers in size classes. During a Run, every
// float32 activation a kernel allocates comes from the list when a buffer of its class is
// free, and a buffer goes back to the list when the last slot that refers to it dies (the
// compile-time last-use plan, planFrees). So after the first Run a steady-state Run
// allocates nothing on the heap for activations: the free list converges to the peak live
// set, which is the same memory a static compile-time plan would reserve, without needing
// the shapes at compile time (they are symbolic).
//
// Only buffers the pool handed out are ever recycled: values that alias graph inputs,
// initializers or another slot's storage are reference-counted by storage, and a buffer is
// reused only when no live slot still refers to it. Buffers that leave Run as outputs are
// forgotten (the caller owns them).

// sizeClass rounds n up to a class of the form 2^k or 1.5·2^k (at most 33 % waste), so
// buffers of nearby sizes share a class; tiny buffers are not pooled.
func sizeClass(n int) int {
	if n <= minPooled {
		return 0
	}
	b := bits.Len(uint(n - 1)) // 2^b >= n
	hi := 1 << b
	if mid := hi / 4 * 3; mid >= n {
		return mid
	}
	return hi
}

// minPooled is the smallest buffer (in elements) worth recycling; smaller ones are cheap
// for the allocator and would only crowd the free list.
const minPooled = 1024

// bufPool is a Program's free list plus the bookkeeping of one Run.
type bufPool struct {
	mu    sync.Mutex
	free  map[int][][]float32    // class → free buffers (len == cap == class)
	owned map[*float32][]float32 // first element of every buffer handed out → the whole buffer
	refs  map[*float32]int       // during a Run: live slots per storage key
	bytes int64                  // bytes held in free lists (for tests)
	// poison fills every buffer get hands out with NaN, so a kernel that leaves an element
	// of an unzeroed buffer unwritten shows in its results (set by tests only).
	poison bool
}

func newBufPool() *bufPool {
	return &bufPool{free: map[int][][]float32{}, owned: map[*float32][]float32{}, refs: map[*float32]int{}}
}

// get returns a float32 slice of length n whose contents are unspecified.
func (p *bufPool) get(n int) []float32 {
	c := sizeClass(n)
	if c == 0 {
		return p.poisoned(make([]float32, n))
	}
	p.mu.Lock()
	var buf []float32
	if l := p.free[c]; len(l) > 0 {
		buf = l[len(l)-1]
		p.free[c] = l[:len(l)-1]
		p.bytes -= int64(4 * c)
	}
	if buf == nil {
		buf = make([]float32, c)
	}
	p.owned[&buf[0]] = buf
	p.mu.Unlock()
	return p.poisoned(buf[:n])
}

// poisoned returns buf, NaN-filled when the pool poisons.
func (p *bufPool) poisoned(buf []float32) []float32 {
	if p.poison {
		nan := float32(math.NaN())
		for i := range buf {
			buf[i] = nan
		}
	}
	return buf
}

// retain counts one more live slot referring to t's storage.
func (p *bufPool) retain(t *tensor.Tensor) {
	if t == nil || len(t.F32) == 0 {
		return
	}
	p.refs[&t.F32[0]]++
}

// release drops one live slot referring to t's storage and recycles the buffer when it was
// the last one and the pool owns it.
func (p *bufPool) release(t *tensor.Tensor) {
	if t == nil || len(t.F32) == 0 {
		return
	}
	k := &t.F32[0]
	n := p.refs[k] - 1
	if n > 0 {
		p.refs[k] = n
		return
	}
	delete(p.refs, k)
	p.mu.Lock()
	if buf, ok := p.owned[k]; ok {
		delete(p.owned, k)
		p.free[len(buf)] = append(p.free[len(buf)], buf)
		p.bytes += int64(4 * len(buf))
	}
	p.mu.Unlock()
}

// disown forgets t's storage: it leaves the Program (an output) and must never be reused.
func (p *bufPool) disown(t *tensor.Tensor) {
	if t == nil || len(t.F32) == 0 {
		return
	}
	p.mu.Lock()
	delete(p.owned, &t.F32[0])
	p.mu.Unlock()
}

// endRun drops the per-run bookkeeping. Buffers still live (outputs, or every value when a
// Run failed) are forgotten rather than recycled, because the caller may hold them.
func (p *bufPool) endRun() {
	p.mu.Lock()
	clear(p.refs)
	clear(p.owned)
	p.mu.Unlock()
}

// alloc returns a zero-filled tensor; float32 tensors come from the run's buffer pool when
// there is one.
func (e *exec) alloc(dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	if e.pool == nil || dt != tensor.Float32 {
		return alloc(dt, shape)
	}
	t, err := e.allocRaw(shape)
	if err != nil {
		return nil, err
	}
	clear(t.F32)
	return t, nil
}

// allocOverwrite returns a tensor for a kernel that writes every element: float32 storage
// comes from the run's pool unzeroed (allocRaw), since zeroing a buffer about to be
// overwritten cost as much as a head split's copy itself; other dtypes are zeroed as alloc's.
func (e *exec) allocOverwrite(dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	if dt == tensor.Float32 {
		return e.allocRaw(shape)
	}
	return e.alloc(dt, shape)
}

// allocRaw returns a float32 tensor whose contents are unspecified; the caller must write
// every element.
func (e *exec) allocRaw(shape []int) (*tensor.Tensor, error) {
	if e.pool == nil {
		return alloc(tensor.Float32, shape)
	}
	for _, d := range shape {
		if d < 0 {
			return alloc(tensor.Float32, shape) // let tensor.New report the bad shape
		}
	}
	n := graph.NumElements(shape)
	return &tensor.Tensor{DType: tensor.Float32, Shape: append([]int(nil), shape...), F32: e.pool.get(n)}, nil
}
