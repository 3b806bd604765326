package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a variant as an ONNX model (--onnx) or its weights as a PyTorch-loadable state_dict (--weights); with no name, every variant as ONNX",
		ArgsUsage: "[NAME[.PRESET]]",
		Description: "With a name, -o is the ONNX file (default: NAME[.PRESET].onnx in the current directory). With no name,\n" +
			"--onnx exports every variant of the registry, one NAME[.PRESET].onnx each, into the directory -o DIR (default:\n" +
			"the current directory), with --preset, --set and --seed applied to each; every variant is resolved first, so a\n" +
			"variant that lacks the preset (or a --set key) is an error before anything is written. An existing file is\n" +
			"replaced atomically, but never a read-only one." +
			examples("zoo export linformer --onnx -o linformer.onnx", "zoo export vanilla --weights vanilla.safetensors",
				"zoo export vanilla.tiny --triton models --kserve deploy"),
		Flags: append(variantFlags(), flagFromWeights, flagJSON,
			&cli.BoolFlag{Name: "onnx", Usage: "write an ONNX model"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "ONNX `FILE`.onnx; with no name, the directory to write into",
				DefaultText: "NAME[.PRESET].onnx; with no name, the current directory"},
			&cli.IntFlag{Name: "opset", Value: graph.DefaultOpset, Usage: fmt.Sprintf("ai.onnx opset (%d to %d), with --onnx", onnx.MinOpset, onnx.MaxOpset)},
			&cli.StringFlag{Name: "weights", Usage: "write every parameter and buffer, by PyTorch state_dict name, to `FILE`.safetensors"},
			&cli.StringFlag{Name: "triton", Usage: "write a Triton model repository into `DIR`: DIR/NAME/1/model.onnx and DIR/NAME/config.pbtxt (ONNX Runtime, dynamic batching)"},
			&cli.StringFlag{Name: "kserve", Usage: "write KServe manifests into `DIR`: a ServingRuntime and InferenceService for zoo serve, an InferenceService for Triton (storageUri pvc://zoo-models/triton, where the --triton repository goes), and a Dockerfile that builds zoo"},
		),
		Action: exportAction,
	}
}

// exportFile is one file export wrote; --json prints them as {"written": [...]}.
type exportFile struct {
	Model      string `json:"model"`
	Path       string `json:"path"`
	Kind       string `json:"kind"` // "onnx", "weights" or "config" (Triton, KServe)
	Bytes      int64  `json:"bytes"`
	Opset      int    `json:"opset,omitempty"`
	Nodes      int    `json:"nodes,omitempty"`
	Tensors    int    `json:"tensors,omitempty"`
	Parameters int64  `json:"parameters,omitempty"`
}

// exportReport is what --json prints.
type exportReport struct {
	Written []exportFile `json:"written"`
}

// say prints one written file (text), or gathers it for the JSON report.
func (r *exportReport) say(c *cli.Context, f exportFile) {
	r.Written = append(r.Written, f)
	if c.Bool(flagJSON.Name) {
		return
	}
	if f.Kind == "config" {
		fmt.Fprintf(c.App.Writer, "wrote %s\n", f.Path)
		return
	}
	if f.Kind == "weights" {
		fmt.Fprintf(c.App.Writer, "wrote %s (%s, %s parameters)\n", f.Path, format.Plural(f.Tensors, "tensor"), format.HumanCount(f.Parameters))
		return
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (%s, opset %d, %s)\n", f.Path, format.HumanBytes(f.Bytes), f.Opset, format.Plural(f.Nodes, "node"))
}

func (r *exportReport) finish(c *cli.Context) error {
	if !c.Bool(flagJSON.Name) {
		return nil
	}
	if r.Written == nil {
		r.Written = []exportFile{}
	}
	return format.WriteJSON(c.App.Writer, r)
}

func exportAction(c *cli.Context) error {
	if c.NArg() > 1 {
		return badInputf("export: want one model name (see `zoo list`), or none with --onnx to export every variant; got %d arguments", c.NArg())
	}
	weights, toONNX := c.String("weights"), c.Bool("onnx")
	triton, kserve := c.String("triton"), c.String("kserve")
	if !toONNX && weights == "" && triton == "" && kserve == "" {
		return badInputf("export: say what to write: --onnx, --weights FILE.safetensors, --triton DIR, --kserve DIR, or several")
	}
	if (triton != "" || kserve != "") && c.NArg() != 1 {
		return badInputf("--triton and --kserve write one model's files: name the model")
	}
	if o := c.Int("opset"); o < onnx.MinOpset || o > onnx.MaxOpset {
		return badInputf("--opset %d: zoo exports opsets %d to %d", o, onnx.MinOpset, onnx.MaxOpset)
	}
	if !toONNX {
		for f, shown := range map[string]string{"opset": "--opset", "output": "-o/--output"} {
			if c.IsSet(f) && (f == "output" || triton == "") {
				return badInputf("%s applies to the ONNX file: add --onnx (--weights takes its own file name)", shown)
			}
		}
	}
	if weights != "" {
		if err := checkExtension("--weights", weights, ".safetensors"); err != nil {
			return badInput(fmt.Errorf("%w (export writes the state_dict as safetensors, which torch loads with safetensors.torch.load_file)", err))
		}
	}
	if c.NArg() == 0 {
		if weights != "" {
			return badInputf("--weights writes one model's state_dict: name the model (zoo export NAME --weights FILE.safetensors)")
		}
		if c.IsSet(flagFromWeights.Name) {
			return badInputf("--from-weights loads one model's state_dict: name the model (zoo export NAME --onnx --from-weights FILE.safetensors)")
		}
		return exportAll(c)
	}
	ref := c.Args().First()
	out := c.String("output")
	if out != "" {
		if err := checkExtension("-o", out, ".onnx"); err != nil {
			return badInput(err)
		}
	}
	// Check the directories before the build; the default ONNX name is known only after it.
	for _, p := range []string{out, weights} {
		if p == "" {
			continue
		}
		if err := checkOutputPath(p); err != nil {
			return badInput(err)
		}
	}
	if out == "" && toONNX {
		if err := tensorio.CheckWritable(ref + ".onnx"); err != nil {
			return badInput(err)
		}
	}
	opts, err := loadOptions(c.Context, c)
	if err != nil {
		return err
	}
	opts.Weights = c.String(flagFromWeights.Name) // export's --weights is the file it writes
	m, err := loadWith(c.Context, c, ref, opts)
	if err != nil {
		return err
	}
	if out == "" && toONNX {
		out = m.Name() + ".onnx"
		if err := checkOutputPath(out); err != nil {
			return badInput(err)
		}
	}
	var rep exportReport
	if weights != "" {
		f, err := writeWeightsFile(weights, m)
		if err != nil {
			return failed(err)
		}
		rep.say(c, f)
	}
	if toONNX {
		f, err := writeONNXFile(out, m, c.Int("opset"))
		if err != nil {
			return failed(err)
		}
		rep.say(c, f)
	}
	if triton != "" {
		files, err := writeTriton(triton, m, c.Int("opset"))
		if err != nil {
			return err
		}
		for _, f := range files {
			rep.say(c, f)
		}
	}
	if kserve != "" {
		files, err := writeKServe(kserve, m)
		if err != nil {
			return err
		}
		for _, f := range files {
			rep.say(c, f)
		}
	}
	return rep.finish(c)
}

// exportAll writes every variant of the registry as NAME[.PRESET].onnx into -o DIR. Every
// variant is resolved (preset, --set) and every path checked before the first build, so
// that bad input writes nothing.
func exportAll(c *cli.Context) error {
	dir := c.String("output")
	if dir == "" {
		dir = "."
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return badInputf("-o %s: no such directory (with no model name, export writes one file per variant into -o DIR; create it first)", dir)
	case err != nil:
		return badInputf("-o %s: %w", dir, err)
	case !st.IsDir():
		return badInputf("-o %s is not a directory: with no model name, export writes one file per variant into -o DIR (name a model to write one file)", dir)
	}
	reg, err := loadRegistry(c)
	if err != nil {
		return err
	}
	type job struct {
		build func() (*zooroot.Model, error)
		path  string
	}
	var jobs []job
	for _, e := range reg.Entries() {
		spec, err := resolveVariant(c.Context, c, e.Name)
		if err != nil {
			return fmt.Errorf("export every variant: %w", err)
		}
		name := spec.Entry.Name
		if spec.Preset != "" {
			name += "." + spec.Preset
		}
		path := filepath.Join(dir, name+".onnx")
		if err := checkOutputPath(path); err != nil {
			return badInput(err)
		}
		seed := c.Uint64(flagSeed.Name)
		jobs = append(jobs, job{path: path, build: func() (*zooroot.Model, error) {
			m, err := spec.Build(c.Context, seed)
			if err != nil {
				return nil, fmt.Errorf("build %s: %w", name, err)
			}
			return m, nil
		}})
	}
	var rep exportReport
	for _, j := range jobs {
		m, err := j.build()
		if err != nil {
			return err
		}
		f, err := writeONNXFile(j.path, m, c.Int("opset"))
		if err != nil {
			return failed(err)
		}
		rep.say(c, f)
	}
	return rep.finish(c)
}

// writeONNXFile exports m at opset to path (atomically) and describes the file.
func writeONNXFile(path string, m *zooroot.Model, opset int) (exportFile, error) {
	data, err := onnx.Export(m.Graph(), onnx.ExportOptions{Opset: opset, ProducerVersion: version})
	if err != nil {
		return exportFile{}, fmt.Errorf("export %s: %w", m.Name(), err)
	}
	if err := tensorio.AtomicWriteFile(path, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return exportFile{}, err
	}
	nodes, err := onnx.NodeCount(data)
	if err != nil {
		return exportFile{}, fmt.Errorf("export %s: %w", m.Name(), err)
	}
	return exportFile{Model: m.Name(), Path: path, Kind: "onnx", Bytes: int64(len(data)), Opset: opset, Nodes: nodes}, nil
}

// writeWeightsFile writes m's state_dict to path (atomically) and describes the file.
func writeWeightsFile(path string, m *zooroot.Model) (exportFile, error) {
	if err := tensorio.AtomicWriteFile(path, func(w io.Writer) error { return writeWeights(w, m) }); err != nil {
		return exportFile{}, err
	}
	f := exportFile{Model: m.Name(), Path: path, Kind: "weights", Tensors: len(m.Graph().StateDict()), Parameters: m.Graph().ParamCount()}
	if st, err := os.Stat(path); err == nil {
		f.Bytes = st.Size()
	}
	return f, nil
}

// writeWeights writes the state_dict with the model's identity as metadata.
func writeWeights(w io.Writer, m *zooroot.Model) error {
	return tensorio.WriteSafetensorsMap(w, m.Graph().StateDict(), map[string]string{
		"variant": m.Variant(), "config": m.Config().JSON(), "seed": fmt.Sprint(m.Seed()),
	})
}
