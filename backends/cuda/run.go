//go:build cgo && linux

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// run is the state of one Program.Run.
type run struct {
	p     *Program
	temps []*dbuf
	// bf16Acts holds the bf16 copies of activations that bf16 matrix products have read,
	// by source buffer; a copy goes back to the pool with its source (releaseBuf).
	bf16Acts map[*dbuf]bf16Copy
}

// alloc returns a new device tensor from the pool, owned by the caller (one reference).
func (r *run) alloc(shape []int) (*dtensor, error) {
	b, err := r.p.pool.get(4 * graph.NumElements(shape))
	if err != nil {
		return nil, err
	}
	return &dtensor{buf: b, shape: append([]int(nil), shape...)}, nil
}

// temp registers b for release after the current step.
func (r *run) temp(b *dbuf) { r.temps = append(r.temps, b) }

func (r *run) releaseTemps() {
	for _, b := range r.temps {
		r.releaseBuf(b)
	}
	r.temps = r.temps[:0]
}

func (r *run) releaseBuf(b *dbuf) {
	if b == nil || b.const_ {
		return
	}
	b.refs--
	if b.refs == 0 {
		if c, ok := r.bf16Acts[b]; ok {
			delete(r.bf16Acts, b)
			r.releaseBuf(c.buf)
		}
		r.p.pool.put(b)
	}
}

// releaseBF16 returns every activation's bf16 copy still held to the pool (the end of a run).
func (r *run) releaseBF16() {
	for b, c := range r.bf16Acts {
		delete(r.bf16Acts, b)
		r.releaseBuf(c.buf)
	}
}

// release drops v's reference to its device buffer.
func (r *run) release(v value) {
	if v.dev != nil {
		r.releaseBuf(v.dev.buf)
	}
}

// view returns a tensor sharing t's buffer with a new shape (one more reference).
func (r *run) view(t *dtensor, shape []int) *dtensor {
	if !t.buf.const_ {
		t.buf.refs++
	}
	return &dtensor{buf: t.buf, shape: shape}
}

// uploadBytes copies raw bytes into a new device buffer through the pinned arena.
func (r *run) uploadBytes(src unsafe.Pointer, n int) (*dbuf, error) {
	b, err := r.p.pool.get(n)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return b, nil
	}
	dst, err := r.p.stage.alloc(n)
	if err != nil {
		r.releaseBuf(b)
		return nil, err
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
	if err := cuCopyHtoDAsync(b.ptr, dst, n, r.p.stream); err != nil {
		r.releaseBuf(b)
		return nil, err
	}
	return b, nil
}

// upload copies a float32 host tensor to a new device tensor (one reference).
func (r *run) upload(t *tensor.Tensor) (*dtensor, error) {
	var src unsafe.Pointer
	if len(t.F32) > 0 {
		src = unsafe.Pointer(&t.F32[0])
	}
	b, err := r.uploadBytes(src, 4*len(t.F32))
	if err != nil {
		return nil, err
	}
	return &dtensor{buf: b, shape: append([]int(nil), t.Shape...)}, nil
}

// download copies a device tensor to the host (synchronising the stream).
func (r *run) download(t *dtensor) (*tensor.Tensor, error) {
	out, err := tensor.New(tensor.Float32, t.shape...)
	if err != nil {
		return nil, err
	}
	n := 4 * t.n()
	if n == 0 {
		return out, nil
	}
	dst, err := r.p.stage.alloc(n)
	if err != nil {
		return nil, err
	}
	if err := cuCopyDtoHAsync(dst, t.buf.ptr, n, r.p.stream); err != nil {
		return nil, err
	}
	if err := cuSync(r.p.stream); err != nil {
		return nil, err
	}
	copy(out.F32, unsafe.Slice((*float32)(dst), len(out.F32)))
	return out, nil
}

// dev returns v as a device float tensor: device values as they are, host float values
// uploaded (released after the step), and host int64 values converted when intOK is set
// (Pow's exponent). Anything else is a dtype error naming the input.
func (r *run) dev(v value, i int, intOK bool) (*dtensor, error) {
	if v.dev != nil {
		return v.dev, nil
	}
	t := v.host
	if t == nil {
		return nil, fmt.Errorf("input %d is missing", i)
	}
	switch {
	case t.DType == tensor.Float32:
	case intOK && (t.DType == tensor.Int64 || t.DType == tensor.Int32):
		f := make([]float32, len(t.I64))
		for j, x := range t.I64 {
			f[j] = float32(x)
		}
		t = &tensor.Tensor{DType: tensor.Float32, Shape: t.Shape, F32: f}
	default:
		return nil, fmt.Errorf("input %d has dtype %v; the CUDA kernels of this op take float32", i, t.DType)
	}
	d, err := r.upload(t)
	if err != nil {
		return nil, err
	}
	r.temp(d.buf)
	return d, nil
}

// kargs packs kernel parameters in their C layout.
type kargs struct {
	buf  []byte
	offs []int32
}

func (a *kargs) put(align int, b []byte) *kargs {
	for len(a.buf)%align != 0 {
		a.buf = append(a.buf, 0)
	}
	a.offs = append(a.offs, int32(len(a.buf)))
	a.buf = append(a.buf, b...)
	return a
}

func (a *kargs) ptr(p uint64) *kargs { return a.i64(int64(p)) }
func (a *kargs) i64(v int64) *kargs {
	return a.put(8, binary.LittleEndian.AppendUint64(nil, uint64(v)))
}
func (a *kargs) i32(v int) *kargs {
	return a.put(4, binary.LittleEndian.AppendUint32(nil, uint32(int32(v))))
}
func (a *kargs) f32(v float32) *kargs {
	return a.put(4, binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
}
func (a *kargs) desc(d desc) (*kargs, error) {
	b, err := d.pack()
	if err != nil {
		return a, err
	}
	return a.put(8, b), nil
}

// launch runs kernel name over n work items (grid-stride kernels) or over rows blocks
// (one block per row) on the program's stream.
func (r *run) launch(name string, grid, block int, a *kargs) error {
	f, ok := r.p.d.fns[name]
	if !ok {
		return fmt.Errorf("kernel %s is not loaded", name)
	}
	if grid <= 0 {
		return nil
	}
	return cuLaunch(f, name, grid, block, 0, r.p.stream, a.buf, a.offs)
}

// gridFor returns the grid of a grid-stride kernel over n items with 256-thread blocks.
func gridFor(n int) int {
	g := (n + 255) / 256
	return min(g, 1<<20)
}
