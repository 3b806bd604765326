package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/export"
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

func exportAction(c *cli.Context) error {
	if c.NArg() > 1 {
		return badInputf("export: want one model name (see `zoo list`), or none with --onnx to export every variant; got %d arguments", c.NArg())
	}
	weights, toONNX, triton, kserve, opset := c.String("weights"), c.Bool("onnx"), c.String("triton"), c.String("kserve"), c.Int("opset")
	req := export.Request{Weights: weights, ONNX: toONNX, Triton: triton, KServe: kserve, Opset: opset, Named: c.NArg() == 1}
	if err := req.Check(c.IsSet); err != nil {
		return badInput(err)
	}
	if weights != "" {
		if err := checkExtension("--weights", weights, ".safetensors"); err != nil {
			return badInput(fmt.Errorf("%w (export writes the state_dict as safetensors, which torch loads with safetensors.torch.load_file)", err))
		}
	}
	if c.NArg() == 0 {
		return exportAllAction(c)
	}
	ref, out := c.Args().First(), c.String("output")
	if out != "" {
		if err := checkExtension("-o", out, ".onnx"); err != nil {
			return badInput(err)
		}
	}
	// Check the directories before the build; the default ONNX name is known only after it.
	for _, p := range []string{out, weights} {
		if err := checkOutputPath(p); p != "" && err != nil {
			return badInput(err)
		}
	}
	if out == "" && toONNX {
		if err := tensorio.CheckWritable(ref + ".onnx"); err != nil {
			return badInput(err)
		}
	}
	m, err := loadExported(c.Context, c, ref)
	if err != nil {
		return err
	}
	if out == "" && toONNX {
		out = m.Name() + ".onnx"
		if err := checkOutputPath(out); err != nil {
			return badInput(err)
		}
	}
	rep, name := export.NewReport(c.App.Writer, c.Bool(flagJSON.Name)), m.Name()
	if weights != "" {
		f, err := export.WriteWeights(weights, name, m.Graph(), map[string]string{"variant": m.Variant(), "config": m.Config().JSON(), "seed": fmt.Sprint(m.Seed())})
		if err != nil {
			return failed(err)
		}
		rep.Say(f)
	}
	if toONNX {
		f, err := export.WriteONNX(out, name, m.Graph(), opset, version)
		if err != nil {
			return failed(err)
		}
		rep.Say(f)
	}
	if triton != "" {
		files, err := export.WriteTriton(triton, name, m.Graph(), opset, version)
		if err != nil {
			return exportError(err)
		}
		rep.Say(files...)
	}
	if kserve != "" {
		files, err := export.WriteKServe(kserve, name, m.Graph(), tokenizerPath(m), version)
		if err != nil {
			return exportError(err)
		}
		rep.Say(files...)
	}
	return rep.Finish()
}

// exportError is bad input for an export.InputError, else a failed job.
func exportError(err error) error {
	var ie *export.InputError
	if errors.As(err, &ie) {
		return badInput(err)
	}
	return failed(err)
}

// exportAllAction is `zoo export --onnx` without a name (exportAction has checked the
// flags): it writes every variant of the registry as NAME[.PRESET].onnx into -o DIR. Every
// variant is resolved (preset, --set) and every path checked before the first build, so that
// bad input writes nothing.
func exportAllAction(c *cli.Context) error {
	if c.String("weights") != "" {
		return badInputf("--weights writes one model's state_dict: name the model (zoo export NAME --weights FILE.safetensors)")
	}
	if c.IsSet(flagFromWeights.Name) {
		return badInputf("--from-weights loads one model's state_dict: name the model (zoo export NAME --onnx --from-weights FILE.safetensors)")
	}
	dir := c.String("output")
	if dir == "" {
		dir = "."
	}
	if err := export.CheckDir(dir); err != nil {
		return badInput(err)
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
		name := joinPreset(spec.Entry.Name, spec.Preset)
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
	rep := export.NewReport(c.App.Writer, c.Bool(flagJSON.Name))
	for _, j := range jobs {
		m, err := j.build()
		if err != nil {
			return err
		}
		f, err := export.WriteONNX(j.path, m.Name(), m.Graph(), c.Int("opset"), version)
		if err != nil {
			return failed(err)
		}
		rep.Say(f)
	}
	return rep.Finish()
}

// loadExported loads the model export writes: --from-weights loads a state_dict (export's
// --weights is the file it writes).
func loadExported(ctx context.Context, c flags, ref string) (*zooroot.Model, error) {
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, err
	}
	opts.Weights = c.String(flagFromWeights.Name)
	return loadWith(ctx, c, ref, opts)
}

// tokenizerPath is the model's tokenizer file, "" for the byte tokenizer (or none that loads).
func tokenizerPath(m *zooroot.Model) string {
	if tk, err := m.Tokenizer(); err == nil {
		return tk.Path
	}
	return ""
}
