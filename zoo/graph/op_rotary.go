package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// RotaryEmbedding (ai.onnx opset 23): rotates pairs of each head's first rotary_embedding_dim
// features by the angles whose cosines and sines the caches hold, at each token's position.
// The pairs are (i, i + dim/2) by default and (2i, 2i + 1) when interleaved.

func init() {
	register(&OpDef{
		Name: "RotaryEmbedding", SinceVersion: 23, ThroughVersion: LatestOpset,
		Doc:     "rotary position embedding of X (B, heads, seq, head) or (B, seq, hidden) with num_heads, from cos/sin caches",
		Inputs:  ps(req("X"), req("cos_cache"), req("sin_cache"), opt("position_ids")),
		Outputs: ps(req("Y")),
		Attrs:   []AttrDef{intAttr("interleaved", 0), optIntAttr("num_heads"), intAttr("rotary_embedding_dim", 0)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			for i := 0; i < 3; i++ {
				if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
					return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
				}
			}
			if p := c.arg(3); p != nil && p.dt != tensor.Int64 {
				return nil, fmt.Errorf("position_ids %q has dtype %v, want int64", c.name(3), p.dt)
			}
			if x.shape != nil && len(x.shape) != 3 && len(x.shape) != 4 {
				return nil, fmt.Errorf("input %q has rank %d, want 3 or 4", c.name(0), len(x.shape))
			}
			if x.shape != nil && len(x.shape) == 3 && attrInt(c.n, "num_heads") <= 0 {
				return nil, errors.New("a 3-D input needs the num_heads attribute")
			}
			return one(mk(x.dt, cloneShape(x.shape))), nil
		},
		Eval: evalRotary,
		Cost: perOutput(3),
		Grad: NoGradYet,
	})
}

// RotaryLayout is a RotaryEmbedding node's view of its input: batch, sequence, heads, head
// size, the rotated width and whether X is 4-D (B, heads, seq, head) rather than 3-D.
type RotaryLayout struct {
	B, S, H, D, Rot int
	FourD           bool
	Interleaved     bool
}

// At returns the offset of element (b, s, h, d) of X.
func (l RotaryLayout) At(b, s, h, d int) int {
	if l.FourD {
		return ((b*l.H+h)*l.S+s)*l.D + d
	}
	return (b*l.S+s)*l.H*l.D + h*l.D + d
}

// Pair returns the two features that the i-th rotation (i < Rot/2) mixes.
func (l RotaryLayout) Pair(i int) (int, int) {
	if l.Interleaved {
		return 2 * i, 2*i + 1
	}
	return i, i + l.Rot/2
}

// RotaryShapes checks a RotaryEmbedding node's inputs (pos nil when absent) and returns the
// layout; the error says which input is wrong. The caches' row for (b, s) is
// pos[b, s] when pos is given, b·S + s otherwise; RotaryRow checks a position id.
func RotaryShapes(n *Node, x, cos, sin, pos *tensor.Tensor) (RotaryLayout, error) {
	var l RotaryLayout
	switch len(x.Shape) {
	case 4:
		l = RotaryLayout{B: x.Shape[0], H: x.Shape[1], S: x.Shape[2], D: x.Shape[3], FourD: true}
	case 3:
		heads := int(attrInt(n, "num_heads"))
		if heads <= 0 || x.Shape[2]%heads != 0 {
			return l, fmt.Errorf("a 3-D input of hidden size %d needs num_heads dividing it, got %d", x.Shape[2], heads)
		}
		l = RotaryLayout{B: x.Shape[0], S: x.Shape[1], H: heads, D: x.Shape[2] / heads}
	default:
		return l, fmt.Errorf("input has rank %d, want 3 or 4", len(x.Shape))
	}
	rd := int(attrInt(n, "rotary_embedding_dim"))
	if rd == 0 {
		rd = l.D
	}
	if rd < 0 || rd > l.D || rd%2 != 0 {
		return l, fmt.Errorf("rotary_embedding_dim %d must be even and at most the head size %d", rd, l.D)
	}
	half := rd / 2
	for _, c := range []*tensor.Tensor{cos, sin} {
		want := 3
		if pos != nil {
			want = 2
		}
		if len(c.Shape) != want || c.Shape[len(c.Shape)-1] != half {
			return l, fmt.Errorf("cos/sin cache has shape %s, want rank %d ending in rotary_embedding_dim/2 = %d", tensor.ShapeString(c.Shape), want, half)
		}
		if pos == nil && (c.Shape[0] != l.B || c.Shape[1] != l.S) {
			return l, fmt.Errorf("without position_ids the cos/sin caches must be (batch %d, seq %d, %d), got %s", l.B, l.S, half, tensor.ShapeString(c.Shape))
		}
	}
	if !tensor.SameShape(cos.Shape, sin.Shape) {
		return l, fmt.Errorf("cos_cache %s and sin_cache %s differ in shape", tensor.ShapeString(cos.Shape), tensor.ShapeString(sin.Shape))
	}
	if pos != nil && (len(pos.Shape) != 2 || pos.Shape[0] != l.B || pos.Shape[1] != l.S) {
		return l, fmt.Errorf("position_ids has shape %s, want (batch %d, seq %d)", tensor.ShapeString(pos.Shape), l.B, l.S)
	}
	l.Rot, l.Interleaved = rd, attrInt(n, "interleaved") != 0
	return l, nil
}

func evalRotary(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, cos, sin := in[0], in[1], in[2]
	var pos *tensor.Tensor
	if len(in) > 3 {
		pos = in[3]
	}
	l, err := RotaryShapes(n, x, cos, sin, pos)
	if err != nil {
		return nil, err
	}
	half := l.Rot / 2
	out := x.Clone()
	for b := 0; b < l.B; b++ {
		for s := 0; s < l.S; s++ {
			row, err := RotaryRow(l, pos, cos, b, s)
			if err != nil {
				return nil, err
			}
			for h := 0; h < l.H; h++ {
				for i := 0; i < half; i++ {
					c, sn := f64(cos.F32[row*half+i]), f64(sin.F32[row*half+i])
					i1, i2 := l.Pair(i)
					o1, o2 := l.At(b, s, h, i1), l.At(b, s, h, i2)
					x1, x2 := f64(x.F32[o1]), f64(x.F32[o2])
					out.F32[o1] = float32(c*x1 - sn*x2)
					out.F32[o2] = float32(sn*x1 + c*x2)
				}
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// RotaryRow returns the caches' row for token (b, s): its position id, or b·S + s without
// position ids; a position outside the caches is an error.
func RotaryRow(l RotaryLayout, pos, cos *tensor.Tensor, b, s int) (int, error) {
	if pos == nil {
		return b*l.S + s, nil
	}
	p := pos.I64[b*l.S+s]
	if p < 0 || int(p) >= cos.Shape[0] {
		return 0, fmt.Errorf("position id %d is outside the caches' %d positions", p, cos.Shape[0])
	}
	return int(p), nil
}
