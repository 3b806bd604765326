package cpu

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// An int8 program also holds its row tables in int8: a constant float matrix that the
// program only reads by rows, through Gather on axis 0 (an embedding) or Slice (a position
// table, x + pe[:n]), is quantized once, a symmetric int8 scale per row (max |row| / 127),
// and the steps that read it dequantize only the rows they take. Without this, the
// sinusoidal table of a base model (5000 × 512 floats, 9.8 MiB) alone kept its int8
// weights at 0.35 of fp32's. The rows a run reads differ from the fp32 table's by at most
// half a step of their row's scale (max |row| / 254), below the int8 quantization the
// activations get in the next linear layer.

// tableMinElems is the size from which a row table is worth quantizing: smaller ones
// (biases, normalisation parameters, a tiny vocabulary) stay fp32.
const tableMinElems = 1 << 16

// int8Table is a constant (rows × cols) float matrix held as int8 rows with a scale each.
type int8Table struct {
	rows, cols int
	q          []int8
	scale      []float32
}

// quantizeTable quantizes t (Float32, rank 2) row by row; ok is false when a row holds a
// NaN or an infinity, which int8 cannot hold.
func quantizeTable(t *tensor.Tensor) (*int8Table, bool) {
	rows, cols := t.Shape[0], t.Shape[1]
	tb := &int8Table{rows: rows, cols: cols, q: make([]int8, rows*cols), scale: make([]float32, rows)}
	for r := 0; r < rows; r++ {
		row := t.F32[r*cols : (r+1)*cols]
		var amax float32
		for _, v := range row {
			if v != v || math.IsInf(float64(v), 0) {
				return nil, false
			}
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if amax == 0 {
			continue
		}
		s := amax / 127
		tb.scale[r] = s
		for c, v := range row {
			tb.q[r*cols+c] = int8(max(-127, min(127, math.RoundToEven(float64(v)/float64(s)))))
		}
	}
	return tb, true
}

// at returns element (r, c) dequantized.
func (tb *int8Table) at(r, c int) float32 { return float32(tb.q[r*tb.cols+c]) * tb.scale[r] }

// bytes is the memory the table holds.
func (tb *int8Table) bytes() int64 { return int64(len(tb.q)) + 4*int64(len(tb.scale)) }

// tensor returns the whole table dequantized: what a reader outside the fast paths gets.
func (tb *int8Table) tensor() *tensor.Tensor {
	t := &tensor.Tensor{DType: tensor.Float32, Shape: []int{tb.rows, tb.cols}, F32: make([]float32, tb.rows*tb.cols)}
	for r := 0; r < tb.rows; r++ {
		for c := 0; c < tb.cols; c++ {
			t.F32[r*tb.cols+c] = tb.at(r, c)
		}
	}
	return t
}

// int8Tables quantizes the program's row tables (see above) and rewires their readers.
func (p *Program) int8Tables() {
	readers, _, output := p.stepGraph()
	slices := map[int]bool{} // the Slice steps of the tables
	for s, t := range p.plan.Consts {
		if t == nil || p.plan.Kinds[s] != compile.SlotConst || output[s] || t.DType != tensor.Float32 || len(t.Shape) != 2 ||
			t.Len() < tableMinElems || len(readers[s]) == 0 || !p.tableReaders(s, readers[s]) {
			continue
		}
		tb, ok := quantizeTable(t)
		if !ok {
			continue
		}
		for _, i := range readers[s] {
			st := &p.plan.Steps[i]
			orig := st.Kernel
			in := append([]int(nil), st.In...)
			in[0] = -1
			st.In = in
			if st.Node.Op == "Gather" {
				st.Kernel = tb.gatherKernel(orig)
			} else {
				st.Kernel = tb.sliceKernel(orig)
				slices[i] = true
			}
		}
		p.plan.Consts[s] = nil
		p.tables = append(p.tables, tb)
		p.fusions["int8-table"]++
	}
	p.int8Projections(slices)
}

// tableReaders reports whether every reader of slot s reads it as the table of a plain
// Gather on axis 0 or of a Slice, and nothing else.
func (p *Program) tableReaders(s int, readers []int) bool {
	for _, i := range readers {
		st := p.plan.Steps[i]
		if st.Covers != nil || len(st.In) == 0 || st.In[0] != s {
			return false
		}
		for _, o := range st.In[1:] {
			if o == s {
				return false
			}
		}
		switch st.Node.Op {
		case "Gather":
			if a := st.Node.Int("axis", 0); a != 0 && a != -2 {
				return false
			}
		case "Slice":
		default:
			return false
		}
	}
	return true
}

// gatherKernel is Gather on axis 0 of the table: the rows the indices name, dequantized;
// indices that are not integers go to orig, which reports them.
func (tb *int8Table) gatherKernel(orig kernel) kernel {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if len(in) < 2 || in[1] == nil || !isInt(in[1].DType) {
			return tb.whole(e, orig, in)
		}
		idx := in[1]
		out, err := e.alloc(tensor.Float32, append(append([]int{}, idx.Shape...), tb.cols))
		if err != nil {
			return nil, err
		}
		for j, v := range idx.I64 {
			if v < -int64(tb.rows) || v >= int64(tb.rows) {
				return nil, fmt.Errorf("index %d is out of range for axis 0 of size %d", v, tb.rows)
			}
			if v < 0 {
				v += int64(tb.rows)
			}
			tb.dequantRow(out.F32[j*tb.cols:(j+1)*tb.cols], int(v), 0, 1)
		}
		return []*tensor.Tensor{out}, nil
	}
}

// sliceKernel is Slice of the table: the elements graph.SliceDims selects, dequantized;
// arguments it cannot read go to orig, which reports them.
func (tb *int8Table) sliceKernel(orig kernel) kernel {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if len(in) < 3 {
			return tb.whole(e, orig, in)
		}
		var args [4][]int64
		for k := range args {
			if k+1 >= len(in) || in[k+1] == nil {
				continue
			}
			v, err := shapeArg(in[k+1], "argument")
			if err != nil {
				return tb.whole(e, orig, in)
			}
			args[k] = append([]int64{}, v...)
		}
		shape, first, step, err := graph.SliceDims([]int{tb.rows, tb.cols}, args[0], args[1], args[2], args[3])
		if err != nil {
			return tb.whole(e, orig, in)
		}
		out, err := e.alloc(tensor.Float32, shape)
		if err != nil {
			return nil, err
		}
		for i := 0; i < shape[0]; i++ {
			tb.dequantRow(out.F32[i*shape[1]:(i+1)*shape[1]], first[0]+i*step[0], first[1], step[1])
		}
		return []*tensor.Tensor{out}, nil
	}
}

// dequantRow sets dst[j] to element (r, c0 + j·dc) of the table.
func (tb *int8Table) dequantRow(dst []float32, r, c0, dc int) {
	q, s := tb.q[r*tb.cols:(r+1)*tb.cols], tb.scale[r]
	for j := range dst {
		dst[j] = float32(q[c0+j*dc]) * s
	}
}

// whole runs orig on the whole table dequantized, for the inputs the fast paths leave.
func (tb *int8Table) whole(e *exec, orig kernel, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	args := append([]*tensor.Tensor{tb.tensor()}, in[1:]...)
	return orig(e, args)
}
