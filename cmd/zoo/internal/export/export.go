// Package export writes what `zoo export` writes: a model's graph as an ONNX file, its
// state_dict as safetensors, a Triton model repository entry and KServe manifests, each
// atomically, and the report of the files written (text, one line a file, or JSON).
package export

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Request is what an export writes, as the flags say: the state_dict file (Weights), an
// ONNX file (ONNX), a Triton repository and KServe manifests (directories), at an opset; Named
// says a model was named (else every variant is exported).
type Request struct {
	Weights        string
	ONNX           bool
	Triton, KServe string
	Opset          int
	Named          bool
	// Precision is --precision: "fp32" (or "") writes the float graph, "int8" the linear
	// layers in ONNX Runtime's dynamic-quantization form (onnx.ExportOptions.Precision).
	Precision string
}

// Precisions are the values of export's --precision, the default first: the types an ONNX
// file's linear layers are written in (bf16 and int8-attention are run-time precisions).
var Precisions = []string{"fp32", "int8"}

// PrecisionFlag is export's --precision, the type of the ONNX file's linear layers.
func PrecisionFlag() cli.Flag {
	return &cli.StringFlag{Name: "precision", Value: Precisions[0], Usage: "write the ONNX file's linear layers in `TYPE`: fp32, or int8 " +
		"(ONNX Runtime's quantize_dynamic form: int8 weights per output column, DynamicQuantizeLinear, MatMulInteger, " +
		"the scale Muls; ONNX Runtime runs it, and zoo runs it on its int8 kernels); with --onnx or --triton"}
}

// Check refuses a request that writes nothing, or that the flags given (isSet) do not fit;
// the errors name the flags.
func (r Request) Check(isSet func(string) bool) error {
	if !r.ONNX && r.Weights == "" && r.Triton == "" && r.KServe == "" {
		return errors.New("export: say what to write: --onnx, --weights FILE.safetensors, --triton DIR, --kserve DIR, or several")
	}
	if (r.Triton != "" || r.KServe != "") && !r.Named {
		return errors.New("--triton and --kserve write one model's files: name the model")
	}
	switch p := strings.ToLower(strings.TrimSpace(r.Precision)); {
	case p == "int8" && !r.ONNX && r.Triton == "":
		return errors.New("--precision int8 applies to the ONNX file: add --onnx or --triton (--weights writes the fp32 state_dict)")
	case p != "" && !slices.Contains(Precisions, p):
		return fmt.Errorf("--precision %q: export writes fp32 or int8 files (bf16 is a run-time precision: zoo run --precision bf16)", r.Precision)
	}
	if r.Opset < onnx.MinOpset || r.Opset > onnx.MaxOpset {
		return fmt.Errorf("--opset %d: zoo exports opsets %d to %d", r.Opset, onnx.MinOpset, onnx.MaxOpset)
	}
	if !r.ONNX {
		for f, shown := range map[string]string{"opset": "--opset", "output": "-o/--output"} {
			if isSet(f) && (f == "output" || r.Triton == "") {
				return fmt.Errorf("%s applies to the ONNX file: add --onnx (--weights takes its own file name)", shown)
			}
		}
	}
	return nil
}

// InputError is an error of the user's input (a model that cannot be written as asked, a
// directory that cannot be made), as opposed to a failed write.
type InputError struct{ Err error }

// Error returns the wrapped error's message.
func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *InputError) Unwrap() error { return e.Err }

// File is one file export wrote; --json prints them as {"written": [...]}.
type File struct {
	Model      string `json:"model"`
	Path       string `json:"path"`
	Kind       string `json:"kind"` // "onnx", "weights" or "config" (Triton, KServe)
	Bytes      int64  `json:"bytes"`
	Opset      int    `json:"opset,omitempty"`
	Nodes      int    `json:"nodes,omitempty"`
	Tensors    int    `json:"tensors,omitempty"`
	Parameters int64  `json:"parameters,omitempty"`
	// Precision is "int8" for a file in ONNX Runtime's dynamic-quantization form.
	Precision string `json:"precision,omitempty"`
}

// Report is the files written; it prints each as it is written, or (JSON) all at the end.
type Report struct {
	Written []File `json:"written"`
	w       io.Writer
	json    bool
}

// NewReport returns the report of an export printing to w, as JSON at the end when asJSON.
func NewReport(w io.Writer, asJSON bool) *Report { return &Report{w: w, json: asJSON} }

// Say prints one written file (text), or gathers it for the JSON report.
func (r *Report) Say(files ...File) {
	r.Written = append(r.Written, files...)
	if r.json {
		return
	}
	for _, f := range files {
		switch f.Kind {
		case "config":
			fmt.Fprintf(r.w, "wrote %s\n", f.Path)
		case "weights":
			fmt.Fprintf(r.w, "wrote %s (%s, %s parameters)\n", f.Path, format.Plural(f.Tensors, "tensor"), format.HumanCount(f.Parameters))
		default:
			int8 := ""
			if f.Precision != "" {
				int8 = ", " + f.Precision
			}
			fmt.Fprintf(r.w, "wrote %s (%s, opset %d, %s%s)\n", f.Path, format.HumanBytes(f.Bytes), f.Opset, format.Plural(f.Nodes, "node"), int8)
		}
	}
}

// Finish prints the JSON report ({"written": [...]}, never null); the text was printed as it
// went.
func (r *Report) Finish() error {
	if !r.json {
		return nil
	}
	if r.Written == nil {
		r.Written = []File{}
	}
	return format.WriteJSON(r.w, r)
}

// WriteONNX exports the model name (graph g) as opts says (opset, producer version,
// precision) to path (atomically) and describes the file.
func WriteONNX(path, name string, g *graph.Graph, opts onnx.ExportOptions) (File, error) {
	opts.Precision = strings.ToLower(strings.TrimSpace(opts.Precision))
	if opts.Precision == "fp32" {
		opts.Precision = ""
	}
	data, err := onnx.Export(g, opts)
	if err != nil {
		return File{}, fmt.Errorf("export %s: %w", name, err)
	}
	if err := tensorio.AtomicWriteFile(path, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return File{}, err
	}
	nodes, err := onnx.NodeCount(data)
	if err != nil {
		return File{}, fmt.Errorf("export %s: %w", name, err)
	}
	opset := opts.Opset
	if opset == 0 {
		opset = graph.DefaultOpset
	}
	return File{Model: name, Path: path, Kind: "onnx", Bytes: int64(len(data)), Opset: opset, Nodes: nodes, Precision: opts.Precision}, nil
}

// WriteWeights writes the state_dict of the model name (graph g) to path (atomically), with
// meta (the model's identity) as the file's metadata, and describes the file.
func WriteWeights(path, name string, g *graph.Graph, meta map[string]string) (File, error) {
	err := tensorio.AtomicWriteFile(path, func(w io.Writer) error { return tensorio.WriteSafetensorsMap(w, g.StateDict(), meta) })
	if err != nil {
		return File{}, err
	}
	f := File{Model: name, Path: path, Kind: "weights", Tensors: len(g.StateDict()), Parameters: g.ParamCount()}
	if st, err := os.Stat(path); err == nil {
		f.Bytes = st.Size()
	}
	return f, nil
}

// CheckDir refuses -o DIR of an export of every variant when it is not an existing
// directory.
func CheckDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("-o %s: no such directory (with no model name, export writes one file per variant into -o DIR; create it first)", dir)
	case err != nil:
		return fmt.Errorf("-o %s: %w", dir, err)
	case !st.IsDir():
		return fmt.Errorf("-o %s is not a directory: with no model name, export writes one file per variant into -o DIR (name a model to write one file)", dir)
	}
	return nil
}

func writeText(path, text string) error {
	return tensorio.AtomicWriteFile(path, func(w io.Writer) error { _, err := io.WriteString(w, text); return err })
}
