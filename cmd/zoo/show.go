package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// defaultShowSeq is the default --seq of show, clamped to the model's max_len (clampSeqs).
const defaultShowSeq = "128,512"

func showCommand() *cli.Command {
	return &cli.Command{
		Name:        "show",
		Usage:       "show a variant's hyperparameters, parameters, and cost at given sequence lengths",
		ArgsUsage:   "NAME[.PRESET]",
		Description: examples("zoo show vanilla", "zoo show linformer.tiny --seq 64,128", "zoo show vanilla --set d_model=256 --json"),
		Flags: append(modelFlags(), flagJSON, flagFeed,
			&cli.StringFlag{Name: "seq", Value: defaultShowSeq, Usage: "sequence lengths `N,N,...` at which to count FLOPs and memory (batch 1)"},
		),
		Action: showAction,
	}
}

type showParam struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Value   any    `json:"value"`
	Default any    `json:"default"`
	Doc     string `json:"doc"`
}

type showTensor struct {
	Name   string `json:"name"`
	Shape  []int  `json:"shape"`
	Count  int    `json:"count"`
	Buffer bool   `json:"buffer,omitempty"`
}

type showCost struct {
	N               int              `json:"n"`
	FLOPs           int64            `json:"flops"`
	SeedFLOPs       int64            `json:"seed_formula_flops"`
	ByOp            map[string]int64 `json:"flops_by_op"`
	ActivationBytes int64            `json:"peak_activation_bytes"`
}

type showResult struct {
	Model      string                `json:"model"`
	Version    string                `json:"version"`
	Summary    string                `json:"summary"`
	Paper      string                `json:"paper"`
	Complexity string                `json:"complexity"`
	Seed       uint64                `json:"seed"`
	Weights    zooroot.WeightsSource `json:"weights"`
	Hyper      []showParam           `json:"hyperparameters"`
	Parameters []showTensor          `json:"parameters"`
	ParamCount int64                 `json:"parameter_count"`
	ParamBytes int64                 `json:"parameter_bytes"`
	Costs      []showCost            `json:"costs"`
	Ops        []string              `json:"ops"`
	Feeds      *zooroot.FeedPlan     `json:"text_inputs,omitempty"`
	FeedsError string                `json:"text_inputs_error,omitempty"`
	Meta       map[string]string     `json:"-"`
}

func parseSeq(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--seq %q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func showAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("show: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	seqs, err := parseSeq(c.String("seq"))
	if err != nil {
		return badInput(err)
	}
	m, err := loadModel(c.Context, c, c.Args().First())
	if err != nil {
		return err
	}
	res := showResult{Model: m.Name(), Version: m.Description().Version, Summary: m.Description().Summary, Paper: m.Description().Paper,
		Complexity: m.Description().Complexity, Seed: m.Seed(), Weights: m.Weights(), ParamCount: m.Graph().ParamCount(), Ops: m.Graph().OpTypes()}
	for _, p := range m.Description().Params {
		res.Hyper = append(res.Hyper, showParam{Name: p.Name, Kind: string(p.Kind), Value: m.Config()[p.Name], Default: p.Default, Doc: p.Doc})
	}
	for _, in := range m.Graph().Initializers {
		if graph.IsConstName(in.Name) {
			continue
		}
		res.Parameters = append(res.Parameters, showTensor{Name: in.Name, Shape: in.Tensor.Shape, Count: in.Tensor.Len(), Buffer: in.Buffer})
		if !in.Buffer && in.Tensor.DType == tensor.Float32 && len(in.Tensor.Shape) > 0 { // as ParamCount counts
			res.ParamBytes += int64(in.Tensor.Bytes())
		}
	}
	plan, planErr := planFeeds(m.Graph(), c.StringSlice(flagFeed.Name))
	if planErr != nil && c.IsSet(flagFeed.Name) {
		return badInput(planErr)
	}
	res.Feeds = plan
	if planErr != nil {
		res.FeedsError = planErr.Error()
	}
	maxLen := 0
	if p := m.Description().Caps.MaxLenParam; p != "" {
		maxLen = m.Config().Int(p)
	} else if plan != nil {
		maxLen = plan.MaxLen
		if plan.Seq > 0 {
			maxLen = plan.Seq
		}
	}
	if !c.IsSet("seq") {
		seqs = clampSeqs(c.App.ErrWriter, seqs, maxLen, m.Name())
	}
	d := int64(m.Config().Int("d_model"))
	for _, n := range seqs {
		if maxLen > 0 && n > maxLen {
			return badInputf("--seq %d is longer than %s's maximum length %d (max_len)", n, m.Name(), maxLen)
		}
		shapes := map[string][]int{variant.InputTokens: {1, n}, variant.InputKeyPadding: {1, n}}
		if plan != nil {
			shapes = plan.Shapes(1, n)
		} else if m.FromFile() {
			shapes = fileInputShapes(m.Graph(), n)
		}
		cost, err := m.Graph().Cost(shapes)
		if err != nil {
			return failed(fmt.Errorf("count FLOPs of %s at n=%d: %w", m.Name(), n, err))
		}
		res.Costs = append(res.Costs, showCost{N: n, FLOPs: cost.FLOPs, ByOp: cost.ByOp, ActivationBytes: cost.ActivationBytes,
			SeedFLOPs: int64(m.Config().Int("layers")) * graph.SeedFLOPs(int64(n), d)})
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, res)
	}
	renderShow(c.App.Writer, res)
	return nil
}

// fileInputShapes gives the inputs of a file that takes no text (a float input such as
// "src" (B, n, 128)) their declared shapes, with the first symbolic dimension 1 (the batch)
// and the others n (the sequence), as the cost table's header says.
func fileInputShapes(g *graph.Graph, n int) map[string][]int {
	shapes := map[string][]int{}
	for _, in := range g.Inputs {
		dims := make([]int, len(in.Shape))
		sym := 0
		for i, d := range in.Shape {
			switch {
			case d.Known():
				dims[i] = int(d.Size)
			case sym == 0:
				dims[i], sym = 1, sym+1
			default:
				dims[i], sym = n, sym+1
			}
		}
		shapes[in.Name] = dims
	}
	return shapes
}

// clampSeqs fits the default --seq list to a model's maximum length: a length beyond
// maxLen becomes maxLen (once), with a note on w. An explicit --seq is never clamped: a
// length the model cannot take is an error there.
func clampSeqs(w io.Writer, seqs []int, maxLen int, model string) []int {
	if maxLen <= 0 {
		return seqs
	}
	var out []int
	clamped := false
	for _, n := range seqs {
		if n > maxLen {
			n, clamped = maxLen, true
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if clamped {
		parts := make([]string, len(out))
		for i, n := range out {
			parts[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(w, "zoo show: note: the default --seq %s is clamped to %s's maximum length %d (max_len): showing n = %s\n",
			defaultShowSeq, model, maxLen, strings.Join(parts, ","))
	}
	return out
}

func renderShow(w io.Writer, r showResult) {
	fmt.Fprintf(w, "%s %s — %s\n", r.Model, r.Version, r.Summary)
	var about []string
	for _, f := range [][2]string{{"paper", r.Paper}, {"attention cost", r.Complexity}, {"weights", fmt.Sprint(r.Weights)}} {
		if f[1] != "" {
			about = append(about, f[0]+": "+f[1])
		}
	}
	fmt.Fprintf(w, "%s\n\n", strings.Join(about, "   "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HYPERPARAMETER\tTYPE\tVALUE\tDEFAULT\tDESCRIPTION")
	for _, p := range r.Hyper {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\n", p.Name, p.Kind, p.Value, p.Default, p.Doc)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nparameters: %s (%s as float32; buffers not counted)\n", format.HumanCount(r.ParamCount), format.HumanBytes(r.ParamBytes))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHAPE\tCOUNT")
	for _, p := range r.Parameters {
		name := p.Name
		if p.Buffer {
			name += " (buffer)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", name, tensor.ShapeString(p.Shape), p.Count)
	}
	tw.Flush()
	if r.Feeds != nil {
		fmt.Fprintln(w, "\ntext inputs (how `zoo run` and `zoo parity` feed the model; override with --feed NAME=ROLE)")
		for _, l := range r.Feeds.Describe() {
			l = flagNames(l)
			fmt.Fprintf(w, "  %s\n", l)
		}
		if r.Feeds.MaxLen > 0 {
			fmt.Fprintf(w, "  maximum length %d (%s)\n", r.Feeds.MaxLen, strings.Replace(r.Feeds.MaxLenWhy(), "its position table", "the position table", 1))
		}
		if r.Feeds.VocabRows > 0 {
			fmt.Fprintf(w, "  token ids below %d (the rows of the embedding table %s)\n", r.Feeds.VocabRows, r.Feeds.VocabFrom)
		}
	} else if r.FeedsError != "" {
		fmt.Fprintf(w, "\ntext inputs: %s\n", r.FeedsError)
	}
	fmt.Fprintln(w, "\ncost at batch 1 (exact: every op of the graph, a multiply-add = 2 FLOPs; seed formula: layers × (4·n·d² + 2·n²·d),\n the seed's estimate of standard multi-head attention alone, in multiply-adds, for comparison)")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tFLOPS (EXACT)\tFLOPS (SEED FORMULA)\tPEAK ACTIVATIONS")
	for _, c := range r.Costs {
		seed := "n/a" // a file has no layers and d_model to put in the formula
		if c.SeedFLOPs > 0 {
			seed = format.HumanCount(c.SeedFLOPs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.N, format.HumanCount(c.FLOPs), seed, format.HumanBytes(c.ActivationBytes))
	}
	tw.Flush()
}
