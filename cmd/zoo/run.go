package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/variant"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:        "run",
		Usage:       "encode a text file with a variant and report (and optionally write) the outputs",
		ArgsUsage:   "NAME[.PRESET]",
		Description: examples("zoo run linformer --input text.txt", "zoo run vanilla.tiny -i text.txt -o out.safetensors", "zoo run model.onnx --input text.txt --json"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` to encode (any bytes)", Required: true},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write outputs to `FILE`.json, .npy or .safetensors"},
			&cli.StringFlag{Name: "select", Value: variant.OutputHidden, Usage: "output written to a .npy file (hidden or logits)"},
			&cli.IntFlag{Name: "window", Usage: "tokens per window (default: min(512, the model's maximum length))"},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "windows per batch"},
			&cli.IntFlag{Name: "max-windows", Usage: "stop after `N` windows (0: the whole input)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagBackend, flagJSON,
		),
		Action: runAction,
	}
}

// runReport is what `zoo run` prints; --json prints it as JSON.
type runReport struct {
	Model     string           `json:"model"`
	Backend   string           `json:"backend"`
	Level     string           `json:"kernel_level"`
	Why       string           `json:"backend_reason"`
	Threads   int              `json:"threads"`
	Input     string           `json:"input"`
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
}

func runAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("run: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	inPath := c.String("input")
	st, err := os.Stat(inPath)
	switch {
	case err != nil:
		return badInputf("input %s: %w", inPath, errors.Unwrap(err))
	case st.IsDir():
		return badInputf("input %s is a directory; give a text file", inPath)
	case st.Size() == 0:
		return badInputf("input %s is empty (0 bytes): nothing to encode", inPath)
	}
	outPath := c.String("output")
	if c.IsSet("select") && !strings.EqualFold(filepath.Ext(outPath), ".npy") {
		return badInputf("--select applies to a .npy --output, which holds one output; .json and .safetensors files hold every output")
	}
	var sink outputSink
	if outPath != "" {
		if sink, err = newSink(outPath, c.String("select")); err != nil {
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
	m, err := loadModel(c, ref)
	if err != nil {
		return err
	}
	tokName, maskName, err := tokenInputs(m.Graph)
	if err != nil {
		return badInput(err)
	}
	window, err := chooseWindow(m, c.Int("window"))
	if err != nil {
		return badInput(err)
	}
	total := int(min((st.Size()+int64(window)-1)/int64(window), int64(1<<31-1)))
	if mw := c.Int("max-windows"); mw > 0 && mw < total {
		total = mw
	}
	if err := guardMemory(m.displayName(), m.Graph, memRun{batch: min(c.Int("batch"), total), n: int(min(st.Size(), int64(window))),
		shapes: tokenShapes(tokName, maskName), batchFlag: "--batch", nFlag: "--window"}); err != nil {
		return err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	t1 := time.Now()
	prog, err := choice.Backend.Compile(m.Graph, backends.Options{Threads: c.Int("threads")})
	if err != nil {
		return failed(fmt.Errorf("compile %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
	}
	defer prog.Close()
	t2 := time.Now()

	f, err := os.Open(inPath)
	if err != nil {
		return badInputf("input %s: %w", inPath, err)
	}
	defer f.Close()
	bar := progress(c.App.ErrWriter, st.Size(), "encoding "+filepath.Base(inPath))
	wd, err := tokenize.NewWindower(io.TeeReader(f, bar), window, c.Int("batch"))
	if err != nil {
		return badInput(err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()

	rep := runReport{Model: m.displayName(), Backend: choice.Backend.Name(), Level: choice.Probe.Level, Why: choice.Why,
		Threads: choice.Probe.Threads, Input: inPath, Window: window, Outputs: map[string][]int{}}
	if c.Int("threads") > 0 && c.Int("threads") < rep.Threads {
		rep.Threads = c.Int("threads")
	}
	if sink != nil {
		defer sink.close()
		if err := sink.begin(m, rep, total, int(min(st.Size(), int64(window)))); err != nil {
			return badInput(err)
		}
	}
	for rep.Windows < total {
		batch, err := wd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return failed(fmt.Errorf("input %s: %w", inPath, err))
		}
		if keep := total - rep.Windows; batch.B > keep {
			batch = truncateBatch(batch, keep)
		}
		tokens, mask := batch.Tensors()
		feed := map[string]*tensor.Tensor{tokName: tokens}
		if maskName != "" {
			feed[maskName] = mask
		}
		outs, err := prog.Run(ctx, feed)
		if err != nil {
			return failed(fmt.Errorf("run %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
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

// chooseWindow returns the window length: --window when given, else min(512, max_len).
func chooseWindow(m *model, requested int) (int, error) {
	maxLen := 0
	if p := m.Desc.Caps.MaxLenParam; p != "" {
		maxLen = m.Config.Int(p)
	}
	if requested < 0 {
		return 0, fmt.Errorf("--window must be positive, got %d", requested)
	}
	if requested == 0 {
		requested = 512
		if maxLen > 0 && maxLen < requested {
			requested = maxLen
		}
		return requested, nil
	}
	if maxLen > 0 && requested > maxLen {
		return 0, fmt.Errorf("--window %d is longer than %s's maximum length %d (max_len)", requested, m.displayName(), maxLen)
	}
	return requested, nil
}

// truncateBatch keeps the first keep rows of b.
func truncateBatch(b *tokenize.Batch, keep int) *tokenize.Batch {
	return &tokenize.Batch{B: keep, N: b.N, Tokens: b.Tokens[:keep*b.N], Mask: b.Mask[:keep*b.N],
		Lengths: b.Lengths[:keep], Offsets: b.Offsets[:keep]}
}

// progress returns a byte-progress bar on w when w is a terminal, and a no-op writer otherwise
// (scripts and pipes get clean stderr).
func progress(w io.Writer, size int64, what string) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || size < 1<<20 {
		return progressbar.DefaultSilent(size)
	}
	return progressbar.NewOptions64(size, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }), progressbar.OptionClearOnFinish())
}

func printRunReport(w io.Writer, r runReport) {
	fmt.Fprintf(w, "model     %s\n", r.Model)
	fmt.Fprintf(w, "backend   %s (%s, %d threads; %s)\n", r.Backend, r.Level, r.Threads, r.Why)
	fmt.Fprintf(w, "input     %s: %d tokens in %d windows of ≤%d, %d batches\n", r.Input, r.Tokens, r.Windows, r.Window, r.Batches)
	names := make([]string, 0, len(r.Outputs))
	for n := range r.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, n+" "+tensor.ShapeString(r.Outputs[n]))
	}
	fmt.Fprintf(w, "outputs   %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "time      build %.1f ms, compile %.1f ms, run %.1f ms\n", r.BuildMS, r.CompileMS, r.RunMS)
	fmt.Fprintf(w, "speed     %.0f tokens/s\n", r.TokensPS)
	for _, p := range r.Written {
		fmt.Fprintf(w, "wrote     %s\n", p)
	}
}
