package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// isTensorFile reports whether `zoo run --input` names arrays (fed to the graph's inputs as
// they are) rather than text.
func isTensorFile(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy", ".npz", ".safetensors":
		return true
	}
	return false
}

// textOnlyFlags are run's flags that shape text into windows; they do not apply to arrays.
var textOnlyFlags = []string{flagTokenizer.Name, flagFeed.Name, "pool", "normalize", "window", "batch", "max-windows"}

// tensorRunReport is what `zoo run` prints for array inputs; --json prints it as JSON.
type tensorRunReport struct {
	Model     string           `json:"model"`
	Weights   weightsReport    `json:"weights"`
	Backend   string           `json:"backend"`
	Level     string           `json:"kernel_level"`
	Why       string           `json:"backend_reason"`
	Threads   int              `json:"threads"`
	Precision string           `json:"precision"`
	Input     string           `json:"input"`
	Inputs    []tensorFeed     `json:"inputs"`
	Outputs   map[string][]int `json:"outputs"`
	BuildMS   float64          `json:"build_ms"`
	CompileMS float64          `json:"compile_ms"`
	RunMS     float64          `json:"run_ms"`
	Written   []string         `json:"written,omitempty"`
}

// tensorFeed is one graph input fed from the file.
type tensorFeed struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	From  string `json:"from_dtype"`
}

// readTensorFile reads the arrays of a .npy (one array, fed to the only input), .npz or
// .safetensors file (one array per input name).
func readTensorFile(path string, g *graph.Graph, model string) (map[string]*tensor.Tensor, error) {
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
		t, err := tensorio.ReadNPY(f)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", path, err)
		}
		list = []tensorio.Named{{Name: g.Inputs[0].Name, Tensor: t}}
	case ".npz":
		// The archive's arrays are held in memory at once, so they may not inflate past it.
		if list, err = tensorio.ReadNPZ(f, st.Size(), 1<<40); err != nil {
			return nil, fmt.Errorf("input %s: %w", path, err)
		}
	default:
		if list, _, err = tensorio.ReadWeightsFrom(f); err != nil {
			return nil, fmt.Errorf("input %s: %w", path, err)
		}
	}
	out := map[string]*tensor.Tensor{}
	for _, nt := range list {
		out[nt.Name] = nt.Tensor
	}
	return out, nil
}

// bindTensors checks the arrays against g's inputs and converts each to its input's dtype:
// every input needs an array of its name, of its rank, with its fixed sizes, and a symbolic
// dimension has one size across all inputs. Integers and bools convert to floats, integers to
// other integer types when every value fits, floats to float16 or bfloat16 by rounding; floats
// do not convert to integers. Every mismatch is a line of the error, naming the input.
func bindTensors(g *graph.Graph, arrays map[string]*tensor.Tensor, from, model string) (map[string]*tensor.Tensor, []tensorFeed, error) {
	var errs []error
	bound := map[string]int{}
	boundBy := map[string]string{}
	inputs := map[string]*tensor.Tensor{}
	var feeds []tensorFeed
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
		feeds = append(feeds, tensorFeed{Name: in.Name, DType: in.DType.String(), Shape: t.Shape, From: t.DType.String()})
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
		return nil, nil, errors.Join(errs...)
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

// runTensorsAction is `zoo run` with --input a .npy, .npz or .safetensors file: one run of
// the graph on those arrays, every output reported and, with --output, written.
func runTensorsAction(c *cli.Context, ref, inPath, outPath string) error {
	for _, f := range textOnlyFlags {
		if c.IsSet(f) {
			return badInputf("--%s does not apply to --input %s: arrays are fed to the inputs as they are (it shapes text into windows)", f, inPath)
		}
	}
	ext := strings.ToLower(filepath.Ext(outPath))
	if outPath != "" {
		if ext != ".json" && ext != ".npy" && ext != ".safetensors" {
			return badInputf("output %s: unknown format %q; use .json, .npy or .safetensors", outPath, ext)
		}
		if err := checkOutputPath(outPath); err != nil {
			return badInput(err)
		}
	}
	if c.Int("threads") < 0 {
		return badInputf("--threads must not be negative")
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	t0 := time.Now()
	m, err := loadModel(c, ref)
	if err != nil {
		return err
	}
	only := ""
	if ext == ".npy" {
		if only, err = selectArrayOutput(m.Graph, c.String("select")); err != nil {
			return badInput(err)
		}
	}
	arrays, err := readTensorFile(inPath, m.Graph, m.displayName())
	if err != nil {
		return badInput(err)
	}
	inputs, feeds, err := bindTensors(m.Graph, arrays, inPath, m.displayName())
	if err != nil {
		return badInputf("%s does not fit %s: %w", inPath, m.displayName(), err)
	}
	if err := guardInputs(m.displayName()+" on "+inPath, m.Graph, inputs, false, 1); err != nil {
		return err
	}
	t1 := time.Now()
	choice, prog, err := compileModel(c, m, backends.Options{Threads: c.Int("threads"), Precision: prec})
	if err != nil {
		return err
	}
	defer prog.Close()
	t2 := time.Now()
	printCompileReport(c.Context, c.App.ErrWriter, prog)
	outs, err := prog.Run(c.Context, inputs)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
	}
	t3 := time.Now()
	rep := tensorRunReport{Model: m.displayName(), Weights: weightsOf(m), Backend: choice.Backend.Name(), Level: choice.Probe.Level,
		Why: choice.Why, Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec), Input: inPath, Inputs: feeds, Outputs: map[string][]int{},
		BuildMS: format.MS(t1.Sub(t0)), CompileMS: format.MS(t2.Sub(t1)), RunMS: format.MS(t3.Sub(t2))}
	if c.Int("threads") > 0 && c.Int("threads") < rep.Threads {
		rep.Threads = c.Int("threads")
	}
	var named []tensorio.Named
	for _, o := range m.Graph.Outputs {
		t := outs[o.Name]
		if t == nil {
			return failed(fmt.Errorf("run %s: the backend returned no output %s", m.displayName(), o.Name))
		}
		rep.Outputs[o.Name] = t.Shape
		if only == "" || o.Name == only {
			named = append(named, tensorio.Named{Name: o.Name, Tensor: t})
		}
	}
	if outPath != "" {
		if err := writeArrays(outPath, named, map[string]string{"model": rep.Model, "backend": rep.Backend + " (" + rep.Level + ")", "input": inPath}); err != nil {
			return failed(err)
		}
		rep.Written = []string{outPath}
	}
	if c.Bool(flagJSON.Name) {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTensorRunReport(c.App.Writer, rep)
	return nil
}

// selectArrayOutput is the output a .npy file holds: --select, else the graph's only output.
func selectArrayOutput(g *graph.Graph, sel string) (string, error) {
	var names []string
	for _, o := range g.Outputs {
		names = append(names, o.Name)
		if sel != "" && o.Name == sel {
			return sel, nil
		}
	}
	switch {
	case sel != "":
		return "", fmt.Errorf("--select %s: the model has no such output (outputs: %s)", sel, strings.Join(names, ", "))
	case len(names) == 1:
		return names[0], nil
	}
	return "", fmt.Errorf("a .npy file holds one output and the model has %d (%s); name one with --select, or write .safetensors or .json", len(names), strings.Join(names, ", "))
}

// writeArrays writes outputs atomically to path: .npy (the one array), .safetensors (every
// array, float16 and bfloat16 as float32, int8 and uint8 as int32, with meta) or .json
// ({"model", "backend", "input", "outputs": {NAME: {"shape", "data"}}}, flat row-major).
func writeArrays(path string, arrays []tensorio.Named, meta map[string]string) error {
	var write func(w io.Writer) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		t := arrays[0].Tensor
		if t.DType == tensor.BFloat16 {
			t, _ = tensor.ToFloat32(t)
		}
		write = func(w io.Writer) error { return tensorio.WriteNPY(w, t) }
	case ".safetensors":
		wide := make([]tensorio.Named, len(arrays))
		for i, nt := range arrays {
			wide[i] = tensorio.Named{Name: nt.Name, Tensor: storable(nt.Tensor)}
		}
		write = func(w io.Writer) error { return tensorio.WriteSafetensors(w, wide, meta) }
	default:
		write = func(w io.Writer) error { return writeArraysJSON(w, arrays, meta) }
	}
	if err := tensorio.AtomicWriteFile(path, write); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// storable returns t in a dtype safetensors files hold here: float16 and bfloat16 as float32,
// int8 and uint8 as int32 (both exact).
func storable(t *tensor.Tensor) *tensor.Tensor {
	switch t.DType {
	case tensor.Float16, tensor.BFloat16:
		c, _ := tensor.ToFloat32(t)
		return c
	case tensor.Int8, tensor.Uint8:
		return &tensor.Tensor{DType: tensor.Int32, Shape: t.Shape, I64: t.I64}
	}
	return t
}

func writeArraysJSON(w io.Writer, arrays []tensorio.Named, meta map[string]string) error {
	var buf []byte
	buf = fmt.Appendf(buf, `{"backend":%s,"input":%s,"model":%s,"outputs":{`, str(meta["backend"]), str(meta["input"]), str(meta["model"]))
	for i, nt := range arrays {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `%s:{"shape":%s,"dtype":%s,"data":[`, str(nt.Name), str(nt.Tensor.Shape), str(nt.Tensor.DType.String()))
		t := nt.Tensor
		for k := 0; k < t.Len(); k++ {
			if k > 0 {
				buf = append(buf, ',')
			}
			switch {
			case t.F32 != nil:
				buf = format.AppendFloat32(buf, t.F32[k])
			case t.I64 != nil:
				buf = fmt.Appendf(buf, "%d", t.I64[k])
			default:
				buf = fmt.Appendf(buf, "%t", t.Bool[k])
			}
		}
		buf = append(buf, "]}"...)
		if len(buf) > 1<<20 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, "}}\n"...)
	_, err := w.Write(buf)
	return err
}

func printTensorRunReport(w io.Writer, r tensorRunReport) {
	fmt.Fprintf(w, "model     %s\n", r.Model)
	fmt.Fprintf(w, "weights   %s\n", r.Weights)
	fmt.Fprintf(w, "backend   %s (%s, %s; %s)\n", r.Backend, r.Level, format.Plural(r.Threads, "thread"), r.Why)
	fmt.Fprintf(w, "precision %s\n", r.Precision)
	var ins []string
	for _, f := range r.Inputs {
		s := f.Name + " " + f.DType + " " + tensor.ShapeString(f.Shape)
		if f.From != f.DType {
			s += " (from " + f.From + ")"
		}
		ins = append(ins, s)
	}
	fmt.Fprintf(w, "input     %s: %s\n", r.Input, strings.Join(ins, ", "))
	fmt.Fprintf(w, "outputs   %s\n", outputShapes(r.Outputs))
	fmt.Fprintf(w, "time      build %.1f ms, compile %.1f ms, run %.1f ms\n", r.BuildMS, r.CompileMS, r.RunMS)
	for _, p := range r.Written {
		fmt.Fprintf(w, "wrote     %s\n", p)
	}
}
