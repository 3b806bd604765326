package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
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
		only, err := runout.SelectOutput(m.Graph(), c.String("select"), enc.Pooling() != "")
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
	var readErr *zooroot.ReadError
	err = enc.Stream(c.Context, io.TeeReader(in, bar), func(b zooroot.Batch) error { return rep.Add(b, sink) })
	if errors.As(err, &readErr) {
		return failed(fmt.Errorf("input %s: %w", inPath, err))
	} else if err != nil {
		return failed(err)
	}
	bar.Finish()
	t3 := time.Now()
	rep.BuildMS, rep.CompileMS, rep.RunMS = format.MS(t1.Sub(t0)), format.MS(t2.Sub(t1)), format.MS(t3.Sub(t2))
	rep.TokensPS = float64(rep.Tokens) / t3.Sub(t2).Seconds()
	if sink != nil {
		if err := rep.Finish(sink, outPath, enc.Window()); err != nil {
			return err
		}
	}
	if c.Bool(flagJSON.Name) {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	runout.Print(c.App.Writer, *rep)
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

// loadRunModel loads ref with run's load options (runLoadOptions): the model of zoo embed
// and zoo rerank.
func loadRunModel(ctx context.Context, c flags, ref string) (*zooroot.Model, error) {
	opts, err := runLoadOptions(ctx, c)
	if err != nil {
		return nil, err
	}
	return loadWith(ctx, c, ref, opts)
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
func newRunReport(m *zooroot.Model, enc *zooroot.Encoder, choice backends.Choice, opts zooroot.LoadOptions, inPath string) *runout.Report {
	rep := &runout.Report{Model: m.Name(), Weights: m.Weights(), Backend: choice.Backend.Name(), Level: choice.Probe.Level, Why: choice.Why,
		Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), opts.Precision), Input: inPath,
		Tokenizer: flagNames(enc.Tokenizer().Describe()), Feeds: cliFeeds(enc.Plan().Feeds), Pool: enc.Pooling(),
		Window: enc.Window(), Outputs: map[string][]int{}, TokenizerDoc: enc.Tokenizer().Doc(), SeqOutputs: enc.SeqOutputs()}
	if opts.Threads > 0 && opts.Threads < rep.Threads {
		rep.Threads = opts.Threads
	}
	return rep
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
