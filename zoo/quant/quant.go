// Package quant rewrites a graph's linear layers into ONNX's integer form, the form ONNX
// Runtime's dynamic quantization (onnxruntime.quantization.quantize_dynamic) writes, so that
// `zoo export --precision int8` gives a file ONNX Runtime runs and zoo imports back onto its
// int8 kernels.
//
// Every MatMul whose right operand is a constant 2-D float matrix (an initializer, or a
// Transpose of one, as zoo's variants write a linear layer's (out, in) weight), and every
// Gemm with such a B (transA 0, alpha 1, beta 1 or no C), becomes
//
//	x ─► DynamicQuantizeLinear ─► x_q, x_scale, x_zero_point        (uint8, per tensor; one per x)
//	MatMulInteger(x_q, W_quantized, x_zero_point, W_zero_point) ─► Cast(float)
//	Mul(x_scale, W_scale) ─► Mul(cast, ·) ─► y                      (then Gemm's C is added)
//
// with W_quantized int8, symmetric (zero point 0), scale = max|w| / 127 and
// q = round-half-to-even(w / scale) clamped to ±127, per output column (ONNX Runtime's
// per_channel=True; b_zero_point a vector of zeros) or per tensor (its default). The weight
// formula is ONNX Runtime's for symmetric int8 weights ((rmax − rmin) / 254 with rmin = −rmax
// is the same float32 number); its names are ONNX Runtime's (NAME_quantized, NAME_scale,
// NAME_zero_point, X_QuantizeLinear). Attention's own products (two run-time operands) stay
// float, as they do there.
package quant

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Options choose the form of the quantized weights.
type Options struct {
	// PerTensor writes one scale per weight matrix (quantize_dynamic's default,
	// per_channel=False) instead of one per output column.
	PerTensor bool
}

// Stats say what Dynamic rewrote.
type Stats struct {
	// Layers is the number of MatMul and Gemm nodes rewritten, Weights the number of distinct
	// weight matrices quantized (a matrix two layers share counts once).
	Layers, Weights int
	// FloatBytes is the size of those weights in float32; Int8Bytes the size of their
	// quantized form (int8 values, float32 scales, int8 zero points).
	FloatBytes, Int8Bytes int64
}

// MetaKey is the metadata key Dynamic records the form under ("int8 dynamic, per channel" or
// "int8 dynamic, per tensor").
const MetaKey = "zoo.quantization"

// Weights quantizes the k×n row-major matrix w symmetrically to int8 (see the package
// comment): one scale per column when perChannel, else one for the whole matrix. A column
// (or matrix) of zeros gets scale 1, as in ONNX Runtime; a NaN or infinite weight is an error
// naming its position.
func Weights(w []float32, k, n int, perChannel bool) (q []int8, scales []float32, err error) {
	if k <= 0 || n <= 0 || len(w) != k*n {
		return nil, nil, fmt.Errorf("quantize weights: %d values for a %d×%d matrix", len(w), k, n)
	}
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, nil, fmt.Errorf("quantize weights: element (%d, %d) is %v", i/n, i%n, v)
		}
	}
	groups := 1
	if perChannel {
		groups = n
	}
	amax := make([]float32, groups)
	for i, v := range w {
		g := 0
		if perChannel {
			g = i % n
		}
		amax[g] = max(amax[g], float32(math.Abs(float64(v))))
	}
	scales = make([]float32, groups)
	for g, a := range amax {
		scales[g] = Scale(a)
	}
	q = make([]int8, k*n)
	for i, v := range w {
		s := scales[0]
		if perChannel {
			s = scales[i%n]
		}
		q[i] = Round(v, s)
	}
	return q, scales, nil
}

// Scale is the symmetric int8 scale of values whose largest magnitude is amax: amax / 127 in
// float32, or 1 when that is below the smallest normal float32 (a zero column).
func Scale(amax float32) float32 {
	s := amax / 127
	if s < math.SmallestNonzeroFloat32*(1<<23) { // below float32's smallest normal
		return 1
	}
	return s
}

// Round is v / scale rounded half to even (the division in float32) and clamped to ±127.
func Round(v, scale float32) int8 {
	r := math.RoundToEven(float64(v / scale))
	return int8(max(-127, min(127, r)))
}

// Dynamic returns a copy of g with its linear layers in quantize_dynamic's form (see the
// package comment) and what it rewrote; g is not changed (initializers it keeps are shared).
// Initializers and Transposes nothing reads any more are dropped. A graph with no linear
// layer to rewrite is an error, as is a weight with a NaN or an infinity; the result passes
// graph.Validate when g does.
func Dynamic(g *graph.Graph, opts Options) (*graph.Graph, Stats, error) {
	if g == nil {
		return nil, Stats{}, errors.New("quantize: graph is nil")
	}
	r := &rewriter{g: g, opts: opts, inits: g.InitializerMap(), producer: map[string]*graph.Node{},
		used: map[string]bool{}, acts: map[string][3]string{}, weights: map[weightKey][3]string{}}
	for _, in := range g.Inputs {
		r.used[in.Name] = true
	}
	for _, in := range g.Initializers {
		r.used[in.Name] = true
	}
	for _, n := range g.Nodes {
		r.used[n.Name] = true
		for _, o := range n.Outputs {
			r.producer[o] = n
			r.used[o] = true
		}
	}
	var nodes []*graph.Node
	for _, n := range g.Nodes {
		out, err := r.rewrite(n)
		if err != nil {
			return nil, Stats{}, err
		}
		nodes = append(nodes, out...)
	}
	if r.stats.Layers == 0 {
		return nil, Stats{}, fmt.Errorf("quantize %s: no linear layer (MatMul or Gemm by a constant 2-D float matrix) to quantize", g.Name)
	}
	out := &graph.Graph{Name: g.Name, Opset: g.Opset, Inputs: g.Inputs, Outputs: g.Outputs, Meta: maps.Clone(g.Meta)}
	if out.Meta == nil {
		out.Meta = map[string]string{}
	}
	out.Meta[MetaKey] = "int8 dynamic, per channel"
	if opts.PerTensor {
		out.Meta[MetaKey] = "int8 dynamic, per tensor"
	}
	out.Nodes = live(nodes, g.Outputs)
	read := map[string]bool{}
	for _, n := range out.Nodes {
		for _, in := range n.Inputs {
			read[in] = true
		}
	}
	for _, in := range append(slices.Clone(g.Initializers), r.added...) {
		if read[in.Name] {
			out.Initializers = append(out.Initializers, in)
		}
	}
	if len(g.ValueInfo) > 0 {
		if err := out.InferShapes(); err != nil {
			return nil, Stats{}, fmt.Errorf("quantize %s: %w", g.Name, err)
		}
	}
	return out, r.stats, nil
}

// live returns nodes without those whose outputs nothing reads (the Transposes of weights
// now read in quantized form), repeatedly, keeping the order.
func live(nodes []*graph.Node, outputs []graph.ValueInfo) []*graph.Node {
	for {
		read := map[string]bool{}
		for _, o := range outputs {
			read[o.Name] = true
		}
		for _, n := range nodes {
			for _, in := range n.Inputs {
				read[in] = true
			}
		}
		kept := nodes[:0:0]
		for _, n := range nodes {
			if slices.ContainsFunc(n.Outputs, func(o string) bool { return o != "" && read[o] }) {
				kept = append(kept, n)
			}
		}
		if len(kept) == len(nodes) {
			return kept
		}
		nodes = kept
	}
}

// weightKey is one quantized weight: an initializer in one orientation.
type weightKey struct {
	init       string
	transposed bool
}

type rewriter struct {
	g        *graph.Graph
	opts     Options
	inits    map[string]*tensor.Tensor
	producer map[string]*graph.Node
	used     map[string]bool         // names taken (values, nodes, new names)
	acts     map[string][3]string    // activation → its DynamicQuantizeLinear outputs
	weights  map[weightKey][3]string // quantized weight → its initializers: values, scale, zero point
	added    []graph.Initializer     // new initializers
	stats    Stats
}

// weight resolves a MatMul's B (or a Gemm's, transB saying how it reads it) to a constant
// k×n matrix: its row-major values, the initializer and orientation it came from.
func (r *rewriter) weight(name string, transB bool) (w []float32, k, n int, key weightKey, ok bool) {
	t := r.inits[name]
	key = weightKey{init: name}
	if t == nil {
		p := r.producer[name]
		if p == nil || p.Op != "Transpose" || len(p.Inputs) != 1 {
			return nil, 0, 0, key, false
		}
		if perm, has := p.IntList("perm"); has && !slices.Equal(perm, []int64{1, 0}) {
			return nil, 0, 0, key, false
		}
		if t = r.inits[p.Inputs[0]]; t == nil {
			return nil, 0, 0, key, false
		}
		key = weightKey{init: p.Inputs[0], transposed: true}
	}
	if t.DType != tensor.Float32 || len(t.Shape) != 2 || t.Len() == 0 {
		return nil, 0, 0, key, false
	}
	if transB {
		key.transposed = !key.transposed
	}
	rows, cols := t.Shape[0], t.Shape[1]
	if !key.transposed {
		return t.F32, rows, cols, key, true
	}
	w = make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			w[j*rows+i] = t.F32[i*cols+j]
		}
	}
	return w, cols, rows, key, true
}

// name returns base+suffix, made unique among the graph's values.
func (r *rewriter) name(base string) string {
	n := base
	for i := 1; r.used[n]; i++ {
		n = fmt.Sprintf("%s_%d", base, i)
	}
	r.used[n] = true
	return n
}

// rewrite returns the nodes that replace n: n itself, or its quantized form.
func (r *rewriter) rewrite(n *graph.Node) ([]*graph.Node, error) {
	var transB bool
	var bias string
	switch {
	case n.Op == "MatMul" && n.Domain == "" && len(n.Inputs) == 2:
	case n.Op == "Gemm" && n.Domain == "" && n.Int("transA", 0) == 0 && n.Float("alpha", 1) == 1 && len(n.Inputs) >= 2:
		transB = n.Int("transB", 0) != 0
		if len(n.Inputs) == 3 && n.Inputs[2] != "" && n.Float("beta", 1) != 0 {
			if n.Float("beta", 1) != 1 {
				return []*graph.Node{n}, nil
			}
			bias = n.Inputs[2]
		}
	default:
		return []*graph.Node{n}, nil
	}
	x := n.Inputs[0]
	if _, isConst := r.inits[x]; isConst {
		return []*graph.Node{n}, nil
	}
	w, k, cols, key, ok := r.weight(n.Inputs[1], transB)
	if !ok {
		return []*graph.Node{n}, nil
	}
	var out []*graph.Node
	wq, seen := r.weights[key]
	if !seen {
		q, scales, err := Weights(w, k, cols, !r.opts.PerTensor)
		if err != nil {
			return nil, fmt.Errorf("quantize %s: weight %s: %w", r.g.Name, key.init, err)
		}
		// The initializer's own name, unless its other orientation is quantized too.
		base := key.init
		if _, both := r.weights[weightKey{init: key.init, transposed: !key.transposed}]; both {
			base += "_t"
		}
		qt := &tensor.Tensor{DType: tensor.Int8, Shape: []int{k, cols}, I64: make([]int64, len(q))}
		for i, v := range q {
			qt.I64[i] = int64(v)
		}
		st := &tensor.Tensor{DType: tensor.Float32, Shape: []int{}, F32: scales}
		zt := &tensor.Tensor{DType: tensor.Int8, Shape: []int{}, I64: make([]int64, len(scales))}
		if !r.opts.PerTensor {
			st.Shape, zt.Shape = []int{cols}, []int{cols}
		}
		wq = [3]string{r.name(base + "_quantized"), r.name(base + "_scale"), r.name(base + "_zero_point")}
		r.weights[key] = wq
		r.added = append(r.added, graph.Initializer{Name: wq[0], Tensor: qt}, graph.Initializer{Name: wq[1], Tensor: st},
			graph.Initializer{Name: wq[2], Tensor: zt})
		r.stats.Weights++
		r.stats.FloatBytes += 4 * int64(k*cols)
		r.stats.Int8Bytes += int64(k*cols) + 5*int64(len(scales))
	}
	aq, ok := r.acts[x]
	if !ok {
		aq = [3]string{r.name(x + "_quantized"), r.name(x + "_scale"), r.name(x + "_zero_point")}
		r.acts[x] = aq
		out = append(out, &graph.Node{Op: "DynamicQuantizeLinear", Name: r.name(x + "_QuantizeLinear"), Inputs: []string{x}, Outputs: aq[:]})
	}
	nm := n.Name
	if nm == "" {
		nm = n.Outputs[0]
	}
	y := n.Outputs[0]
	acc, cast, scale := r.name(y+"_output_quantized"), r.name(y+"_output_quantized_cast_output"), r.name(nm+"_quant_scales_mul:0")
	prod := y
	if bias != "" {
		prod = r.name(y + "_matmul")
	}
	out = append(out,
		&graph.Node{Op: "MatMulInteger", Name: r.name(nm + "_quant"), Inputs: []string{aq[0], wq[0], aq[2], wq[2]}, Outputs: []string{acc}},
		&graph.Node{Op: "Cast", Name: r.name(nm + "_quant_output_scale_mul_cast"), Inputs: []string{acc}, Outputs: []string{cast},
			Attrs: graph.Attrs{"to": graph.Int(int64(tensor.Float32))}},
		&graph.Node{Op: "Mul", Name: r.name(nm + "_quant_scales_mul"), Inputs: []string{aq[1], wq[1]}, Outputs: []string{scale}},
		&graph.Node{Op: "Mul", Name: r.name(nm + "_quant_output_scale_mul"), Inputs: []string{cast, scale}, Outputs: []string{prod}})
	if bias != "" {
		out = append(out, &graph.Node{Op: "Add", Name: r.name(nm + "_bias_add"), Inputs: []string{prod, bias}, Outputs: []string{y}})
	}
	r.stats.Layers++
	return out, nil
}
