package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Conv over 1-D and 2-D (and 3-D) inputs with groups, strides, dilations, explicit pads and
// auto_pad (patch embeddings and audio front ends).

func init() {
	register(&OpDef{
		Name: "Conv", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:     "N-D cross-correlation of X (N, C, spatial...) with W (M, C/group, kernel...) plus B, with strides, dilations, pads or auto_pad and groups",
		Inputs:  ps(req("X"), req("W"), opt("B")),
		Outputs: ps(req("Y")),
		Attrs: []AttrDef{{Name: "auto_pad", Kind: AttrString, Default: String("NOTSET")}, intsAttr("dilations"),
			intAttr("group", 1), intsAttr("kernel_shape"), intsAttr("pads"), intsAttr("strides")},
		infer: (*nodeCtx).conv,
		Eval:  evalConv,
		Cost:  convCost,
		Grad:  NoGradYet,
	})
}

// convGeom is Conv's resolved geometry for concrete spatial sizes.
type convGeom struct {
	kernel, strides, dilations, padBegin, out []int
}

// convGeometry resolves attributes against the input's spatial sizes (-1: unknown, then the
// output size is -1 too).
func convGeometry(n *Node, spatial, kernel []int) (convGeom, error) {
	r := len(spatial)
	g := convGeom{kernel: kernel, strides: make([]int, r), dilations: make([]int, r), padBegin: make([]int, r), out: make([]int, r)}
	get := func(name string, def int) ([]int, error) {
		v := make([]int, r)
		a, ok := n.Attrs[name]
		for i := range v {
			v[i] = def
		}
		if !ok {
			return v, nil
		}
		if len(a.Ints) != r {
			return nil, fmt.Errorf("%s %v has %d entries for %d spatial axes", name, a.Ints, len(a.Ints), r)
		}
		for i, x := range a.Ints {
			if x < 1 {
				return nil, fmt.Errorf("%s %v must be positive", name, a.Ints)
			}
			v[i] = int(x)
		}
		return v, nil
	}
	var err error
	if g.strides, err = get("strides", 1); err != nil {
		return g, err
	}
	if g.dilations, err = get("dilations", 1); err != nil {
		return g, err
	}
	if ks, ok := n.Attrs["kernel_shape"]; ok {
		if len(ks.Ints) != r {
			return g, fmt.Errorf("kernel_shape %v has %d entries for %d spatial axes", ks.Ints, len(ks.Ints), r)
		}
		for i, k := range ks.Ints {
			if kernel[i] >= 0 && int(k) != kernel[i] {
				return g, fmt.Errorf("kernel_shape %v disagrees with the weights' %v", ks.Ints, kernel)
			}
		}
	}
	pads := make([]int, 2*r)
	if p, ok := n.Attrs["pads"]; ok {
		if len(p.Ints) != 2*r {
			return g, fmt.Errorf("pads %v has %d entries, want %d", p.Ints, len(p.Ints), 2*r)
		}
		for i, x := range p.Ints {
			if x < 0 {
				return g, fmt.Errorf("pads %v must not be negative", p.Ints)
			}
			pads[i] = int(x)
		}
	}
	autoPad := "NOTSET"
	if a, ok := n.Attrs["auto_pad"]; ok {
		autoPad = a.S
	}
	for i := 0; i < r; i++ {
		ext := (kernel[i]-1)*g.dilations[i] + 1
		in := spatial[i]
		switch autoPad {
		case "NOTSET", "VALID":
			b, e := pads[i], pads[r+i]
			if autoPad == "VALID" {
				b, e = 0, 0
			}
			g.padBegin[i] = b
			if in < 0 || kernel[i] < 0 {
				g.out[i] = -1
				continue
			}
			if in+b+e < ext {
				return g, fmt.Errorf("spatial axis %d: input %d with pads %d+%d is smaller than the dilated kernel %d", i, in, b, e, ext)
			}
			g.out[i] = (in+b+e-ext)/g.strides[i] + 1
		case "SAME_UPPER", "SAME_LOWER":
			if in < 0 || kernel[i] < 0 {
				g.out[i] = -1
				continue
			}
			g.out[i] = (in + g.strides[i] - 1) / g.strides[i]
			total := max(0, (g.out[i]-1)*g.strides[i]+ext-in)
			g.padBegin[i] = total / 2
			if autoPad == "SAME_LOWER" {
				g.padBegin[i] = total - total/2
			}
		default:
			return g, fmt.Errorf("auto_pad %q is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", autoPad)
		}
	}
	return g, nil
}

func (c *nodeCtx) conv() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	w, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if err := c.wantFloats(0, 1, 2); err != nil {
		return nil, err
	}
	if x.shape == nil || w.shape == nil {
		return one(mk(tensor.Float32, nil)), nil
	}
	if len(x.shape) < 3 || len(x.shape) > 5 || len(w.shape) != len(x.shape) {
		return nil, fmt.Errorf("Conv takes X of rank 3 to 5 and W of the same rank, got %v and %v", x.shape, w.shape)
	}
	group := attrInt(c.n, "group")
	if group < 1 {
		return nil, fmt.Errorf("group %d must be positive", group)
	}
	if m := w.shape[0]; m.Known() && m.Size%group != 0 {
		return nil, fmt.Errorf("W has %d output channels, not divisible by group %d", m.Size, group)
	}
	if cin, wc := x.shape[1], w.shape[1]; cin.Known() && wc.Known() && cin.Size != wc.Size*group {
		return nil, fmt.Errorf("X has %d channels, W expects %d × group %d", cin.Size, wc.Size, group)
	}
	if b := c.arg(2); b != nil && b.shape != nil {
		if len(b.shape) != 1 {
			return nil, fmt.Errorf("bias %q has shape %v, want (M)", c.name(2), b.shape)
		}
		if err := sameDim(b.shape[0], w.shape[0], "bias length and output channels differ"); err != nil {
			return nil, err
		}
	}
	r := len(x.shape) - 2
	spatial, kernel := make([]int, r), make([]int, r)
	for i := 0; i < r; i++ {
		spatial[i], kernel[i] = int(x.shape[2+i].Size), int(w.shape[2+i].Size)
	}
	geo, err := convGeometry(c.n, spatial, kernel)
	if err != nil {
		return nil, err
	}
	out := Shape{x.shape[0], w.shape[0]}
	for _, o := range geo.out {
		if o < 0 {
			out = append(out, unknownDim)
		} else {
			out = append(out, Fixed(int64(o)))
		}
	}
	return one(mk(tensor.Float32, out)), nil
}

func evalConv(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, w, b := in[0], in[1], optIn(in, 2)
	shape, sums, err := convSums(n, x.Shape, w.Shape, func(i int) float64 { return float64(x.F32[i]) }, func(i int) float64 { return float64(w.F32[i]) })
	if err != nil {
		return nil, err
	}
	out, err := newTensor(tensor.Float32, shape)
	if err != nil {
		return nil, err
	}
	outSp := NumElements(shape[2:])
	for i, s := range sums {
		if b != nil {
			s += float64(b.F32[i/outSp%shape[1]])
		}
		out.F32[i] = float32(s)
	}
	return []*tensor.Tensor{out}, nil
}

// convSums is Conv's cross-correlation in float64 over elements x(i) and w(i) of tensors of
// shapes xShape and wShape: the output shape and its sums (exact for integer inputs).
func convSums(n *Node, xShape, wShape []int, xv, wv func(int) float64) ([]int, []float64, error) {
	r := len(xShape) - 2
	geo, err := convGeometry(n, xShape[2:], wShape[2:])
	if err != nil {
		return nil, nil, err
	}
	batch, cin, m := xShape[0], xShape[1], wShape[0]
	group := int(attrInt(n, "group"))
	cg, mg := cin/group, m/group
	shape := append([]int{batch, m}, geo.out...)
	sums := make([]float64, NumElements(shape))
	inSp, outSp, kSp := NumElements(xShape[2:]), NumElements(geo.out), NumElements(wShape[2:])
	inSt, kSt := tensor.Strides(xShape[2:]), tensor.Strides(wShape[2:])
	oIdx, kIdx := make([]int, r), make([]int, r)
	for bn := 0; bn < batch; bn++ {
		for oc := 0; oc < m; oc++ {
			g := oc / mg
			for o := 0; o < outSp; o++ {
				for d, rem := r-1, o; d >= 0; d-- {
					oIdx[d], rem = rem%geo.out[d], rem/geo.out[d]
				}
				var s float64
				for kk := 0; kk < kSp; kk++ {
					off, inside := 0, true
					for d, rem := r-1, kk; d >= 0; d-- {
						kIdx[d], rem = rem%wShape[2+d], rem/wShape[2+d]
					}
					for d := 0; d < r; d++ {
						p := oIdx[d]*geo.strides[d] + kIdx[d]*geo.dilations[d] - geo.padBegin[d]
						if p < 0 || p >= xShape[2+d] {
							inside = false
							break
						}
						off += p * inSt[d]
					}
					if !inside {
						continue
					}
					kOff := 0
					for d := 0; d < r; d++ {
						kOff += kIdx[d] * kSt[d]
					}
					for ci := 0; ci < cg; ci++ {
						s += xv((bn*cin+g*cg+ci)*inSp+off) * wv((oc*cg+ci)*kSp+kOff)
					}
				}
				sums[(bn*m+oc)*outSp+o] = s
			}
		}
	}
	return shape, sums, nil
}

func convCost(n *Node, in, out []TensorType) (OpCost, error) {
	if len(in) < 2 || len(out) < 1 {
		return OpCost{}, fmt.Errorf("Conv cost needs X and W")
	}
	e, err := out[0].elems()
	if err != nil {
		return OpCost{}, err
	}
	per := int64(1)
	for _, d := range in[1].Shape[1:] {
		per *= int64(d)
	}
	f, err := mulChecked(e, per, 2)
	return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, err
}
