package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "time every op type and node of one run (ms, % of the run, GFLOP/s, bytes moved) and write a Chrome trace",
		ArgsUsage: "NAME[.PRESET]|FILE.onnx",
		Description: "Runs the model on a batch of --batch × --seq tokens of the sample text (ids wrapped to the model's\n" +
			"vocabulary, no padding): --warmup untimed runs, then --reps profiled runs in which the backend reads the clock\n" +
			"around every step. Times are means per run. A step is a graph node or a fused kernel of the backend, which\n" +
			"does the work of several nodes: it is listed under its own name (FusedAttention, FusedLinear, ...) with the\n" +
			"ops it replaced in brackets. FLOPs are the op table's cost rules of the nodes a step covers (a multiply-add\n" +
			"counts 2); bytes moved are the op table's bytes of a plain node, and for a fused step the values it reads\n" +
			"(weights included) and writes, its intermediates not counted. \"steps\" says how much of the measured run the steps account for.\n" +
			"--trace writes every profiled run's steps as Chrome trace events (one complete event, \"ph\":\"X\", per step\n" +
			"run; times in µs), which chrome://tracing and https://ui.perfetto.dev open. Backends whose programs cannot\n" +
			"time their steps (cuda) say so.\n" +
			"--train profiles a training step instead: the program zoo train compiles (forward pass, cross-entropy\n" +
			"and every parameter's gradient; mlm, dropout as the build sets it) on --batch windows of --seq tokens of the\n" +
			"sample text repeated. The optimizer's update runs outside that program and is not listed." +
			examples("zoo profile linformer --seq 512 --trace trace.json", "zoo profile model.onnx --batch 4 --json",
				"zoo profile vanilla --train --batch 8 --seq 128 --threads 2 --reps 2"),
		Flags: append(modelFlags(),
			&cli.IntFlag{Name: "seq", Value: 128, Usage: "tokens per sequence `N` (at most the model's maximum length)"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "sequences per batch `B`"},
			&cli.StringFlag{Name: "trace", Usage: "write a Chrome trace of the profiled runs to `FILE.json`"},
			&cli.IntFlag{Name: "reps", Aliases: []string{"r"}, Value: 3, Usage: "profiled runs"},
			&cli.IntFlag{Name: "warmup", Value: 1, Usage: "untimed runs before the profiled ones"},
			&cli.IntFlag{Name: "top", Value: 20, Usage: "nodes listed in the table, slowest first (0: every step, in order)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			&cli.BoolFlag{Name: "train", Usage: "profile one training step (loss and gradients, as zoo train runs it) instead of inference"},
			flagCheckpointActivations,
			flagPrecision(), flagFeed, flagBackend, flagJSON,
		),
		Action: profileAction,
	}
}

// profileReport is what `zoo profile` prints; --json prints it as JSON. Times are means per
// profiled run.
type profileReport struct {
	Model   string                `json:"model"`
	Weights zooroot.WeightsSource `json:"weights"`
	// Train says the runs were training steps (zoo profile --train): loss and gradients.
	Train   bool   `json:"train,omitempty"`
	Backend string `json:"backend"`
	Level   string `json:"kernel_level"`
	Threads int    `json:"threads"`
	// Precision is the matrix-product math the program was compiled with: fp32 or bf16.
	Precision string `json:"precision"`
	Batch     int    `json:"batch"`
	N         int    `json:"n"`
	Reps      int    `json:"reps"`
	Warmup    int    `json:"warmup"`
	// RunMS is the whole run as the backend measured it; StepsMS the sum of its steps, and
	// Accounted their ratio.
	RunMS     float64 `json:"run_ms"`
	StepsMS   float64 `json:"steps_ms"`
	Accounted float64 `json:"accounted"`
	// FLOPs is the sum over steps (per run); 0 when the graph's cost cannot be counted.
	FLOPs  int64         `json:"flops"`
	GFLOPS float64       `json:"gflops_per_s"`
	Ops    []profileOp   `json:"ops"`
	Nodes  []profileStep `json:"nodes"`
	Trace  string        `json:"trace,omitempty"`
	// NoCost says why FLOPs are missing ("" when they are counted).
	NoCost string `json:"no_cost,omitempty"`
	// Compile is the backend's compile report: which fusions applied and why each candidate
	// that did not fuse was refused ("" when the backend has none).
	Compile string `json:"compile_report,omitempty"`
}

// profileOp is the time of one op type: a graph op, or a fused kernel with the ops it
// replaced ("FusedLinear[MatMul+Add+Relu]").
type profileOp struct {
	Op      string  `json:"op"`
	Fused   bool    `json:"fused"`
	Calls   int     `json:"calls"`
	MS      float64 `json:"ms"`
	Percent float64 `json:"percent"`
	FLOPs   int64   `json:"flops"`
	GFLOPS  float64 `json:"gflops_per_s"`
	Bytes   int64   `json:"bytes_moved"`
}

// profileStep is one step of the run, in the order it ran.
type profileStep struct {
	Name    string        `json:"name"`
	Op      string        `json:"op"`
	Kind    string        `json:"kind"` // the op type it is counted under in Ops
	Fused   bool          `json:"fused"`
	Covers  []profileNode `json:"covers,omitempty"` // the nodes a fused step does the work of
	MS      float64       `json:"ms"`
	Percent float64       `json:"percent"`
	FLOPs   int64         `json:"flops"`
	GFLOPS  float64       `json:"gflops_per_s"`
	Bytes   int64         `json:"bytes_moved"`
}

// profileNode names a graph node.
type profileNode struct {
	Name string `json:"name"`
	Op   string `json:"op"`
}

func profileAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("profile: want one model name (see `zoo list`) or .onnx file, got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	n, b, reps, warmup, top := c.Int("seq"), c.Int("batch"), c.Int("reps"), c.Int("warmup"), c.Int("top")
	switch {
	case n < 1 || b < 1 || reps < 1:
		return badInputf("--seq, --batch and --reps must be at least 1 (got %d, %d, %d)", n, b, reps)
	case warmup < 0 || top < 0 || c.Int("threads") < 0:
		return badInputf("--warmup, --top and --threads must not be negative")
	}
	tracePath := c.String("trace")
	if tracePath != "" {
		if err := checkExtension("--trace", tracePath, ".json"); err != nil {
			return badInput(err)
		}
		if err := checkOutputPath(tracePath); err != nil {
			return badInputf("--trace: %w", err)
		}
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if c.Bool("train") {
		return profileTrain(c, ref, b, n, prec)
	}
	if c.Bool(flagCheckpointActivations.Name) {
		return badInputf("--checkpoint-activations changes only a training step; add --train")
	}
	m, err := loadModel(c.Context, c, ref)
	if err != nil {
		return err
	}
	plan, err := planFeeds(m.Graph(), c.StringSlice(flagFeed.Name))
	if err != nil {
		return badInput(err)
	}
	if err := profileShape(m, plan, &b, &n, c.IsSet("batch"), c.IsSet("seq")); err != nil {
		return badInput(err)
	}
	inputs, err := plan.Tensors(fullBatch(b, n, plan.VocabRows), 0)
	if err != nil {
		return failed(fmt.Errorf("feed %s: %w", m.Name(), err))
	}
	if err := zooroot.GuardMemory(m.Name(), m.Graph(), zooroot.MemoryRun{Batch: b, N: n, Shapes: plan.Shapes, BatchOption: "--batch", NOption: "--seq"}); err != nil {
		return err
	}
	choice, prog, err := compileModel(m, backends.Options{Threads: c.Int("threads"), Precision: prec})
	if err != nil {
		return err
	}
	defer prog.Close()
	profiler, err := profilerOf(prog, choice.Backend.Name())
	if err != nil {
		return badInput(err)
	}
	runs, err := profileRuns(c, prog, profiler, inputs)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	rep := profileReport{Model: m.Name(), Weights: m.Weights(), Backend: choice.Backend.Name(), Level: choice.Probe.Level,
		Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec), Batch: b, N: n}
	return reportProfile(c, &rep, runs, m.Graph(), plan.Shapes(b, n), prog)
}

// profileRuns runs prog --warmup times untimed and then --reps times profiled on inputs.
func profileRuns(c *cli.Context, prog backends.Program, profiler backends.Profiler, inputs map[string]*tensor.Tensor) ([]traceRun, error) {
	ctx := c.Context
	for i := 0; i < c.Int("warmup"); i++ {
		if _, err := prog.Run(ctx, inputs); err != nil {
			return nil, err
		}
	}
	reps := c.Int("reps")
	runs := make([]traceRun, 0, reps)
	first := time.Now()
	for i := 0; i < reps; i++ {
		at := time.Since(first)
		_, prof, err := profiler.RunProfiled(ctx, inputs)
		if err != nil {
			return nil, err
		}
		runs = append(runs, traceRun{at: at, prof: prof})
	}
	return runs, nil
}

// reportProfile completes rep (filled up to its shape) from the profiled runs of prog, the
// graph it was compiled from and that graph's input shapes, writes --trace and prints the
// report (--json: as JSON).
func reportProfile(c *cli.Context, rep *profileReport, runs []traceRun, g *graph.Graph, shapes map[string][]int, prog backends.Program) error {
	rep.Reps, rep.Warmup, rep.Trace = c.Int("reps"), c.Int("warmup"), c.String("trace")
	if t := c.Int("threads"); t > 0 && t < rep.Threads {
		rep.Threads = t
	}
	costs, err := newStepCosts(g, shapes)
	if err != nil {
		rep.NoCost = err.Error()
	}
	steps, err := summarizeProfile(rep, runs, costs)
	if err != nil {
		return failed(fmt.Errorf("profile %s: %w", rep.Model, err))
	}
	if r, ok := prog.(backends.CompileReporter); ok {
		rep.Compile = r.CompileReport()
	}
	if rep.Trace != "" {
		title := fmt.Sprintf("zoo profile %s on %s, batch %d, n %d", rep.Model, rep.Backend, rep.Batch, rep.N)
		if rep.Train {
			title += ", training step"
		}
		err := tensorio.AtomicWriteFile(rep.Trace, func(w io.Writer) error { return writeTrace(w, title, runs, steps) })
		if err != nil {
			return failed(fmt.Errorf("--trace: %w", err))
		}
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rep)
	}
	printProfile(c.App.Writer, *rep, c.Int("top"))
	return nil
}

// profilerOf returns p's step timer, or an error saying that backend's programs have none.
func profilerOf(p backends.Program, backend string) (backends.Profiler, error) {
	if pr, ok := p.(backends.Profiler); ok {
		return pr, nil
	}
	return nil, fmt.Errorf("backend %s cannot profile: its programs do not time their steps; use --backend cpu", backend)
}

// profileShape settles the batch and length to profile: the inputs' static sizes where the
// model fixes them (an explicit flag that disagrees is an error), and a length within the
// model's maximum.
func profileShape(m *zooroot.Model, plan *zooroot.FeedPlan, b, n *int, batchSet, seqSet bool) error {
	if plan.Batch > 0 {
		if batchSet && *b != plan.Batch {
			return fmt.Errorf("--batch %d: %s's inputs are fixed at batch %d (omit --batch)", *b, m.Name(), plan.Batch)
		}
		*b = plan.Batch
	}
	if plan.Seq > 0 {
		if seqSet && *n != plan.Seq {
			return fmt.Errorf("--seq %d: %s's inputs are fixed at %d tokens (omit --seq)", *n, m.Name(), plan.Seq)
		}
		*n = plan.Seq
		return nil
	}
	maxLen, from := 0, ""
	if p := m.Description().Caps.MaxLenParam; p != "" && !m.FromFile() {
		maxLen, from = m.Config().Int(p), "max_len; pass a shorter --seq or --set max_len=N"
	} else if plan.MaxLen > 0 {
		maxLen, from = plan.MaxLen, plan.MaxLenWhy()
	}
	if maxLen > 0 && *n > maxLen {
		if !seqSet {
			*n = maxLen
			return nil
		}
		return fmt.Errorf("--seq %d is longer than %s's maximum length %d (%s)", *n, m.Name(), maxLen, from)
	}
	return nil
}

// fullBatch is b rows of n token ids of the built-in sample text (its bytes, wrapped
// around, and taken modulo vocab when vocab > 0 so that any embedding table takes them),
// none padded.
func fullBatch(b, n, vocab int) *tokenize.Batch {
	ids := tokenize.Encode(zooroot.SampleText)
	if len(ids) == 0 {
		ids = []int64{1}
	}
	bt := &tokenize.Batch{B: b, N: n, Tokens: make([]int64, b*n), Lengths: make([]int, b)}
	for i := range bt.Tokens {
		id := ids[i%len(ids)]
		if vocab > 0 {
			id %= int64(vocab)
		}
		bt.Tokens[i] = id
	}
	for i := range bt.Lengths {
		bt.Lengths[i] = n
	}
	return bt
}

// traceRun is one profiled run and when it began, from the start of the first.
type traceRun struct {
	at   time.Duration
	prof *backends.Profile
}

// stepCosts prices the steps of a run from the graph: a node's FLOPs and bytes by its op's
// cost rule, and the bytes a fused step reads and writes (the values its nodes read that
// none of them makes, constants included, and those they make that something else reads).
// The zero value counts nothing.
type stepCosts struct {
	nodes   map[*graph.Node]graph.OpCost
	bytes   map[string]int64 // per value
	readers map[string][]*graph.Node
	outputs map[string]bool
}

// newStepCosts counts g's costs at the graph-input shapes; the error says why they cannot
// be counted (an op without a cost rule), and the stepCosts returned is then the zero one.
func newStepCosts(g *graph.Graph, shapes map[string][]int) (stepCosts, error) {
	nodes, err := g.NodeCosts(shapes)
	if err != nil {
		return stepCosts{}, err
	}
	vb, err := g.ValueBytes(shapes)
	if err != nil {
		return stepCosts{}, err
	}
	sc := stepCosts{nodes: nodes, bytes: vb, readers: map[string][]*graph.Node{}, outputs: map[string]bool{}}
	for _, nd := range g.Nodes {
		for _, in := range nd.Inputs {
			sc.readers[in] = append(sc.readers[in], nd)
		}
	}
	for _, o := range g.Outputs {
		sc.outputs[o.Name] = true
	}
	return sc, nil
}

// of returns a step's FLOPs and bytes moved (measured, its tensors as they ran, where the
// graph's costs are not counted).
func (sc stepCosts) of(st backends.StepTime) (flops, bytes int64) {
	if sc.nodes == nil {
		return 0, st.IOBytes
	}
	inside := map[*graph.Node]bool{}
	made := map[string]bool{}
	for _, nd := range st.Nodes {
		oc := sc.nodes[nd]
		flops, bytes = flops+oc.FLOPs, bytes+oc.Bytes
		inside[nd] = true
		for _, o := range nd.Outputs {
			made[o] = true
		}
	}
	if !st.Fused {
		return flops, bytes
	}
	bytes = 0
	counted := map[string]bool{}
	for _, nd := range st.Nodes {
		for _, in := range nd.Inputs {
			if in != "" && !made[in] && !counted[in] {
				counted[in] = true
				bytes += sc.bytes[in]
			}
		}
		for _, o := range nd.Outputs {
			if o == "" || counted[o] {
				continue
			}
			used := sc.outputs[o]
			for _, r := range sc.readers[o] {
				used = used || !inside[r]
			}
			if used {
				counted[o] = true
				bytes += sc.bytes[o]
			}
		}
	}
	return flops, bytes
}

// summarizeProfile fills rep's times, FLOPs and tables from the profiled runs (the same
// steps each time) and the graph's costs, and returns the steps in order.
func summarizeProfile(rep *profileReport, runs []traceRun, costs stepCosts) ([]profileStep, error) {
	if len(runs) == 0 || len(runs[0].prof.Steps) == 0 {
		return nil, fmt.Errorf("no step was profiled")
	}
	nsteps := len(runs[0].prof.Steps)
	var total time.Duration
	stepTime := make([]time.Duration, nsteps)
	for _, r := range runs {
		if len(r.prof.Steps) != nsteps {
			return nil, fmt.Errorf("the runs ran different steps (%d, then %d)", nsteps, len(r.prof.Steps))
		}
		total += r.prof.Total
		for i, st := range r.prof.Steps {
			stepTime[i] += st.Duration
		}
	}
	reps := float64(len(runs))
	msOf := func(d time.Duration) float64 { return d.Seconds() * 1000 / reps }
	rep.RunMS = msOf(total)
	pct := func(ms float64) float64 {
		if rep.RunMS <= 0 {
			return 0
		}
		return 100 * ms / rep.RunMS
	}
	gflops := func(flops int64, ms float64) float64 {
		if ms <= 0 {
			return 0
		}
		return float64(flops) / (ms * 1e6)
	}
	steps := make([]profileStep, nsteps)
	byKind := map[string]*profileOp{}
	var order []string
	var stepsMS float64
	for i, st := range runs[0].prof.Steps {
		ps := profileStep{Name: st.Name, Op: st.Op, Fused: st.Fused, MS: msOf(stepTime[i])}
		ps.FLOPs, ps.Bytes = costs.of(st)
		var ops []string
		for _, nd := range st.Nodes {
			if st.Fused {
				ps.Covers = append(ps.Covers, profileNode{Name: nd.Name, Op: nd.Op})
				if !slices.Contains(ops, nd.Op) {
					ops = append(ops, nd.Op)
				}
			}
		}
		ps.Kind = st.Op
		if st.Fused {
			ps.Kind = st.Op + "[" + strings.Join(ops, "+") + "]"
		}
		ps.Percent, ps.GFLOPS = pct(ps.MS), gflops(ps.FLOPs, ps.MS)
		steps[i] = ps
		stepsMS += ps.MS
		rep.FLOPs += ps.FLOPs
		k := byKind[ps.Kind]
		if k == nil {
			k = &profileOp{Op: ps.Kind, Fused: ps.Fused}
			byKind[ps.Kind] = k
			order = append(order, ps.Kind)
		}
		k.Calls++
		k.MS += ps.MS
		k.FLOPs += ps.FLOPs
		k.Bytes += ps.Bytes
	}
	rep.StepsMS, rep.Nodes = stepsMS, steps
	if rep.RunMS > 0 {
		rep.Accounted = stepsMS / rep.RunMS
	}
	rep.GFLOPS = gflops(rep.FLOPs, rep.RunMS)
	for _, kind := range order {
		k := byKind[kind]
		k.Percent, k.GFLOPS = pct(k.MS), gflops(k.FLOPs, k.MS)
		rep.Ops = append(rep.Ops, *k)
	}
	sort.SliceStable(rep.Ops, func(i, j int) bool { return rep.Ops[i].MS > rep.Ops[j].MS })
	return steps, nil
}

// printProfile renders the report as two tables: op types by time, and the top slowest
// steps (every step in order when top is 0).
func printProfile(w io.Writer, rep profileReport, top int) {
	what := ""
	if rep.Train {
		what = " training step (loss and gradients)"
	}
	fmt.Fprintf(w, "%s%s on %s (%s, %s, %s), batch %d × n %d: %s after %s\n",
		rep.Model, what, rep.Backend, rep.Level, format.Plural(rep.Threads, "thread"), rep.Precision, rep.Batch, rep.N,
		format.Plural(rep.Reps, "profiled run"), format.Plural(rep.Warmup, "warm-up run"))
	fmt.Fprintf(w, "run %.3f ms, steps %.3f ms (%.1f %% of the run)", rep.RunMS, rep.StepsMS, 100*rep.Accounted)
	if rep.NoCost == "" {
		fmt.Fprintf(w, ", %s FLOP, %.2f GFLOP/s", format.HumanCount(rep.FLOPs), rep.GFLOPS)
	}
	fmt.Fprintln(w)
	if rep.NoCost != "" {
		fmt.Fprintf(w, "no FLOP counts: %s\n", rep.NoCost)
	}
	cell := func(flops int64, gf float64) string {
		if rep.NoCost != "" {
			return "-"
		}
		if flops == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f", gf)
	}
	fmt.Fprintln(w, "\nby op type:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ms\t%\tcalls\tGFLOP/s\tmoved\t  op")
	for _, o := range rep.Ops {
		fmt.Fprintf(tw, "%.3f\t%.1f\t%d\t%s\t%s\t  %s\n", o.MS, o.Percent, o.Calls, cell(o.FLOPs, o.GFLOPS), format.HumanBytes(o.Bytes), o.Op)
	}
	tw.Flush()
	list := rep.Nodes
	title := fmt.Sprintf("\nevery step, in order (%d):", len(list))
	if top > 0 && top < len(list) {
		list = slices.Clone(list)
		sort.SliceStable(list, func(i, j int) bool { return list[i].MS > list[j].MS })
		list = list[:top]
		title = fmt.Sprintf("\nslowest %d of %d steps:", top, len(rep.Nodes))
	}
	fmt.Fprintln(w, title)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ms\t%\tGFLOP/s\tmoved\t  node\t  op")
	for _, s := range list {
		name := s.Name
		if s.Fused {
			name += " (fused, " + format.Plural(len(s.Covers), "node") + ")"
		}
		fmt.Fprintf(tw, "%.3f\t%.1f\t%s\t%s\t  %s\t  %s\n", s.MS, s.Percent, cell(s.FLOPs, s.GFLOPS), format.HumanBytes(s.Bytes), name, s.Kind)
	}
	tw.Flush()
	if rep.Compile != "" {
		fmt.Fprintf(w, "\ncompile report (fusions applied, and why the others did not):\n%s", rep.Compile)
	}
	if rep.Trace != "" {
		fmt.Fprintf(w, "\ntrace: %s (open in chrome://tracing or https://ui.perfetto.dev)\n", rep.Trace)
	}
}

// traceEvent is one event of the Chrome trace event format ("ph": "X" a complete event with
// a duration, "M" metadata), times in microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// writeTrace writes the runs as a Chrome trace: one complete event per step run, named
// after its node, in the category of its op type, with the run, op, FLOPs, bytes and (fused
// steps) the nodes it covers as arguments; steps describes the steps (summarizeProfile).
func writeTrace(w io.Writer, title string, runs []traceRun, steps []profileStep) error {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	events := []traceEvent{
		{Name: "process_name", Ph: "M", PID: 1, TID: 1, Args: map[string]any{"name": title}},
		{Name: "thread_name", Ph: "M", PID: 1, TID: 1, Args: map[string]any{"name": "steps"}},
	}
	for r, run := range runs {
		for i, st := range run.prof.Steps {
			dur := us(st.Duration)
			name := st.Name
			if name == "" {
				name = st.Op
			}
			args := map[string]any{"run": r, "op": st.Op, "step": i, "bytes_moved": steps[i].Bytes, "flops": steps[i].FLOPs}
			if st.Fused {
				covers := make([]string, len(steps[i].Covers))
				for j, nd := range steps[i].Covers {
					covers[j] = nd.Op + " " + nd.Name
				}
				args["fused"] = covers
			}
			events = append(events, traceEvent{Name: name, Cat: steps[i].Kind, Ph: "X", TS: us(run.at + st.Start), Dur: &dur, PID: 1, TID: 1, Args: args})
		}
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": events, "displayTimeUnit": "ms"})
}
