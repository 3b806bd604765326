package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:        "export",
		Usage:       "write a variant as an ONNX model (--onnx) or its weights as a PyTorch-loadable state_dict (--weights)",
		ArgsUsage:   "NAME[.PRESET]",
		Description: examples("zoo export linformer --onnx -o linformer.onnx", "zoo export vanilla.tiny --onnx --opset 13", "zoo export vanilla --weights vanilla.safetensors"),
		Flags: append(modelFlags(),
			&cli.BoolFlag{Name: "onnx", Usage: "write an ONNX model"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "ONNX `FILE` (default: NAME[.PRESET].onnx)"},
			&cli.IntFlag{Name: "opset", Value: graph.DefaultOpset, Usage: fmt.Sprintf("ai.onnx opset (%d to %d)", onnx.MinOpset, onnx.MaxOpset)},
			&cli.StringFlag{Name: "weights", Usage: "write every parameter and buffer, by PyTorch state_dict name, to `FILE`.safetensors"},
		),
		Action: exportAction,
	}
}

func exportAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("export: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	weights := c.String("weights")
	if !c.Bool("onnx") && weights == "" {
		return badInputf("export: say what to write: --onnx, --weights FILE.safetensors, or both")
	}
	if o := c.Int("opset"); o < onnx.MinOpset || o > onnx.MaxOpset {
		return badInputf("--opset %d: zoo exports opsets %d to %d", o, onnx.MinOpset, onnx.MaxOpset)
	}
	out := c.String("output")
	if out == "" && c.Bool("onnx") {
		out = c.Args().First() + ".onnx"
	}
	for _, p := range []string{out, weights} {
		if p == "" {
			continue
		}
		if err := tensorio.CheckWritable(p); err != nil {
			return badInput(err)
		}
	}
	m, err := loadModel(c, c.Args().First())
	if err != nil {
		return err
	}
	if out == c.Args().First()+".onnx" {
		out = m.displayName() + ".onnx"
	}
	if weights != "" {
		if err := tensorio.AtomicWriteFile(weights, func(w io.Writer) error { return writeWeights(w, m) }); err != nil {
			return failed(err)
		}
		fmt.Fprintf(c.App.Writer, "wrote %s (%d tensors, %s parameters)\n", weights, len(m.Graph.StateDict()), humanCount(m.Graph.ParamCount()))
	}
	if c.Bool("onnx") {
		data, err := onnx.Export(m.Graph, onnx.ExportOptions{Opset: c.Int("opset"), ProducerVersion: version})
		if err != nil {
			return failed(fmt.Errorf("export %s: %w", m.displayName(), err))
		}
		if err := tensorio.AtomicWriteFile(out, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return failed(err)
		}
		fmt.Fprintf(c.App.Writer, "wrote %s (%s, opset %d, %d nodes)\n", out, humanBytes(int64(len(data))), c.Int("opset"), len(m.Graph.Nodes))
	}
	return nil
}

// writeWeights writes the state_dict with the model's identity as metadata.
func writeWeights(w io.Writer, m *model) error {
	return tensorio.WriteSafetensorsMap(w, m.Graph.StateDict(), map[string]string{
		"variant": m.Name, "config": m.Config.JSON(), "seed": fmt.Sprint(m.Seed),
	})
}
