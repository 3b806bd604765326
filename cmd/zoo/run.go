package main

import (
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

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
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
			&cli.StringFlag{Name: "pool", Value: poolNone, Usage: "sentence embeddings, output embedding (windows, d): mean (over real tokens), cls (the first token) or none"},
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
	Model     string           `json:"model"`
	Weights   weightsReport    `json:"weights"`
	Backend   string           `json:"backend"`
	Level     string           `json:"kernel_level"`
	Why       string           `json:"backend_reason"`
	Threads   int              `json:"threads"`
	Precision string           `json:"precision"`
	Input     string           `json:"input"`
	Tokenizer string           `json:"tokenizer"`
	Feeds     []feed           `json:"feeds"`
	Pool      string           `json:"pool,omitempty"`
	Tokens    int64            `json:"tokens"`
	Windows   int              `json:"windows"`
	Batches   int              `json:"batches"`
	Window    int              `json:"window"`
	Outputs   map[string][]int `json:"outputs"`
	BuildMS   float64          `json:"build_ms"`
	CompileMS float64          `json:"compile_ms"`
	RunMS     float64          `json:"run_ms"`
	TokensPS  float64          `json:"tokens_per_second"`
	Written   []string         `json:"written,omitempty"`

	tokDoc     map[string]any  // the tokenizer's entry in output files
	seqOutputs map[string]bool // outputs whose axis 1 is the sequence, where the graph says
}

func runAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("run: want one model name (see `zoo list`) or .onnx file, got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	inPath, inFile, cleanup, err := inputFile(c.Context, c.String("input"), os.Stdin, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := os.Stat(inFile)
	switch {
	case err != nil:
		return badInputf("input %s: %w", inPath, errors.Unwrap(err))
	case st.IsDir():
		return badInputf("input %s is a directory; give a text file", inPath)
	case st.Size() == 0:
		return badInputf("input %s is empty (0 bytes): nothing to encode", inPath)
	}
	outPath := c.String("output")
	if isTensorFile(inPath) {
		return runTensorsAction(c, ref, inPath, outPath)
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if c.IsSet("select") && !strings.EqualFold(filepath.Ext(outPath), ".npy") {
		return badInputf("--select applies to a .npy --output, which holds one output; .json and .safetensors files hold every output")
	}
	pool, err := parsePool(c.String("pool"), c.Bool("normalize"))
	if err != nil {
		return badInput(err)
	}
	var sink outputSink
	if outPath != "" {
		if sink, err = newSink(outPath, ""); err != nil {
			return badInput(err)
		}
		if err := checkOutputPath(outPath); err != nil {
			return badInput(err)
		}
	}
	if c.Int("batch") < 1 {
		return badInputf("--batch must be at least 1, got %d", c.Int("batch"))
	}
	if c.Int("max-windows") < 0 || c.Int("threads") < 0 {
		return badInputf("--max-windows and --threads must not be negative")
	}

	t0 := time.Now()
	tk, err := chooseTokenizer(c.String(flagTokenizer.Name), ref, isONNXPath(ref))
	if err != nil {
		return badInput(err)
	}
	vocab := 0
	if tk.path != "" {
		vocab = tk.tok.VocabSize()
	}
	m, err := loadModelVocab(c, ref, vocab)
	if err != nil {
		return err
	}
	plan, err := planFeeds(m.Graph, c.StringSlice(flagFeed.Name))
	if err != nil {
		return badInput(err)
	}
	if plan.Batch > 0 && c.IsSet("batch") && c.Int("batch") != plan.Batch {
		return badInputf("--batch %d: %s's inputs are fixed at batch %d (omit --batch)", c.Int("batch"), m.displayName(), plan.Batch)
	}
	window, err := chooseWindow(m, plan, c.Int("window"))
	if err != nil {
		return badInput(err)
	}
	if err := pool.resolve(m.Graph); err != nil {
		return badInput(err)
	}
	if sink != nil && strings.EqualFold(filepath.Ext(outPath), ".npy") {
		name, err := selectOutput(m.Graph, c.String("select"), pool)
		if err != nil {
			return badInput(err)
		}
		sink.(*stream).only = name
	}
	// Windows: exact for the byte tokenizer; a bound for the others, whose tokens are at most
	// one per byte plus the special tokens of each window.
	total := int(min((st.Size()+int64(window)-1)/int64(window), int64(1<<31-1)))
	if _, isBytes := tk.tok.(tokenize.Bytes); !isBytes {
		p, s := tk.tok.Affixes()
		span := max(1, window-len(p.IDs)-len(s.IDs))
		total = int(min((st.Size()+int64(span)-1)/int64(span)+1, int64(1<<31-1)))
	}
	if mw := c.Int("max-windows"); mw > 0 && mw < total {
		total = mw
	}
	if err := guardMemory(m.displayName(), m.Graph, memRun{batch: min(c.Int("batch"), total), n: int(min(st.Size()+2, int64(window))),
		shapes: plan.shapes, batchFlag: "--batch", nFlag: "--window"}); err != nil {
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

	f, err := os.Open(inFile)
	if err != nil {
		return badInputf("input %s: %w", inPath, err)
	}
	defer f.Close()
	// The session cancels c.Context on SIGINT and SIGTERM (session.go).
	ctx := c.Context
	bar := progress(c.App.ErrWriter, st.Size(), "encoding "+filepath.Base(inPath))
	batchSize := c.Int("batch")
	if plan.Batch > 0 {
		batchSize = plan.Batch
	}
	src, stopSrc, err := newWindows(ctx, tk, io.TeeReader(f, bar), window, batchSize, plan.VocabRows, plan.VocabFrom)
	if err != nil {
		return badInput(err)
	}
	defer stopSrc()

	rep := runReport{Model: m.displayName(), Weights: weightsOf(m), Backend: choice.Backend.Name(), Level: choice.Probe.Level, Why: choice.Why,
		Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec), Input: inPath, Tokenizer: tk.describe(), Feeds: plan.Feeds, Pool: pool.describe(),
		Window: window, Outputs: map[string][]int{}, tokDoc: tk.doc(), seqOutputs: seqAligned(m.Graph, plan.Seq)}
	if pool.mode != poolNone {
		rep.seqOutputs[poolOutputName] = false
	}
	if c.Int("threads") > 0 && c.Int("threads") < rep.Threads {
		rep.Threads = c.Int("threads")
	}
	// Windows are laid out at the longest window, which the first batch holds (every window
	// but the last is full), or at the inputs' static length.
	first, firstErr := src.Next()
	if firstErr != nil && firstErr != io.EOF {
		return failed(fmt.Errorf("input %s: %w", inPath, firstErr))
	}
	layoutN := window
	if first != nil {
		layoutN = first.N
	}
	if plan.Seq > 0 {
		layoutN = plan.Seq
	}
	if sink != nil {
		defer sink.close()
		if err := sink.begin(m, rep, total, layoutN); err != nil {
			return badInput(err)
		}
	}
	for batch, err := first, firstErr; rep.Windows < total; batch, err = src.Next() {
		if err == io.EOF {
			break
		}
		if err != nil {
			return failed(fmt.Errorf("input %s: %w", inPath, err))
		}
		if keep := total - rep.Windows; batch.B > keep {
			batch = truncateBatch(batch, keep)
		}
		if plan.Seq > 0 {
			batch = padBatch(batch, plan.Seq, tk.padID())
		}
		inputs, err := plan.tensors(batch, tk.padID())
		if err != nil {
			return failed(fmt.Errorf("feed %s: %w", m.displayName(), err))
		}
		outs, err := prog.Run(ctx, inputs)
		if err != nil {
			return failed(fmt.Errorf("run %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
		}
		outs = cropRows(outs, batch.B)
		if err := pool.add(outs, batch); err != nil {
			return failed(err)
		}
		for name, t := range outs {
			rep.Outputs[name] = t.Shape
		}
		if sink != nil {
			if err := sink.add(batch, outs); err != nil {
				return failed(err)
			}
		}
		rep.Windows += batch.B
		rep.Batches++
		for _, l := range batch.Lengths {
			rep.Tokens += int64(l)
		}
	}
	bar.Finish()
	t3 := time.Now()
	rep.BuildMS, rep.CompileMS, rep.RunMS = format.MS(t1.Sub(t0)), format.MS(t2.Sub(t1)), format.MS(t3.Sub(t2))
	rep.TokensPS = float64(rep.Tokens) / t3.Sub(t2).Seconds()
	if sink != nil {
		written, err := sink.finish(outPath)
		if err != nil {
			return failed(err)
		}
		rep.Written = written
		rep.Outputs = sink.shapes()
	}
	if c.Bool(flagJSON.Name) {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printRunReport(c.App.Writer, rep)
	return nil
}

// chooseWindow returns the window length: --window when given, else the inputs' static
// length, else min(512, the maximum length: max_len of a variant or zoo file, else the rows
// of the graph's position table).
func chooseWindow(m *model, plan *feedPlan, requested int) (int, error) {
	maxLen, from := 0, ""
	if p := m.Desc.Caps.MaxLenParam; p != "" {
		maxLen, from = m.Config.Int(p), "max_len"
	} else if plan.MaxLen > 0 {
		maxLen, from = plan.MaxLen, "the rows of its position table "+plan.MaxLenFrom
	}
	if requested < 0 {
		return 0, fmt.Errorf("--window must be positive, got %d", requested)
	}
	if plan.Seq > 0 {
		if requested > plan.Seq {
			return 0, fmt.Errorf("--window %d is longer than the %d tokens %s's inputs are fixed at", requested, plan.Seq, m.displayName())
		}
		if requested == 0 {
			return plan.Seq, nil
		}
		return requested, nil
	}
	if requested == 0 {
		requested = 512
		if maxLen > 0 && maxLen < requested {
			requested = maxLen
		}
		return requested, nil
	}
	if maxLen > 0 && requested > maxLen {
		return 0, fmt.Errorf("--window %d is longer than %s's maximum length %d (%s)", requested, m.displayName(), maxLen, from)
	}
	return requested, nil
}

// padBatch returns b with every row padded to n tokens (a model with a static length).
func padBatch(b *tokenize.Batch, n int, pad int64) *tokenize.Batch {
	if b.N >= n {
		return b
	}
	p := &tokenize.Batch{B: b.B, N: n, Tokens: make([]int64, b.B*n), Mask: make([]bool, b.B*n), Lengths: b.Lengths, Offsets: b.Offsets}
	for i := 0; i < b.B; i++ {
		copy(p.Tokens[i*n:], b.Tokens[i*b.N:(i+1)*b.N])
		copy(p.Mask[i*n:], b.Mask[i*b.N:(i+1)*b.N])
		for j := b.N; j < n; j++ {
			p.Tokens[i*n+j], p.Mask[i*n+j] = pad, true
		}
	}
	return p
}

// truncateBatch keeps the first keep rows of b.
func truncateBatch(b *tokenize.Batch, keep int) *tokenize.Batch {
	return &tokenize.Batch{B: keep, N: b.N, Tokens: b.Tokens[:keep*b.N], Mask: b.Mask[:keep*b.N],
		Lengths: b.Lengths[:keep], Offsets: b.Offsets[:keep]}
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
func printCompileReport(ctx context.Context, w io.Writer, prog backends.Program) {
	if r, ok := prog.(backends.CompileReporter); ok && verboseOf(ctx) {
		fmt.Fprint(w, r.CompileReport())
	}
}
