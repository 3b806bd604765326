package cpu

import (
	"sync"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Linformer's sequence projections in an int8-attention program. Its keys and values are
// projected along the sequence before attention, K' = E[:, :n]·K and V' = F[:, :n]·V, with E
// and F constant (k × n_max) tables read through a Slice (int8 row tables in an int8 program,
// int8_tables.go), K and V (…, n, d) run-time values: a product as large as attention's own
// at n = 512 (k = 256), which fp32 left at 328 GFLOP/s, the longest step of an int8-attention
// run after the linear layers. int8-attention runs it as it runs P·V: each matrix of K (or V)
// packed as int8 with a scale per channel (gemm.PackInt8Activation), the rows of E[:, :n]
// quantized per row as a linear layer's inputs.

// int8Projections gives the MatMuls that read a table's Slice as their left operand the
// int8 kernel, in an int8-attention program (slices: the steps that Slice a table).
func (p *Program) int8Projections(slices map[int]bool) {
	if !p.attn8 {
		return
	}
	readers, _, _ := p.stepGraph()
	for i := range slices {
		for _, j := range readers[p.plan.Steps[i].Out[0]] {
			st := &p.plan.Steps[j]
			if st.Node.Op != "MatMul" || st.Covers != nil || len(st.In) != 2 || st.In[0] != p.plan.Steps[i].Out[0] {
				continue
			}
			st.Kernel = int8Projection(st.Kernel)
			p.fusions["int8-projection"]++
		}
	}
}

// int8Projection is MatMul(A, B) for A (k × n) and B (…, n, d) in int8, each matrix of B
// packed once and A's rows quantized once (parallel steps), the products shared out by
// blocks of A's rows; other operands go to orig.
func int8Projection(orig kernel) kernel {
	packs := &sync.Pool{New: func() any { return new(gemm.PackedB) }}
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if len(in) != 2 || in[0] == nil || in[1] == nil {
			return orig(e, in)
		}
		a, b := in[0], in[1]
		r := len(b.Shape)
		if a.DType != tensor.Float32 || b.DType != tensor.Float32 || len(a.Shape) != 2 || r < 2 {
			return orig(e, in)
		}
		k, n, d := a.Shape[0], a.Shape[1], b.Shape[r-1]
		if b.Shape[r-2] != n || n == 0 || n > gemm.MaxInt8K || k == 0 || d == 0 {
			return orig(e, in)
		}
		out, err := e.allocRaw(append(append([]int(nil), b.Shape[:r-2]...), k, d))
		if err != nil {
			return nil, err
		}
		nb := graph.NumElements(b.Shape[:r-2])
		if nb == 0 {
			return []*tensor.Tensor{out}, nil
		}
		pbs := make([]*gemm.PackedB, nb)
		for i := range pbs {
			pbs[i] = packs.Get().(*gemm.PackedB)
		}
		defer func() {
			for _, pb := range pbs {
				packs.Put(pb)
			}
		}()
		workpool.Tasks(e.threads, nb, func(i int) { pbs[i].PackInt8Activation(false, n, d, b.F32[i*n*d:(i+1)*n*d], d) })
		// A's rows are quantized once for every matrix of B (all packed alike), in blocks of
		// rows that also share out the products, so a batch of one still gives every thread
		// work.
		const minRows = 48
		blocks := max(1, min((k+minRows-1)/minRows, (2*e.threads+nb-1)/nb))
		per := (k + blocks - 1) / blocks
		blocks = (k + per - 1) / per
		rows := int8RowSets.Get().(*gemm.Int8Rows)
		defer int8RowSets.Put(rows)
		rows.Prepare(pbs[0], k, 1)
		workpool.Tasks(e.threads, blocks, func(t int) { rows.QuantizeRange(t*per, min((t+1)*per, k), a.F32, n) })
		workpool.Tasks(e.threads, nb*blocks, func(t int) {
			i, r0 := t/blocks, t%blocks*per
			r1 := min(r0+per, k)
			gemm.SgemmInt8RowsAt(rows, r0, r1-r0, 0, d, pbs[i], 0, out.F32[i*k*d+r0*d:], d, nil)
		})
		return []*tensor.Tensor{out}, nil
	}
}
