package cpu

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Transcendental functions are evaluated in float64 and rounded once to float32, so results
// are within half an ulp of the exact value (PyTorch parity at 1e-6 and better).

func absF(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
func absI(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
func negF(v float32) float32  { return -v }
func negI(v int64) int64      { return -v }
func expF(v float32) float32  { return float32(math.Exp(float64(v))) }
func logF(v float32) float32  { return float32(math.Log(float64(v))) }
func sqrtF(v float32) float32 { return float32(math.Sqrt(float64(v))) }
func erfF(v float32) float32  { return float32(math.Erf(float64(v))) }
func tanhF(v float32) float32 { return float32(math.Tanh(float64(v))) }
func sigmoidF(v float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(v))))
}
func reluF(v float32) float32 {
	if v > 0 || v != v {
		return v
	}
	return 0
}
func reluI(v int64) int64 {
	if v > 0 {
		return v
	}
	return 0
}

// unaryOp builds a one-input elementwise op from its per-dtype functions (nil: unsupported).
func unaryOp(ff func(float32) float32, fi func(int64) int64, fb func(bool) bool) kernelMaker {
	return func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if err := need(in, 1); err != nil {
				return nil, err
			}
			return one(unaryApply(e, in[0], ff, fi, fb))
		}, nil
	}
}

func unaryApply(e *exec, x *tensor.Tensor, ff func(float32) float32, fi func(int64) int64, fb func(bool) bool) (*tensor.Tensor, error) {
	switch {
	case x.DType == tensor.Float32 && ff != nil:
		out, err := e.allocOverwrite(x.DType, x.Shape)
		if err != nil {
			return nil, err
		}
		unaryMap(e.threads, out.F32, x.F32, ff)
		return out, nil
	case isInt(x.DType) && fi != nil:
		out, err := e.alloc(x.DType, x.Shape)
		if err != nil {
			return nil, err
		}
		unaryMap(e.threads, out.I64, x.I64, fi)
		return out, nil
	case x.DType == tensor.Bool && fb != nil:
		out, err := e.alloc(x.DType, x.Shape)
		if err != nil {
			return nil, err
		}
		unaryMap(e.threads, out.Bool, x.Bool, fb)
		return out, nil
	}
	return nil, fmt.Errorf("dtype %v is not supported", x.DType)
}

func makeElu(n *graph.Node) (kernel, error) {
	alpha := float64(n.Float("alpha", 1))
	f := func(v float32) float32 {
		if v >= 0 || v != v {
			return v
		}
		return float32(alpha * math.Expm1(float64(v)))
	}
	return unaryOp(f, nil, nil)(n)
}

// binaryShape checks dtypes and returns the broadcast shape of a and b.
func binaryShape(a, b *tensor.Tensor) ([]int, error) {
	if a.DType != b.DType {
		return nil, fmt.Errorf("operands have dtypes %v and %v; they must match", a.DType, b.DType)
	}
	return graph.BroadcastShapes(a.Shape, b.Shape)
}

// arithOp builds a broadcasting arithmetic op (Sub, Mul): kind is its arithRow kind.
func arithOp(kind byte, ff func(a, b float32) float32, fi func(a, b int64) int64) kernelMaker {
	return func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if err := need(in, 2); err != nil {
				return nil, err
			}
			return one(arith(e, in[0], in[1], kind, ff, fi))
		}, nil
	}
}

// arith computes ff (fi for integers) of a and b broadcast together. kind, when it is
// '+', '-', '*' or '/' (what ff computes), lets float32 rows run in package vec (arithRow);
// 0 keeps every row on ff (Max, Min).
func arith(e *exec, a, b *tensor.Tensor, kind byte, ff func(a, b float32) float32, fi func(a, b int64) int64) (*tensor.Tensor, error) {
	shape, err := binaryShape(a, b)
	if err != nil {
		return nil, err
	}
	var out *tensor.Tensor
	if a.DType == tensor.Float32 && ff != nil {
		out, err = e.allocRaw(shape) // binaryMap writes every element
	} else {
		out, err = e.alloc(a.DType, shape)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case a.DType == tensor.Float32 && ff != nil:
		var row func(dst, av []float32, sa int, bv []float32, sb int) bool
		if kind != 0 {
			row = func(dst, av []float32, sa int, bv []float32, sb int) bool { return arithRow(kind, dst, av, sa, bv, sb) }
		}
		binaryMapRows(e.threads, out.F32, shape, a.F32, a.Shape, b.F32, b.Shape, ff, row)
	case isInt(a.DType) && fi != nil:
		binaryMap(e.threads, out.I64, shape, a.I64, a.Shape, b.I64, b.Shape, fi)
	default:
		return nil, fmt.Errorf("dtype %v is not supported", a.DType)
	}
	return out, nil
}

// makeAdd implements Add; two float32 operands of the same shape (the residual adds of an
// encoder) take the SIMD path of package vec, which rounds each sum the same way.
func makeAdd(n *graph.Node) (kernel, error) {
	ff := func(a, b float32) float32 { return a + b }
	fi := func(a, b int64) int64 { return a + b }
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		a, b := in[0], in[1]
		if a.DType == tensor.Float32 && b.DType == tensor.Float32 && tensor.SameShape(a.Shape, b.Shape) && len(a.F32) == len(b.F32) {
			out, err := e.allocRaw(a.Shape)
			if err != nil {
				return nil, err
			}
			workpool.For(e.threads, len(out.F32), elemGrain, func(lo, hi int) {
				vec.Add(out.F32[lo:hi], a.F32[lo:hi], b.F32[lo:hi])
			})
			return []*tensor.Tensor{out}, nil
		}
		return one(arith(e, a, b, '+', ff, fi))
	}, nil
}

func makeDiv(n *graph.Node) (kernel, error) {
	ff := func(a, b float32) float32 { return a / b }
	fi := func(a, b int64) int64 { return a / b }
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		if isInt(in[1].DType) {
			for _, v := range in[1].I64 {
				if v == 0 {
					return nil, fmt.Errorf("integer division by zero")
				}
			}
		}
		return one(arith(e, in[0], in[1], '/', ff, fi))
	}, nil
}

// makePow implements Pow: the output has the base's dtype; the exponent may be float or int.
// A scalar exponent of 2, 0.5 or 1 takes an exact fast path (x·x, sqrt, x) as PyTorch does.
func makePow(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		x, y := in[0], in[1]
		shape, err := graph.BroadcastShapes(x.Shape, y.Shape)
		if err != nil {
			return nil, err
		}
		var yf []float64
		switch {
		case y.DType == tensor.Float32:
			yf = make([]float64, len(y.F32))
			for i, v := range y.F32 {
				yf[i] = float64(v)
			}
		case isInt(y.DType):
			yf = make([]float64, len(y.I64))
			for i, v := range y.I64 {
				yf[i] = float64(v)
			}
		default:
			return nil, fmt.Errorf("exponent dtype %v is not supported", y.DType)
		}
		out, err := e.alloc(x.DType, shape)
		if err != nil {
			return nil, err
		}
		switch {
		case x.DType == tensor.Float32:
			if len(yf) == 1 && tensor.SameShape(shape, x.Shape) {
				var f func(float32) float32
				switch yf[0] {
				case 2:
					f = func(v float32) float32 { return v * v }
				case 0.5:
					f = sqrtF
				case 1:
					f = func(v float32) float32 { return v }
				default:
					p := yf[0]
					f = func(v float32) float32 { return float32(math.Pow(float64(v), p)) }
				}
				unaryMap(e.threads, out.F32, x.F32, f)
				return []*tensor.Tensor{out}, nil
			}
			binaryMap(e.threads, out.F32, shape, x.F32, x.Shape, yf, y.Shape, func(a float32, b float64) float32 {
				return float32(math.Pow(float64(a), b))
			})
		case isInt(x.DType):
			binaryMap(e.threads, out.I64, shape, x.I64, x.Shape, yf, y.Shape, func(a int64, b float64) int64 {
				return int64(math.Pow(float64(a), b))
			})
		default:
			return nil, fmt.Errorf("base dtype %v is not supported", x.DType)
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

// minMaxOp builds the variadic Max (isMax) or Min; NaN propagates as in numpy and PyTorch.
func minMaxOp(isMax bool) kernelMaker {
	ff := func(a, b float32) float32 {
		if a != a {
			return a
		}
		if b != b {
			return b
		}
		if (b > a) == isMax && a != b {
			return b
		}
		return a
	}
	fi := func(a, b int64) int64 {
		if (b > a) == isMax && a != b {
			return b
		}
		return a
	}
	return func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if err := need(in, len(in)); err != nil {
				return nil, err
			}
			if len(in) == 0 {
				return nil, fmt.Errorf("needs at least one input")
			}
			acc := in[0]
			if len(in) == 1 {
				return []*tensor.Tensor{acc}, nil
			}
			for _, t := range in[1:] {
				r, err := arith(e, acc, t, 0, ff, fi)
				if err != nil {
					return nil, err
				}
				acc = r
			}
			return []*tensor.Tensor{acc}, nil
		}, nil
	}
}

// compareOp builds a broadcasting op with a bool result (Equal, Greater, Less, And, Or).
func compareOp(ff func(a, b float32) bool, fi func(a, b int64) bool, fb func(a, b bool) bool) kernelMaker {
	return func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if err := need(in, 2); err != nil {
				return nil, err
			}
			a, b := in[0], in[1]
			shape, err := binaryShape(a, b)
			if err != nil {
				return nil, err
			}
			out, err := e.alloc(tensor.Bool, shape)
			if err != nil {
				return nil, err
			}
			switch {
			case a.DType == tensor.Float32 && ff != nil:
				binaryMap(e.threads, out.Bool, shape, a.F32, a.Shape, b.F32, b.Shape, ff)
			case isInt(a.DType) && fi != nil:
				binaryMap(e.threads, out.Bool, shape, a.I64, a.Shape, b.I64, b.Shape, fi)
			case a.DType == tensor.Bool && fb != nil:
				binaryMap(e.threads, out.Bool, shape, a.Bool, a.Shape, b.Bool, b.Shape, fb)
			default:
				return nil, fmt.Errorf("dtype %v is not supported", a.DType)
			}
			return []*tensor.Tensor{out}, nil
		}, nil
	}
}

func makeWhere(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 3); err != nil {
			return nil, err
		}
		c, x, y := in[0], in[1], in[2]
		if c.DType != tensor.Bool {
			return nil, fmt.Errorf("condition must be bool, got %v", c.DType)
		}
		if x.DType != y.DType {
			return nil, fmt.Errorf("X has dtype %v and Y has %v; they must match", x.DType, y.DType)
		}
		shape, err := graph.BroadcastShapes(c.Shape, x.Shape, y.Shape)
		if err != nil {
			return nil, err
		}
		out, err := e.allocOverwrite(x.DType, shape)
		if err != nil {
			return nil, err
		}
		bc := newBcast(shape, c.Shape, x.Shape, y.Shape)
		switch x.DType {
		case tensor.Float32:
			where(e, bc, out.F32, c.Bool, x.F32, y.F32)
		case tensor.Int32, tensor.Int64:
			where(e, bc, out.I64, c.Bool, x.I64, y.I64)
		case tensor.Bool:
			where(e, bc, out.Bool, c.Bool, x.Bool, y.Bool)
		default:
			return nil, fmt.Errorf("dtype %v is not supported", x.DType)
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

func where[T any](e *exec, bc *bcast, out []T, c []bool, x, y []T) {
	in := bc.inner()
	sc, sx, sy := bc.innerStride(0), bc.innerStride(1), bc.innerStride(2)
	bc.run(e.threads, func(o int, offs []int) {
		dst := out[o : o+in]
		ic, ix, iy := offs[0], offs[1], offs[2]
		if sc == 0 {
			// One condition for the whole row (a mask per token over its channels): the row
			// is one side's, copied or filled, instead of a choice per element (linformer's
			// masked keys and values at b8 n512: 19.8 → 7.4 ms a run, zoo profile).
			src, is, s := x, ix, sx
			if !c[ic] {
				src, is, s = y, iy, sy
			}
			switch s {
			case 1:
				copy(dst, src[is:is+in])
				return
			case 0:
				v := src[is]
				for i := range dst {
					dst[i] = v
				}
				return
			}
		}
		for i := range dst {
			if c[ic+i*sc] {
				dst[i] = x[ix+i*sx]
			} else {
				dst[i] = y[iy+i*sy]
			}
		}
	})
}

func makeCast(n *graph.Node) (kernel, error) {
	to := tensor.DType(n.Int("to", 0))
	switch to {
	case tensor.Float32, tensor.Float16, tensor.BFloat16, tensor.Int32, tensor.Int64, tensor.Bool, tensor.Int8, tensor.Uint8,
		tensor.Int16, tensor.Uint16, tensor.Uint32:
	default:
		// float64 and uint64 go through the reference (wideKernel).
		return nil, unsupported("cast to %v is not supported (float32, float16, bfloat16, the integer types up to 32 bits, int64 and bool are)", to)
	}
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		return one(cast(e, in[0], to))
	}, nil
}

// cast converts x to dtype to with C semantics: floats truncate toward zero, int32 wraps,
// non-zero is true.
func cast(e *exec, x *tensor.Tensor, to tensor.DType) (*tensor.Tensor, error) {
	if x.DType == to {
		return x, nil
	}
	if x.DType.IsFloat() && x.DType != tensor.Float32 {
		// From a 16-bit float: its values are float32 values already.
		x = &tensor.Tensor{DType: tensor.Float32, Shape: x.Shape, F32: x.F32}
		if to == tensor.Float32 {
			return x, nil
		}
	}
	out, err := e.alloc(to, x.Shape)
	if err != nil {
		return nil, err
	}
	th := e.threads
	switch {
	case to == tensor.Int8 || to == tensor.Uint8 || to == tensor.Int16 || to == tensor.Uint16 || to == tensor.Uint32:
		return castSmallInt(x, out, to)
	case to.IsFloat() && to != tensor.Float32:
		// A 16-bit float is held in F32, on its grid: round to nearest even, as ONNX Runtime does.
		switch {
		case x.DType.IsFloat():
			unaryMap(th, out.F32, x.F32, func(v float32) float32 { return tensor.RoundTo(to, v) })
		case isInt(x.DType):
			unaryMap(th, out.F32, x.I64, func(v int64) float32 { return tensor.RoundTo(to, float32(v)) })
		default:
			unaryMap(th, out.F32, x.Bool, func(v bool) float32 {
				if v {
					return 1
				}
				return 0
			})
		}

	case x.DType == tensor.Float32 && to == tensor.Int64:
		unaryMap(th, out.I64, x.F32, func(v float32) int64 { return int64(v) })
	case x.DType == tensor.Float32 && to == tensor.Int32:
		unaryMap(th, out.I64, x.F32, func(v float32) int64 { return int64(int32(int64(v))) })
	case x.DType == tensor.Float32 && to == tensor.Bool:
		unaryMap(th, out.Bool, x.F32, func(v float32) bool { return v != 0 })
	case isInt(x.DType) && to == tensor.Float32:
		unaryMap(th, out.F32, x.I64, func(v int64) float32 { return float32(v) })
	case isInt(x.DType) && to == tensor.Int32:
		unaryMap(th, out.I64, x.I64, func(v int64) int64 { return int64(int32(v)) })
	case isInt(x.DType) && to == tensor.Int64:
		copy(out.I64, x.I64)
	case isInt(x.DType) && to == tensor.Bool:
		unaryMap(th, out.Bool, x.I64, func(v int64) bool { return v != 0 })
	case x.DType == tensor.Bool && to == tensor.Float32:
		unaryMap(th, out.F32, x.Bool, func(v bool) float32 {
			if v {
				return 1
			}
			return 0
		})
	case x.DType == tensor.Bool && isInt(to):
		unaryMap(th, out.I64, x.Bool, func(v bool) int64 {
			if v {
				return 1
			}
			return 0
		})
	default:
		return nil, fmt.Errorf("cast from %v to %v is not supported", x.DType, to)
	}
	return out, nil
}

// arithRow computes one row of a float32 Add ('+'), Sub ('-'), Mul ('*') or Div ('/') in
// package vec, or a plain loop where vec has no such form, when the operands' inner strides
// allow it (sa, sb: 1 for a row, 0 for one value), and reports whether it did; the caller's
// per-element closure does the rest. A closure call per element cost nystrom's broadcast
// Subs and Muls of its 64 × 64 pseudo-inverse about 3 ns a value. The values are the
// loop's, bit for bit: x − c is x + (−c), and c·x is x·c, exactly (a NaN c takes the loop,
// where the payload of the result depends on the operands' order and sign).
func arithRow(kind byte, dst, a []float32, sa int, b []float32, sb int) bool {
	n := len(dst)
	switch {
	case sa == 1 && sb == 1:
		switch kind {
		case '+':
			vec.Add(dst, a[:n], b[:n])
		case '-':
			vec.Sub(dst, a[:n], b[:n])
		case '*':
			for i, x := range a[:n] { // no vector form; a plain loop still saves the call
				dst[i] = x * b[i]
			}
		case '/':
			for i, x := range a[:n] {
				dst[i] = x / b[i]
			}
		default:
			return false
		}
	case sa == 1 && sb == 0:
		c := b[0]
		if c != c && kind == '-' {
			return false // x − NaN is that NaN; x + (−NaN) would flip its sign bit
		}
		copy(dst, a[:n])
		switch kind {
		case '+':
			vec.AddScalar(dst, c)
		case '-':
			vec.AddScalar(dst, -c)
		case '*':
			vec.Scale(dst, c)
		case '/':
			vec.DivScalar(dst, c)
		default:
			return false
		}
	case sa == 0 && sb == 1:
		c := a[0]
		if c != c {
			return false // NaN + NaN is the first one: the operands keep their order
		}
		switch kind {
		case '+':
			copy(dst, b[:n])
			vec.AddScalar(dst, c)
		case '*':
			copy(dst, b[:n])
			vec.Scale(dst, c)
		case '-':
			for i, x := range b[:n] {
				dst[i] = c - x
			}
		case '/':
			for i, x := range b[:n] {
				dst[i] = c / x
			}
		default:
			return false
		}
	default:
		return false
	}
	return true
}
