// Package profile is the machinery of `zoo profile`: it runs a compiled program untimed and
// then profiled (the backend reads the clock around every step), prices each step from the
// graph's op table (FLOPs and bytes moved; a fused step's bytes are the values it reads and
// writes), sums the steps by op type, and renders the result as two tables (Print), JSON
// (Report) or a Chrome trace (WriteTrace). The command in cmd/zoo/profile.go parses the
// flags, loads and compiles the model (or prepares a training step) and drives these.
package profile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/pairtime"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Settings are a profile's flags: the batch and length asked for, the runs, the table's
// length, the threads asked for (0: the backend's), the trace file ("" for none) and JSON.
type Settings struct {
	Batch, Seq   int
	Reps, Warmup int
	Top, Threads int
	Trace        string
	JSON         bool
}

// Check refuses sizes and counts out of range (the errors name the flags).
func (s Settings) Check() error {
	switch {
	case s.Seq < 1 || s.Batch < 1 || s.Reps < 1:
		return fmt.Errorf("--seq, --batch and --reps must be at least 1 (got %d, %d, %d)", s.Seq, s.Batch, s.Reps)
	case s.Warmup < 0 || s.Top < 0 || s.Threads < 0:
		return errors.New("--warmup, --top and --threads must not be negative")
	}
	return nil
}

// Runs runs prog s.Warmup times untimed and then s.Reps times profiled on inputs, settling
// the heap before each profiled run (pairtime.Settle).
func Runs(ctx context.Context, prog backends.Program, profiler backends.Profiler, inputs map[string]*tensor.Tensor, s Settings) ([]Run, error) {
	for i := 0; i < s.Warmup; i++ {
		if _, err := prog.Run(ctx, inputs); err != nil {
			return nil, err
		}
	}
	runs := make([]Run, 0, s.Reps)
	first := time.Now()
	for i := 0; i < s.Reps; i++ {
		pairtime.Settle()
		at := time.Since(first)
		_, prof, err := profiler.RunProfiled(ctx, inputs)
		if err != nil {
			return nil, err
		}
		runs = append(runs, Run{at: at, prof: prof})
	}
	return runs, nil
}

// Finish completes rep (filled up to its shape) from the profiled runs of prog, the graph it
// was compiled from and that graph's input shapes, writes s.Trace and prints the report to w
// (as JSON with s.JSON; the table lists s.Top steps).
func Finish(w io.Writer, rep *Report, runs []Run, g *graph.Graph, shapes map[string][]int, prog backends.Program, s Settings) error {
	rep.Reps, rep.Warmup, rep.Trace = s.Reps, s.Warmup, s.Trace
	if s.Threads > 0 && s.Threads < rep.Threads {
		rep.Threads = s.Threads
	}
	costs, err := NewStepCosts(g, shapes)
	if err != nil {
		rep.NoCost = err.Error()
	}
	steps, err := Summarize(rep, runs, costs)
	if err != nil {
		return fmt.Errorf("profile %s: %w", rep.Model, err)
	}
	if r, ok := prog.(backends.CompileReporter); ok {
		rep.Compile = r.CompileReport()
	}
	if rep.Trace != "" {
		title := fmt.Sprintf("zoo profile %s on %s, batch %d, n %d", rep.Model, rep.Backend, rep.Batch, rep.N)
		if rep.Train {
			title += ", training step"
		}
		err := tensorio.AtomicWriteFile(rep.Trace, func(w io.Writer) error { return WriteTrace(w, title, runs, steps) })
		if err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
	}
	if s.JSON {
		return format.WriteJSON(w, rep)
	}
	Print(w, *rep, s.Top)
	return nil
}

// ProfilerOf returns p's step timer, or an error saying that backend's programs have none.
func ProfilerOf(p backends.Program, backend string) (backends.Profiler, error) {
	if pr, ok := p.(backends.Profiler); ok {
		return pr, nil
	}
	return nil, fmt.Errorf("backend %s cannot profile: its programs do not time their steps; use --backend cpu", backend)
}

// Limits are what fixes or bounds the batch and length a model is profiled at: its inputs'
// static batch and length (0: dynamic), a variant's max_len (0: none, or an imported file)
// and the length its graph bounds (0: none found; TableWhy says what bounds it, as
// FeedPlan.MaxLenWhy: the rows of a position table, or the node whose shapes fail beyond it).
type Limits struct {
	Batch, Seq int
	MaxLen     int
	TableRows  int
	TableWhy   string
}

// Shape settles the batch b and length n to profile model at (set: given by flag): the
// inputs' static sizes where the model fixes them (an explicit flag that disagrees is an
// error), and a length within the model's maximum.
func Shape(model string, lim Limits, b, n int, batchSet, seqSet bool) (int, int, error) {
	if lim.Batch > 0 {
		if batchSet && b != lim.Batch {
			return 0, 0, fmt.Errorf("--batch %d: %s's inputs are fixed at batch %d (omit --batch)", b, model, lim.Batch)
		}
		b = lim.Batch
	}
	if lim.Seq > 0 {
		if seqSet && n != lim.Seq {
			return 0, 0, fmt.Errorf("--seq %d: %s's inputs are fixed at %d tokens (omit --seq)", n, model, lim.Seq)
		}
		return b, lim.Seq, nil
	}
	maxLen, from := 0, ""
	if lim.MaxLen > 0 {
		maxLen, from = lim.MaxLen, "max_len; pass a shorter --seq or --set max_len=N"
	} else if lim.TableRows > 0 {
		maxLen, from = lim.TableRows, lim.TableWhy
	}
	if maxLen > 0 && n > maxLen {
		if !seqSet {
			return b, maxLen, nil
		}
		return 0, 0, fmt.Errorf("--seq %d is longer than %s's maximum length %d (%s)", n, model, maxLen, from)
	}
	return b, n, nil
}

// FullBatch is b rows of n token ids of the built-in sample text (its bytes, wrapped
// around, and taken modulo vocab when vocab > 0 so that any embedding table takes them),
// none padded.
func FullBatch(b, n, vocab int) *tokenize.Batch {
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

// Report is what `zoo profile` prints; --json prints it as JSON. Times are means per
// profiled run.
type Report struct {
	Model string `json:"model"`
	// Weights says where the model's weights came from, as the caller reports them (its
	// JSON is the value's own).
	Weights any `json:"weights"`
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
	FLOPs  int64   `json:"flops"`
	GFLOPS float64 `json:"gflops_per_s"`
	Ops    []Op    `json:"ops"`
	Nodes  []Step  `json:"nodes"`
	Trace  string  `json:"trace,omitempty"`
	// NoCost says why FLOPs are missing ("" when they are counted).
	NoCost string `json:"no_cost,omitempty"`
	// Compile is the backend's compile report: which fusions applied and why each candidate
	// that did not fuse was refused ("" when the backend has none).
	Compile string `json:"compile_report,omitempty"`
}

// Op is the time of one op type: a graph op, or a fused kernel with the ops it
// replaced ("FusedLinear[MatMul+Add+Relu]").
type Op struct {
	Op      string  `json:"op"`
	Fused   bool    `json:"fused"`
	Calls   int     `json:"calls"`
	MS      float64 `json:"ms"`
	Percent float64 `json:"percent"`
	FLOPs   int64   `json:"flops"`
	GFLOPS  float64 `json:"gflops_per_s"`
	Bytes   int64   `json:"bytes_moved"`
}

// Step is one step of the run, in the order it ran.
type Step struct {
	Name    string  `json:"name"`
	Op      string  `json:"op"`
	Kind    string  `json:"kind"` // the op type it is counted under in Ops
	Fused   bool    `json:"fused"`
	Covers  []Node  `json:"covers,omitempty"` // the nodes a fused step does the work of
	MS      float64 `json:"ms"`
	Percent float64 `json:"percent"`
	FLOPs   int64   `json:"flops"`
	GFLOPS  float64 `json:"gflops_per_s"`
	Bytes   int64   `json:"bytes_moved"`
}

// Node names a graph node.
type Node struct {
	Name string `json:"name"`
	Op   string `json:"op"`
}

// Run is one profiled run and when it began, from the start of the first.
type Run struct {
	at   time.Duration
	prof *backends.Profile
}

// StepCosts prices the steps of a run from the graph: a node's FLOPs and bytes by its op's
// cost rule, and the bytes a fused step reads and writes (the values its nodes read that
// none of them makes, constants included, and those they make that something else reads).
// The zero value counts nothing.
type StepCosts struct {
	nodes   map[*graph.Node]graph.OpCost
	bytes   map[string]int64 // per value
	readers map[string][]*graph.Node
	outputs map[string]bool
}

// NewStepCosts counts g's costs at the graph-input shapes; the error says why they cannot
// be counted (an op without a cost rule), and the StepCosts returned is then the zero one.
func NewStepCosts(g *graph.Graph, shapes map[string][]int) (StepCosts, error) {
	nodes, err := g.NodeCosts(shapes)
	if err != nil {
		return StepCosts{}, err
	}
	vb, err := g.ValueBytes(shapes)
	if err != nil {
		return StepCosts{}, err
	}
	sc := StepCosts{nodes: nodes, bytes: vb, readers: map[string][]*graph.Node{}, outputs: map[string]bool{}}
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
func (sc StepCosts) of(st backends.StepTime) (flops, bytes int64) {
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

// Summarize fills rep's times, FLOPs and tables from the profiled runs (the same
// steps each time) and the graph's costs, and returns the steps in order.
func Summarize(rep *Report, runs []Run, costs StepCosts) ([]Step, error) {
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
	steps := make([]Step, nsteps)
	byKind := map[string]*Op{}
	var order []string
	var stepsMS float64
	for i, st := range runs[0].prof.Steps {
		ps := Step{Name: st.Name, Op: st.Op, Fused: st.Fused, MS: msOf(stepTime[i])}
		ps.FLOPs, ps.Bytes = costs.of(st)
		var ops []string
		for _, nd := range st.Nodes {
			if st.Fused {
				ps.Covers = append(ps.Covers, Node{Name: nd.Name, Op: nd.Op})
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
			k = &Op{Op: ps.Kind, Fused: ps.Fused}
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

// Print renders the report as two tables: op types by time, and the top slowest
// steps (every step in order when top is 0).
func Print(w io.Writer, rep Report, top int) {
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

// TraceEvent is one event of the Chrome trace event format ("ph": "X" a complete event with
// a duration, "M" metadata), times in microseconds.
type TraceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes the runs as a Chrome trace: one complete event per step run, named
// after its node, in the category of its op type, with the run, op, FLOPs, bytes and (fused
// steps) the nodes it covers as arguments; steps describes the steps (Summarize).
func WriteTrace(w io.Writer, title string, runs []Run, steps []Step) error {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	events := []TraceEvent{
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
			events = append(events, TraceEvent{Name: name, Cat: steps[i].Kind, Ph: "X", TS: us(run.at + st.Start), Dur: &dur, PID: 1, TID: 1, Args: args})
		}
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": events, "displayTimeUnit": "ms"})
}
