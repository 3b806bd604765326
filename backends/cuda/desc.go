package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// maxDims is the most dimensions a Desc holds (ZMAXD in kernels.cu).
const maxDims = 8

// desc mirrors struct Desc in kernels.cu: an iteration shape and, for up to three operands,
// the element stride of each dimension.
type desc struct {
	shape []int64
	st    [3][]int64
}

// descBytes is sizeof(struct Desc): nd, shape[8], st[3][8], all 64-bit.
const descBytes = 8 * (1 + maxDims + 3*maxDims)

// pack encodes d in the C layout (little-endian, as on every CUDA host).
func (d desc) pack() ([]byte, error) {
	if len(d.shape) > maxDims {
		return nil, fmt.Errorf("%d dimensions after merging, the kernels handle at most %d", len(d.shape), maxDims)
	}
	b := make([]byte, descBytes)
	put := func(i int, v int64) { binary.LittleEndian.PutUint64(b[8*i:], uint64(v)) }
	put(0, int64(len(d.shape)))
	for i, n := range d.shape {
		put(1+i, n)
		for k := 0; k < 3; k++ {
			if k < len(d.st) && i < len(d.st[k]) {
				put(1+maxDims+k*maxDims+i, d.st[k][i])
			}
		}
	}
	return b, nil
}

// contiguous returns the row-major element strides of shape.
func contiguous(shape []int) []int64 {
	st := make([]int64, len(shape))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= int64(shape[i])
	}
	return st
}

// broadcastStrides returns the strides with which a contiguous tensor of shape src is read
// when broadcast to out (0 along broadcast dimensions).
func broadcastStrides(src, out []int) []int64 {
	st := make([]int64, len(out))
	cs := contiguous(src)
	off := len(out) - len(src)
	for i := range src {
		if src[i] != 1 || out[off+i] == 1 {
			st[off+i] = cs[i]
		}
	}
	return st
}

// coalesce merges adjacent dimensions that every operand walks contiguously (and drops
// dimensions of size 1), so most broadcasts reach the kernels with one or two dimensions.
func coalesce(shape []int, strides ...[]int64) desc {
	var d desc
	for i, n := range shape {
		if n == 1 {
			continue
		}
		if k := len(d.shape) - 1; k >= 0 {
			ok := true
			for j, st := range strides {
				if d.st[j][k] != st[i]*int64(n) {
					ok = false
					break
				}
			}
			if ok {
				d.shape[k] *= int64(n)
				for j, st := range strides {
					d.st[j][k] = st[i]
				}
				continue
			}
		}
		d.shape = append(d.shape, int64(n))
		for j, st := range strides {
			d.st[j] = append(d.st[j], st[i])
		}
	}
	return d
}

// int64Bytes returns v's bytes in host order.
func int64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// ptrOf returns the address of b's first byte, or nil.
func ptrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// attDesc mirrors struct AttDesc in kernels.cu: one fused attention over bh = batch·heads
// problems, with the element strides over (batch, head, row, column) of q, k, v, y and up
// to two additive biases (a broadcast axis has stride 0).
type attDesc struct {
	bh, heads, nq, nk, dh int64
	nbias                 int64
	st                    [6][4]int64
	scale                 float32
}

// attDescBytes is sizeof(struct AttDesc): six 64-bit counts, 24 strides, the float scale
// and its padding.
const attDescBytes = 8*6 + 8*24 + 8

// pack encodes a in the C layout.
func (a attDesc) pack() []byte {
	b := make([]byte, attDescBytes)
	put := func(i int, v int64) { binary.LittleEndian.PutUint64(b[8*i:], uint64(v)) }
	for i, v := range []int64{a.bh, a.heads, a.nq, a.nk, a.dh, a.nbias} {
		put(i, v)
	}
	for k := range a.st {
		for j, v := range a.st[k] {
			put(6+4*k+j, v)
		}
	}
	binary.LittleEndian.PutUint32(b[8*30:], math.Float32bits(a.scale))
	return b
}
