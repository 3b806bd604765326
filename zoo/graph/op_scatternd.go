package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ScatterND writes (or adds, or multiplies) slices of updates into a copy of data at the
// positions indices give. Autodiff uses it with reduction "add" for the gradient of Gather
// (an embedding's rows summed per token id).

func init() {
	register(&OpDef{
		Name: "ScatterND", SinceVersion: 16, ThroughVersion: LatestOpset,
		Doc:    "a copy of data with updates written at indices[..., :k] (reduction none, add or mul)",
		Inputs: ps(req("data"), req("indices"), req("updates")), Outputs: ps(req("output")),
		Attrs: []AttrDef{{Name: "reduction", Kind: AttrString, Default: String("none")}},
		infer: (*nodeCtx).scatterND,
		Eval:  evalScatterND,
		Cost: func(n *Node, in, out []TensorType) (OpCost, error) {
			e, err := in[2].elems()
			if err != nil {
				return OpCost{}, err
			}
			return OpCost{FLOPs: e, Bytes: ioBytes(in, out)}, nil
		},
		Grad: gradScatterND,
	})
}

func (c *nodeCtx) scatterND() ([]*absVal, error) {
	data, err := c.req(0)
	if err != nil {
		return nil, err
	}
	idx, err := c.req(1)
	if err != nil {
		return nil, err
	}
	upd, err := c.req(2)
	if err != nil {
		return nil, err
	}
	if idx.dt != tensor.Int64 {
		return nil, fmt.Errorf("indices input %q has dtype %v, want int64", c.name(1), idx.dt)
	}
	if upd.dt != data.dt {
		return nil, fmt.Errorf("updates input %q has dtype %v, want %v like data", c.name(2), upd.dt, data.dt)
	}
	switch red := c.n.Str("reduction", "none"); red {
	case "none", "add", "mul":
		if red != "none" && !isNumeric(data.dt) {
			return nil, fmt.Errorf("reduction %q needs a number type, data is %v", red, data.dt)
		}
	default:
		return nil, fmt.Errorf("reduction %q is not none, add or mul", red)
	}
	if data.shape != nil && idx.shape != nil {
		if len(data.shape) == 0 || len(idx.shape) == 0 {
			return nil, fmt.Errorf("data and indices must have rank ≥ 1, got %v and %v", data.shape, idx.shape)
		}
		last := idx.shape[len(idx.shape)-1]
		if last.Known() {
			k := int(last.Size)
			if k < 1 || k > len(data.shape) {
				return nil, fmt.Errorf("indices address %d axes of data of rank %d", k, len(data.shape))
			}
			if upd.shape != nil {
				want := append(append(Shape{}, idx.shape[:len(idx.shape)-1]...), data.shape[k:]...)
				if len(want) != len(upd.shape) {
					return nil, fmt.Errorf("updates have shape %v, want %v", upd.shape, want)
				}
				for i, d := range want {
					if u := upd.shape[i]; d.Known() && u.Known() && d.Size != u.Size {
						return nil, fmt.Errorf("updates have shape %v, want %v", upd.shape, want)
					}
				}
			}
		}
	}
	return one(mk(data.dt, cloneShape(data.shape))), nil
}

func evalScatterND(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	data, idx, upd := in[0], in[1], in[2]
	red := n.Str("reduction", "none")
	k := idx.Shape[len(idx.Shape)-1]
	out := data.Clone()
	slice := NumElements(data.Shape[k:])
	st := tensor.Strides(data.Shape)
	rows := NumElements(idx.Shape[:len(idx.Shape)-1])
	seen := map[int]bool{}
	for r := 0; r < rows; r++ {
		off, err := ScatterNDOffset(idx.I64[r*k:(r+1)*k], data.Shape, st)
		if err != nil {
			return nil, err
		}
		if red == "none" {
			if seen[off] {
				return nil, fmt.Errorf("indices repeat a position without a reduction (ONNX leaves the result undefined)")
			}
			seen[off] = true
		}
		for e := 0; e < slice; e++ {
			d, u := off+e, r*slice+e
			switch {
			case red == "none":
				copyElem(out, d, upd, u)
			case data.DType == tensor.Float32 && red == "add":
				out.F32[d] = float32(f64(out.F32[d]) + f64(upd.F32[u]))
			case data.DType == tensor.Float32:
				out.F32[d] = float32(f64(out.F32[d]) * f64(upd.F32[u]))
			case red == "add":
				out.I64[d] = wrapInt(data.DType, out.I64[d]+upd.I64[u])
			default:
				out.I64[d] = wrapInt(data.DType, out.I64[d]*upd.I64[u])
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// ScatterNDOffset returns the flat offset in a tensor of shape (row-major strides st) that one
// ScatterND index row names: its k = len(index) entries address the first k axes, negative
// entries counting from the end. An entry outside its axis is an error naming it. Backends
// call it so that the index rule is written once.
func ScatterNDOffset(index []int64, shape, st []int) (int, error) {
	off := 0
	for j, v := range index {
		dim := int64(shape[j])
		if v < -dim || v >= dim {
			return 0, fmt.Errorf("index %d is out of range for axis %d of size %d", v, j, dim)
		}
		if v < 0 {
			v += dim
		}
		off += int(v) * st[j]
	}
	return off, nil
}
