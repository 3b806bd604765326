package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "encode a text file with a variant or an .onnx file and report (and optionally write) the outputs",
		ArgsUsage: "NAME[.PRESET]|FILE.onnx",
		Description: "Each input of the model is fed by its role (see `zoo show`): token ids, an attention mask (1 = keep) or a\n" +
			"padding mask (true = padding), token types (zeros), positions (0..n-1); --feed NAME=ROLE overrides the guess.\n" +
			"An .onnx file's tokenizer is the tokenizer.json, vocab.txt or SentencePiece .model next to it, or --tokenizer;\n" +
			"without one, the byte tokenizer. Long inputs are cut into windows of the model's maximum length, each with the\n" +
			"tokenizer's special tokens; inputs with static shapes get windows and batches padded to them.\n" +
			"An --input .npy (a model with one input), .npz or .safetensors file (one array per input name) is fed as it is,\n" +
			"for models whose inputs are not text (images, audio, features): each array converted to its input's dtype\n" +
			"and checked against its shape (symbolic dims bind across inputs); every output is reported and written." +
			examples("zoo run linformer --input text.txt", "zoo run model.onnx --input text.txt --pool mean --json",
				"zoo run vit.onnx --input pixels.npy -o out.safetensors"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` to encode (any bytes; - for stdin), or arrays to feed: .npy, .npz, .safetensors", Required: true},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write outputs to `FILE`.json, .npy or .safetensors"},
			&cli.StringFlag{Name: "select", Usage: "output written to a .npy file (default: hidden, else embedding with --pool, else the only output; for array inputs the only output)"},
			flagTokenizer, flagFeed,
			&cli.StringFlag{Name: "pool", Value: string(zooroot.PoolNone), Usage: "sentence embeddings, output embedding (windows, d): mean (over real tokens), cls (the first token) or none"},
			&cli.BoolFlag{Name: "normalize", Usage: "L2-normalise the pooled embeddings"},
			&cli.IntFlag{Name: "window", Usage: "tokens per window (0: min(512, the model's maximum length))"},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "windows per batch"},
			&cli.IntFlag{Name: "max-windows", Usage: "stop after `N` windows (0: the whole input)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagPrecision(), flagBackend, flagJSON,
		),
		Action: runAction,
	}
}

// runReport is what `zoo run` prints; --json prints it as JSON.
type runReport struct {
	Model     string                `json:"model"`
	Weights   zooroot.WeightsSource `json:"weights"`
	Backend   string                `json:"backend"`
	Level     string                `json:"kernel_level"`
	Why       string                `json:"backend_reason"`
	Threads   int                   `json:"threads"`
	Precision string                `json:"precision"`
	Input     string                `json:"input"`
	Tokenizer string                `json:"tokenizer"`
	Feeds     []zooroot.Feed        `json:"feeds"`
	Pool      string                `json:"pool,omitempty"`
	Tokens    int64                 `json:"tokens"`
	Windows   int                   `json:"windows"`
	Batches   int                   `json:"batches"`
	Window    int                   `json:"window"`
	Outputs   map[string][]int      `json:"outputs"`
	BuildMS   float64               `json:"build_ms"`
	CompileMS float64               `json:"compile_ms"`
	RunMS     float64               `json:"run_ms"`
	TokensPS  float64               `json:"tokens_per_second"`
	Written   []string              `json:"written,omitempty"`

	tokDoc     map[string]any  // the tokenizer's entry in output files
	seqOutputs map[string]bool // outputs whose axis 1 is the sequence, where the graph says
}

func runAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("run: want one model name (see `zoo list`) or .onnx file, got %d arguments", c.NArg())
	}
	ref, outPath := c.Args().First(), c.String("output")
	inPath, in, size, err := openInput(c.String("input"), c.App.Reader, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer in.Close()
	if isTensorFile(inPath) {
		return runArrays(c.Context, c, c.App.Writer, c.App.ErrWriter, ref, inPath, outPath)
	}
	sink, err := runSink(c, outPath)
	if err != nil {
		return err
	}
	opts, err := runLoadOptions(c.Context, c)
	if err != nil {
		return err
	}
	t0 := time.Now()
	m, err := loadWith(c.Context, c, ref, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	enc, err := m.NewEncoder(encoderOptions(c))
	if err != nil {
		return err
	}
	if sink != nil && strings.EqualFold(filepath.Ext(outPath), ".npy") {
		only, err := selectOutput(m.Graph(), c.String("select"), enc.Pooling() != "")
		if err != nil {
			return badInput(err)
		}
		sink.Select(only)
	}
	total := windowBound(enc, size, c.Int("max-windows"))
	n := enc.Window()
	if size >= 0 {
		n = int(min(size+2, int64(n)))
	}
	if err := enc.CheckMemory(min(enc.Batch(), total), n); err != nil {
		return err
	}
	t1 := time.Now()
	choice, err := m.Compile(c.Context)
	if err != nil {
		return err
	}
	t2 := time.Now()
	printCompileReport(c.Context, c.App.ErrWriter, m)
	rep := newRunReport(m, enc, choice, opts, inPath)
	bar := progress(c.App.ErrWriter, size, "encoding "+filepath.Base(inPath))
	err = enc.Stream(c.Context, io.TeeReader(in, bar), func(b zooroot.Batch) error { return rep.add(b, sink, enc) })
	if err != nil {
		if zooroot.IsInput(err) || errors.Is(err, context.Canceled) {
			return err
		}
		return failed(fmt.Errorf("input %s: %w", inPath, err))
	}
	bar.Finish()
	t3 := time.Now()
	rep.BuildMS, rep.CompileMS, rep.RunMS = format.MS(t1.Sub(t0)), format.MS(t2.Sub(t1)), format.MS(t3.Sub(t2))
	rep.TokensPS = float64(rep.Tokens) / t3.Sub(t2).Seconds()
	if sink != nil {
		if err := rep.finish(sink, outPath, enc.Window()); err != nil {
			return err
		}
	}
	if c.Bool(flagJSON.Name) {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printRunReport(c.App.Writer, *rep)
	return nil
}

// openInput opens run's --input: a file, or standard input for "-" (read as it comes, with
// bounded memory, and named "stdin"). A missing file, a directory or an empty input is bad
// input; size is the file's (-1 for standard input).
func openInput(path string, stdin io.Reader, stderr io.Writer) (name string, in io.ReadCloser, size int64, err error) {
	if path == stdinArg {
		if stdin == nil {
			stdin = os.Stdin
		}
		if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			fmt.Fprintln(stderr, "zoo: reading the input from the terminal; end it with Ctrl-D")
		}
		br := bufio.NewReaderSize(stdin, 1<<16)
		if _, err := br.Peek(1); err == io.EOF {
			return "", nil, 0, badInputf("input %s is empty (0 bytes): nothing to encode", stdinName)
		} else if err != nil {
			return "", nil, 0, badInputf("input -: reading standard input: %w", err)
		}
		return stdinName, io.NopCloser(br), -1, nil
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", nil, 0, badInputf("input %s: %w", path, errors.Unwrap(err))
	case st.IsDir():
		return "", nil, 0, badInputf("input %s is a directory; give a text file", path)
	case st.Size() == 0:
		return "", nil, 0, badInputf("input %s is empty (0 bytes): nothing to encode", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", nil, 0, badInputf("input %s: %w", path, err)
	}
	return path, f, st.Size(), nil
}

// runSink checks run's output flags and returns the sink of --output (nil for none).
func runSink(c flags, outPath string) (*runout.Stream, error) {
	if c.IsSet("select") && !strings.EqualFold(filepath.Ext(outPath), ".npy") {
		return nil, badInputf("--select applies to a .npy --output, which holds one output; .json and .safetensors files hold every output")
	}
	if c.Int("max-windows") < 0 || c.Int("threads") < 0 {
		return nil, badInputf("--max-windows and --threads must not be negative")
	}
	if c.Int("batch") < 1 {
		return nil, badInputf("--batch must be at least 1, got %d", c.Int("batch"))
	}
	if outPath == "" {
		return nil, nil
	}
	sink, err := runout.New(outPath, "")
	if err != nil {
		return nil, badInput(err)
	}
	if err := checkOutputPath(outPath); err != nil {
		return nil, badInput(err)
	}
	return sink, nil
}

// runLoadOptions are the model flags with --precision and --threads.
func runLoadOptions(ctx context.Context, c flags) (zooroot.LoadOptions, error) {
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return opts, err
	}
	if opts.Precision, err = precisionOf(c); err != nil {
		return opts, err
	}
	opts.Threads = c.Int("threads")
	return opts, nil
}

// encoderOptions turns run's text flags into the encoder's options; --batch counts only when
// given, so that a model with a static batch keeps its own.
func encoderOptions(c flags) zooroot.EncoderOptions {
	opts := zooroot.EncoderOptions{Window: c.Int("window"), Pool: zooroot.Pool(c.String("pool")), Normalize: c.Bool("normalize"),
		Feeds: c.StringSlice(flagFeed.Name), MaxWindows: c.Int("max-windows")}
	if c.IsSet("batch") {
		opts.Batch = c.Int("batch")
	}
	return opts
}

// windowBound is how many windows a text of size bytes gives at most: exact for the byte
// tokenizer; for the others, whose tokens are at most one per byte plus the special tokens of
// each window, a bound. Standard input (size < 0) is unbounded.
func windowBound(enc *zooroot.Encoder, size int64, maxWindows int) int {
	total := 1<<31 - 1
	if size >= 0 {
		span := int64(enc.Window())
		extra := int64(0)
		if tk := enc.Tokenizer(); !tk.IsBytes() {
			p, s := tk.Affixes()
			span, extra = int64(max(1, enc.Window()-len(p.IDs)-len(s.IDs))), 1
		}
		total = int(min((size+span-1)/span+extra, int64(1<<31-1)))
	}
	if maxWindows > 0 && maxWindows < total {
		total = maxWindows
	}
	return total
}

// newRunReport starts the report of a run.
func newRunReport(m *zooroot.Model, enc *zooroot.Encoder, choice backends.Choice, opts zooroot.LoadOptions, inPath string) *runReport {
	rep := &runReport{Model: m.Name(), Weights: m.Weights(), Backend: choice.Backend.Name(), Level: choice.Probe.Level, Why: choice.Why,
		Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), opts.Precision), Input: inPath,
		Tokenizer: flagNames(enc.Tokenizer().Describe()), Feeds: cliFeeds(enc.Plan().Feeds), Pool: enc.Pooling(),
		Window: enc.Window(), Outputs: map[string][]int{}, tokDoc: enc.Tokenizer().Doc(), seqOutputs: enc.SeqOutputs()}
	if opts.Threads > 0 && opts.Threads < rep.Threads {
		rep.Threads = opts.Threads
	}
	return rep
}

// add counts one batch and hands it to the sink, which it begins at the first batch: windows
// are laid out at the longest window, which the first batch holds (every window but the last
// is full), or at the inputs' static length.
func (rep *runReport) add(b zooroot.Batch, sink *runout.Stream, enc *zooroot.Encoder) error {
	if sink != nil && rep.Batches == 0 {
		if err := sink.Begin(rep.meta(), b.Windows.N); err != nil {
			return badInput(err)
		}
	}
	for name, t := range b.Outputs {
		rep.Outputs[name] = t.Shape
	}
	if sink != nil {
		if err := sink.Add(b.Windows, b.Outputs); err != nil {
			return failed(err)
		}
	}
	rep.Windows += b.Windows.B
	rep.Batches++
	for _, l := range b.Windows.Lengths {
		rep.Tokens += int64(l)
	}
	return nil
}

// meta is what the run's output file records besides the arrays.
func (rep *runReport) meta() runout.Meta {
	return runout.Meta{Model: rep.Model, Backend: rep.Backend + " (" + rep.Level + ")", Tokenizer: rep.tokDoc, Seq: rep.seqOutputs}
}

// finish writes the sink's file and records it in the report.
func (rep *runReport) finish(sink *runout.Stream, outPath string, window int) error {
	defer sink.Close()
	if rep.Batches == 0 {
		if err := sink.Begin(rep.meta(), window); err != nil {
			return badInput(err)
		}
	}
	written, err := sink.Finish(outPath)
	if err != nil {
		return failed(err)
	}
	rep.Written = written
	rep.Outputs = sink.Shapes()
	return nil
}

// selectOutput returns the output a .npy file holds: --select when given (an output of g, or
// embedding when pooled), else the pooled embedding, else hidden, else g's only output.
func selectOutput(g *graph.Graph, selected string, pooled bool) (string, error) {
	var names []string
	for _, o := range g.Outputs {
		names = append(names, o.Name)
	}
	if pooled {
		names = append(names, zooroot.PoolOutput)
	}
	switch {
	case selected != "" && slices.Contains(names, selected):
		return selected, nil
	case selected != "":
		return "", fmt.Errorf("--select %q: model %s has no such output (outputs: %s)", selected, g.Name, strings.Join(names, ", "))
	case pooled:
		return zooroot.PoolOutput, nil
	case slices.Contains(names, variant.OutputHidden):
		return variant.OutputHidden, nil
	case len(names) == 1:
		return names[0], nil
	}
	return "", fmt.Errorf("a .npy file holds one output and model %s has %d (%s): choose one with --select NAME", g.Name, len(names), strings.Join(names, ", "))
}

// progress returns a byte-progress bar on w when w is a terminal, and a no-op writer otherwise
// (scripts and pipes get clean stderr).
func progress(w io.Writer, size int64, what string) *progressbar.ProgressBar {
	f, ok := underlying(w).(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || size < 1<<20 {
		return progressbar.DefaultSilent(size)
	}
	return progressbar.NewOptions64(size, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }), progressbar.OptionClearOnFinish())
}

func printRunReport(w io.Writer, r runReport) {
	fmt.Fprintf(w, "model     %s\n", r.Model)
	fmt.Fprintf(w, "weights   %s\n", r.Weights)
	fmt.Fprintf(w, "backend   %s (%s, %s; %s)\n", r.Backend, r.Level, format.Plural(r.Threads, "thread"), r.Why)
	fmt.Fprintf(w, "precision %s\n", r.Precision)
	fmt.Fprintf(w, "input     %s: %s in %s of ≤%d, %s\n", r.Input, format.Plural(r.Tokens, "token"), format.Plural(r.Windows, "window"), r.Window, format.Plural(r.Batches, "batch"))
	fmt.Fprintf(w, "tokenizer %s\n", r.Tokenizer)
	var feeds []string
	for _, f := range r.Feeds {
		feeds = append(feeds, f.Name+" ← "+string(f.Role))
	}
	fmt.Fprintf(w, "feeds     %s\n", strings.Join(feeds, ", "))
	if r.Pool != "" {
		fmt.Fprintf(w, "pool      %s\n", r.Pool)
	}
	fmt.Fprintf(w, "outputs   %s\n", outputShapes(r.Outputs))
	fmt.Fprintf(w, "time      build %.1f ms, compile %.1f ms, run %.1f ms\n", r.BuildMS, r.CompileMS, r.RunMS)
	fmt.Fprintf(w, "speed     %.0f tokens/s\n", r.TokensPS)
	for _, p := range r.Written {
		fmt.Fprintf(w, "wrote     %s\n", p)
	}
}

// outputShapes is the report's outputs line: each output's name and shape, by name.
func outputShapes(outputs map[string][]int) string {
	names := slices.Sorted(maps.Keys(outputs))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " " + tensor.ShapeString(outputs[n])
	}
	return strings.Join(parts, ", ")
}

// printCompileReport writes the backend's compile report (its steps, which fusions applied
// and why the others did not) to w under --verbose, when the program has one.
func printCompileReport(ctx context.Context, w io.Writer, m *zooroot.Model) {
	if !verboseOf(ctx) {
		return
	}
	if prog, err := m.Program(ctx); err == nil {
		if r, ok := prog.(backends.CompileReporter); ok {
			fmt.Fprint(w, r.CompileReport())
		}
	}
}
