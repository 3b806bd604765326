package zoo

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// ArrayFeed is one graph input fed from the file.
type ArrayFeed struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	From  string `json:"from_dtype"`
}

// BindArrays checks the arrays against g's inputs and converts each to its input's dtype:
// every input needs an array of its name, of its rank, with its fixed sizes, and a symbolic
// dimension has one size across all inputs. Integers and bools convert to floats, integers to
// other integer types when every value fits, floats to float16 or bfloat16 by rounding; floats
// do not convert to integers. Every mismatch is a line of the error (an *InputError), naming the input.
func BindArrays(g *graph.Graph, arrays map[string]*tensor.Tensor, from, model string) (map[string]*tensor.Tensor, []ArrayFeed, error) {
	var errs []error
	bound := map[string]int{}
	boundBy := map[string]string{}
	inputs := map[string]*tensor.Tensor{}
	var feeds []ArrayFeed
	for _, in := range g.Inputs {
		t, ok := arrays[in.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("input %q %s %s: %s has no array of that name", in.Name, in.DType, in.Shape, from))
			continue
		}
		if in.Shape != nil {
			if len(t.Shape) != len(in.Shape) {
				errs = append(errs, fmt.Errorf("input %q wants shape %s (rank %d), %s's array is %v (rank %d)", in.Name, in.Shape, len(in.Shape), from, t.Shape, len(t.Shape)))
				continue
			}
			bad := false
			for i, d := range in.Shape {
				switch {
				case d.Known() && int64(t.Shape[i]) != d.Size:
					errs = append(errs, fmt.Errorf("input %q wants shape %s, %s's array is %v: axis %d is %d, not %d", in.Name, in.Shape, from, t.Shape, i, t.Shape[i], d.Size))
					bad = true
				case !d.Known() && d.Param != "":
					if n, ok := bound[d.Param]; ok && n != t.Shape[i] {
						errs = append(errs, fmt.Errorf("input %q wants shape %s: axis %d (%s) is %d, but input %q set %s to %d", in.Name, in.Shape, i, d.Param, t.Shape[i], boundBy[d.Param], d.Param, n))
						bad = true
					} else if !ok {
						bound[d.Param], boundBy[d.Param] = t.Shape[i], in.Name
					}
				}
			}
			if bad {
				continue
			}
		}
		c, err := convertTo(t, in.DType)
		if err != nil {
			errs = append(errs, fmt.Errorf("input %q is %s, %s's array is %s: %w", in.Name, in.DType, from, t.DType, err))
			continue
		}
		inputs[in.Name] = c
		feeds = append(feeds, ArrayFeed{Name: in.Name, DType: in.DType.String(), Shape: t.Shape, From: t.DType.String()})
	}
	var extra []string
	for name := range arrays {
		if !hasInput(g, name) {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		errs = append(errs, fmt.Errorf("%s has an array %q, which names no input of %s (inputs: %s)", from, name, model, inputList(g)))
	}
	if len(errs) > 0 {
		return nil, nil, &InputError{Err: errors.Join(errs...)}
	}
	return inputs, feeds, nil
}

// convertTo returns t as dtype dt (t itself when it already is), or an error saying why the
// values do not convert.
func convertTo(t *tensor.Tensor, dt tensor.DType) (*tensor.Tensor, error) {
	if t.DType == dt {
		return t, nil
	}
	c, err := tensor.New(dt, t.Shape...)
	if err != nil {
		return nil, err
	}
	switch {
	case dt.IsFloat() && t.DType.IsFloat():
		for i, v := range t.F32 {
			c.F32[i] = tensor.RoundTo(dt, v)
		}
	case dt.IsFloat() && t.DType.IsInt():
		for i, v := range t.I64 {
			c.F32[i] = tensor.RoundTo(dt, float32(v))
		}
	case dt.IsFloat() && t.DType == tensor.Bool:
		for i, v := range t.Bool {
			c.F32[i] = float32(b2i(v))
		}
	case dt.IsInt() && t.DType.IsInt():
		lo, hi := intRange(dt)
		for i, v := range t.I64 {
			if v < lo || v > hi {
				return nil, fmt.Errorf("element %d is %d, outside %s's range", i, v, dt)
			}
			c.I64[i] = v
		}
	case dt.IsInt() && t.DType == tensor.Bool:
		for i, v := range t.Bool {
			c.I64[i] = b2i(v)
		}
	case dt == tensor.Bool && t.DType.IsInt():
		for i, v := range t.I64 {
			if v != 0 && v != 1 {
				return nil, fmt.Errorf("element %d is %d; a bool input takes 0 or 1", i, v)
			}
			c.Bool[i] = v == 1
		}
	default:
		return nil, fmt.Errorf("zoo does not convert %s to %s; save the array as %s", t.DType, dt, dt)
	}
	return c, nil
}

// intRange is the range of an integer dtype held in int64.
func intRange(dt tensor.DType) (int64, int64) {
	switch dt {
	case tensor.Int32:
		return math.MinInt32, math.MaxInt32
	case tensor.Int8:
		return math.MinInt8, math.MaxInt8
	case tensor.Uint8:
		return 0, math.MaxUint8
	}
	return math.MinInt64, math.MaxInt64
}

// ReadArrays reads the arrays of a .npy (one array, fed to the only input), .npz or
// .safetensors file (one array per input name). The arrays may take no more memory than the
// memory guard counts as available (readBudget): a file whose arrays would is refused from its
// headers, before any data is read or inflated, with one line naming the member, its size and
// the budget.
func ReadArrays(path string, g *graph.Graph, model string) (map[string]*tensor.Tensor, error) {
	budget, source, err := readBudget()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", path, err)
	}
	var list []tensorio.Named
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		if len(g.Inputs) != 1 {
			return nil, fmt.Errorf("input %s holds one array, but %s has %d inputs (%s); give a .safetensors or .npz file with one array per input name", path, model, len(g.Inputs), inputList(g))
		}
		t, err := tensorio.ReadNPYLimit(f, budget)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", path, withSource(err, source))
		}
		list = []tensorio.Named{{Name: g.Inputs[0].Name, Tensor: t}}
	case ".npz":
		if list, err = tensorio.ReadNPZ(f, st.Size(), budget); err != nil {
			return nil, fmt.Errorf("input %s: %w", path, withSource(err, source))
		}
	default:
		if list, _, err = tensorio.ReadWeightsLimit(f, budget); err != nil {
			return nil, fmt.Errorf("input %s: %w", path, withSource(err, source))
		}
	}
	out := map[string]*tensor.Tensor{}
	for _, nt := range list {
		out[nt.Name] = nt.Tensor
	}
	return out, nil
}
