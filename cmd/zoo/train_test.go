package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/train"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// trainFast are the flags that keep a training test short: a small model, short windows and
// small batches.
var trainFast = []string{"vanilla.tiny", "--input", text, "--window", "24", "--batch", "2", "--lr", "1e-3"}

func trainArgs(extra ...string) []string {
	return append(append([]string{"train"}, trainFast...), extra...)
}

// readTrainLog parses a --log file into its lines.
func readTrainLog(t *testing.T, path string) []map[string]float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// stepLosses returns the bits of every step's loss and gradient norm, by step.
func stepLosses(lines []map[string]float64) map[int][2]uint64 {
	out := map[int][2]uint64{}
	for _, l := range lines {
		if _, ok := l["loss"]; ok {
			out[int(l["step"])] = [2]uint64{math.Float64bits(l["loss"]), math.Float64bits(l["grad_norm"])}
		}
	}
	return out
}

func readStateDict(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, nt := range list {
		out[nt.Name] = nt.Tensor.F32
	}
	return out
}

func sameBits(t *testing.T, what string, a, b map[string][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tensors against %d", what, len(a), len(b))
	}
	for name, x := range a {
		y := b[name]
		if len(x) != len(y) {
			t.Fatalf("%s: %s has %d values against %d", what, name, len(x), len(y))
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s: %s[%d] = %v against %v", what, name, i, x[i], y[i])
			}
		}
	}
}

// TestTrainResumeBitExact trains six steps straight through, and three steps then three more
// with --resume (the constant schedule keeps the learning rates of the two runs equal though
// the first half is given --steps 3): every step's loss and gradient norm and the final
// weights and moments must be bitwise equal. Masks and dropout (the default 0.1) are drawn per
// step, and the sgd case also shuffles.
func TestTrainResumeBitExact(t *testing.T) {
	dir := t.TempDir()
	for _, opt := range []string{"adamw", "sgd"} {
		t.Run(opt, func(t *testing.T) {
			common := []string{"--schedule", "constant", "--optimizer", opt, "--warmup", "2", "--eval", text}
			if opt == "sgd" {
				common = append(common, "--momentum", "0.9", "--lr", "0.05", "--shuffle")
			}
			a, b := filepath.Join(dir, opt+"a.safetensors"), filepath.Join(dir, opt+"b.safetensors")
			alog, blog := filepath.Join(dir, opt+"a.jsonl"), filepath.Join(dir, opt+"b.jsonl")
			if code, _, stderr := zoo(t, trainArgs(append(common, "--steps", "6", "-o", a, "--log", alog)...)...); code != 0 {
				t.Fatalf("straight run: exit %d: %s", code, stderr)
			}
			if code, _, stderr := zoo(t, trainArgs(append(common, "--steps", "3", "-o", b, "--log", blog)...)...); code != 0 {
				t.Fatalf("first half: exit %d: %s", code, stderr)
			}
			code, stdout, stderr := zoo(t, "train", "--resume", b, "--steps", "6", "-o", b, "--log", blog, "--eval", text, "--json")
			if code != 0 {
				t.Fatalf("resumed run: exit %d: %s", code, stderr)
			}
			var rep trainReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.StartStep != 3 || rep.Steps != 6 {
				t.Fatalf("resumed report %+v (%v)", rep, err)
			}
			la, lb := stepLosses(readTrainLog(t, alog)), stepLosses(readTrainLog(t, blog))
			if len(la) != 6 || len(lb) != 6 {
				t.Fatalf("logged steps: %d straight, %d resumed", len(la), len(lb))
			}
			for k := 1; k <= 6; k++ {
				if la[k] != lb[k] {
					t.Errorf("step %d: loss/grad-norm bits %x straight, %x resumed", k, la[k], lb[k])
				}
			}
			sameBits(t, "weights", readStateDict(t, a), readStateDict(t, b))
			sameBits(t, "optimizer state", readStateDict(t, optim.OptimPath(a)), readStateDict(t, optim.OptimPath(b)))
		})
	}
}

// TestTrainSIGKILL kills a real zoo train process with SIGKILL after its checkpoint at step 2
// and at least one more step, resumes it to step 8, and checks that the resumed run's losses
// equal an uninterrupted run's bit for bit (a constant schedule, so that the killed run's
// --steps 40 and the straight run's 8 give the same learning rates).
func TestTrainSIGKILL(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	alog, blog := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	const steps = "40"
	p := startZoo(t, t.TempDir(), nil, trainArgs("--schedule", "constant", "--steps", steps, "--save-every", "2", "-o", b, "--log", blog)...)
	for {
		if lines, err := os.ReadFile(blog); err == nil && bytes.Count(lines, []byte("\n")) >= 3 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("zoo train ended before it was killed: %s", p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != -1 {
		t.Fatalf("killed zoo exited with %d", code)
	}
	code, _, stderr := zoo(t, "train", "--resume", b, "-o", b, "--log", blog, "--steps", "8")
	if code != 0 {
		t.Fatalf("resume after SIGKILL: exit %d: %s", code, stderr)
	}
	if code, _, stderr := zoo(t, trainArgs("--schedule", "constant", "--steps", "8", "-o", a, "--log", alog)...); code != 0 {
		t.Fatalf("straight run: exit %d: %s", code, stderr)
	}
	la, lb := stepLosses(readTrainLog(t, alog)), stepLosses(readTrainLog(t, blog))
	if len(lb) != 8 {
		t.Fatalf("the resumed log holds %d steps, want 8", len(lb))
	}
	for k := 1; k <= 8; k++ {
		if la[k] != lb[k] {
			t.Errorf("step %d: loss/grad-norm bits %x straight, %x killed and resumed", k, la[k], lb[k])
		}
	}
}

// TestTrainSIGINT interrupts a real zoo train process with SIGINT (no --save-every): it saves
// the checkpoint of the last finished step, says so in one line, exits 130, and the run resumed
// from that checkpoint gives an uninterrupted run's losses bit for bit.
func TestTrainSIGINT(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	alog, blog := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	p := startZoo(t, t.TempDir(), nil, trainArgs("--schedule", "constant", "--steps", "400", "-o", b, "--log", blog)...)
	for {
		if lines, err := os.ReadFile(blog); err == nil && bytes.Count(lines, []byte("\n")) >= 2 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("zoo train ended before it was interrupted: %s", p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 130 {
		t.Fatalf("interrupted zoo train exited with %d, want 130: %s", code, p.stderr.String())
	}
	var step int
	stderr := p.stderr.String()
	i := strings.Index(stderr, "zoo train: stopped after step ")
	if i < 0 {
		t.Fatalf("stderr %q: want the line that names the saved step", stderr)
	}
	if _, err := fmt.Sscanf(stderr[i:], "zoo train: stopped after step %d", &step); err != nil || step < 2 || step >= 400 {
		t.Fatalf("stderr %q: step %d (%v)", stderr, step, err)
	}
	if !strings.Contains(stderr, "--resume "+b) {
		t.Errorf("stderr %q: want the --resume hint", stderr)
	}
	data, err := os.ReadFile(b)
	if err != nil {
		t.Fatalf("the interrupted run's checkpoint: %v", err)
	}
	_, meta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatalf("the interrupted run's checkpoint: %v", err)
	}
	if meta[optim.MetaStep] != strconv.Itoa(step) {
		t.Fatalf("checkpoint at step %s, the line says %d", meta[optim.MetaStep], step)
	}
	if got := len(stepLosses(readTrainLog(t, blog))); got != step {
		t.Fatalf("the log holds %d steps, the checkpoint %d", got, step)
	}
	total := strconv.Itoa(step + 2)
	if code, _, stderr := zoo(t, "train", "--resume", b, "-o", b, "--log", blog, "--steps", total); code != 0 {
		t.Fatalf("resume after SIGINT: exit %d: %s", code, stderr)
	}
	if code, _, stderr := zoo(t, trainArgs("--schedule", "constant", "--steps", total, "-o", a, "--log", alog)...); code != 0 {
		t.Fatalf("straight run: exit %d: %s", code, stderr)
	}
	la, lb := stepLosses(readTrainLog(t, alog)), stepLosses(readTrainLog(t, blog))
	for k := 1; k <= step+2; k++ {
		if la[k] != lb[k] {
			t.Errorf("step %d: loss/grad-norm bits %x straight, %x interrupted and resumed", k, la[k], lb[k])
		}
	}
	sameBits(t, "weights", readStateDict(t, a), readStateDict(t, b))
}

// TestTrainDiverges drives the loss to infinity with an absurd learning rate: training stops
// with one line naming the step and the parameter with the largest gradient, exit 1, and the
// checkpoint of the last save is kept.
func TestTrainDiverges(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	code, _, stderr := zoo(t, "train", "vanilla.tiny", "--input", text, "--window", "24", "--batch", "2",
		"--lr", "1e30", "--schedule", "constant", "--clip", "0", "--steps", "20", "--save-every", "1", "-o", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "training diverged at step ") ||
		!strings.Contains(stderr, "the largest gradient is ") || !strings.Contains(stderr, "checkpoint (step ") {
		t.Fatalf("stderr %q: want one line naming the step, the largest gradient's parameter and the kept checkpoint", stderr)
	}
	var step int
	if _, err := fmt.Sscanf(stderr, "zoo: training diverged at step %d", &step); err != nil || step < 2 {
		t.Fatalf("stderr %q: step %d (%v)", stderr, step, err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	list, meta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	if meta[optim.MetaStep] != strconv.Itoa(step-1) {
		t.Errorf("kept checkpoint is at step %s, want %d (the last before the divergence)", meta[optim.MetaStep], step-1)
	}
	for _, nt := range list {
		for _, x := range nt.Tensor.F32 {
			if math.IsNaN(float64(x)) {
				t.Fatalf("the kept checkpoint holds a NaN in %s", nt.Name)
			}
		}
	}
}

func TestTrainBadInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"train", "vanilla.tiny", "-o", out}, "--input"},
		{[]string{"train", "vanilla.tiny", "--input", text}, "-o FILE.safetensors is required"},
		{[]string{"train", "vanilla.tiny", "--input", text, "-o", "m.bin"}, ".safetensors"},
		{trainArgs("-o", out, "--objective", "nsp"), "--objective"},
		{trainArgs("-o", out, "--optimizer", "adam"), "--optimizer"},
		{trainArgs("-o", out, "--betas", "0.9"), "--betas"},
		{trainArgs("-o", out, "--betas", "1,0.9"), "--betas"},
		{trainArgs("-o", out, "--lr", "0"), "--lr"},
		{trainArgs("-o", out, "--steps", "0"), "--steps"},
		{trainArgs("-o", out, "--warmup", "2000"), "--warmup"},
		{trainArgs("-o", out, "--schedule", "step"), "--schedule"},
		{trainArgs("-o", out, "--label-smoothing", "1"), "--label-smoothing"},
		{trainArgs("-o", out, "--clip", "-1"), "--clip"},
		{trainArgs("-o", out, "--momentum", "0.9"), "--momentum"},
		{trainArgs("-o", out, "--eval-every", "5"), "--eval-every"},
		{trainArgs("-o", out, "--batch", "0"), "--batch"},
		{trainArgs("-o", out, "--window", "100000"), "--window"},
		{trainArgs("-o", out, "--eval", "no-such-file.txt"), "--eval"},
		{trainArgs("-o", out, "--weights", "no-such.safetensors"), "no-such.safetensors"},
		{[]string{"train", "--resume", "no-such.safetensors", "-o", out}, "--resume"},
		{[]string{"train", "-o", out, "--input", text}, "model name"},
	}
	for _, tt := range tests {
		code, _, stderr := zoo(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("zoo %s: exit %d, stderr %q; want exit 2 and one line naming %s", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}

// TestTrainResumeKeepsSettings refuses a resumed run whose flags change what a step computes.
func TestTrainResumeKeepsSettings(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if code, _, stderr := zoo(t, trainArgs("--steps", "1", "-o", out)...); code != 0 {
		t.Fatal(stderr)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--lr", "3e-3"}, "--lr 0.003 differs from the resumed run's 0.001"},
		{[]string{"--batch", "4"}, "--batch 4 differs"},
		{[]string{"--precision", "bf16"}, "--precision bf16 differs from the resumed run's fp32"},
		{[]string{"--weights", out}, "drop --weights"},
		{[]string{"--steps", "1"}, "already at step 1"},
	} {
		args := append([]string{"train", "--resume", out, "-o", out, "--steps", "2"}, tt.args...)
		if code, _, stderr := zoo(t, args...); code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("zoo %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(args, " "), code, stderr, tt.want)
		}
	}
}

// TestTrainOutputs checks the files a run writes: the state_dict holds exactly the model's
// parameters and buffers under their names (zoo run --weights loads it), the log has one line
// per step with the keys plus evaluation lines, and the plot is a PNG.
func TestTrainOutputs(t *testing.T) {
	dir := t.TempDir()
	out, logf, plot := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "m.jsonl"), filepath.Join(dir, "m.png")
	code, stdout, stderr := zoo(t, trainArgs("--steps", "4", "--eval", text, "--eval-every", "2", "-o", out, "--log", logf, "--plot", plot)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Count(strings.TrimSpace(stdout), "\n") != 0 || !strings.Contains(stdout, "bits/byte") {
		t.Errorf("summary %q: want one line with the held-out bits per byte", stdout)
	}
	lines := readTrainLog(t, logf)
	var steps, evals []int
	for _, l := range lines {
		if _, ok := l["eval_loss"]; ok {
			evals = append(evals, int(l["step"]))
			if l["eval_bits_per_byte"] <= 0 || len(l) != 3 {
				t.Errorf("eval line %v", l)
			}
			continue
		}
		steps = append(steps, int(l["step"]))
		for _, k := range []string{"loss", "lr", "grad_norm", "tokens_per_s"} {
			if _, ok := l[k]; !ok || len(l) != 5 {
				t.Errorf("step line %v lacks %s or has extra keys", l, k)
			}
		}
	}
	if fmt.Sprint(steps) != "[1 2 3 4]" || fmt.Sprint(evals) != "[0 2 4]" {
		t.Errorf("logged steps %v, evaluations %v; want 1-4 and 0 2 4", steps, evals)
	}
	png, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("plot: %v, %d bytes", err, len(png))
	}
	code, _, stderr = zoo(t, "show", "vanilla.tiny", "--weights", out)
	if code != 0 {
		t.Errorf("show --weights of the trained file: exit %d: %s", code, stderr)
	}
}

// TestTrainMemoryGuard refuses a step whose activations (kept for the backward pass) do not
// fit, naming the flag that lowers them.
func TestTrainMemoryGuard(t *testing.T) {
	t.Setenv("ZOO_MEMORY_LIMIT", "50MiB")
	out := filepath.Join(t.TempDir(), "m.safetensors")
	code, _, stderr := zoo(t, "train", "vanilla.tiny", "--input", text, "-o", out, "--steps", "1")
	if code != 2 || !strings.Contains(stderr, "the training step of vanilla.tiny") || !strings.Contains(stderr, "lower --batch") {
		t.Fatalf("exit %d, stderr %q; want exit 2 and advice to lower --batch", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused run wrote its output")
	}
}

// TestTrainFlagsBeforeName accepts the flags on either side of the model name.
func TestTrainFlagsBeforeName(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	args := append(append([]string{"train"}, trainFast[1:]...), "--steps", "1", "-o", out, "vanilla.tiny")
	if code, stdout, stderr := zoo(t, args...); code != 0 || !strings.Contains(stdout, "trained vanilla.tiny") {
		t.Fatalf("zoo %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
	}
}

// TestTrainCheckpointActivations: recomputing each layer's activations in the backward pass
// gives the same training to float rounding (the math is the same; the backend may fuse the
// recomputed copies differently), and the memory guard's estimate of the step's activations
// (the peak of live values in the order the step runs) drops.
func TestTrainCheckpointActivations(t *testing.T) {
	dir := t.TempDir()
	var logs [2][]map[string]float64
	for i, extra := range [][]string{nil, {"--checkpoint-activations"}} {
		out, log := filepath.Join(dir, fmt.Sprint(i, ".safetensors")), filepath.Join(dir, fmt.Sprint(i, ".jsonl"))
		args := trainArgs(append([]string{"--steps", "3", "--set", "layers=3", "-o", out, "--log", log}, extra...)...)
		if code, _, stderr := zoo(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		logs[i] = readTrainLog(t, log)
	}
	if len(logs[0]) != 3 || len(logs[1]) != 3 {
		t.Fatalf("logs of %d and %d steps, want 3", len(logs[0]), len(logs[1]))
	}
	for k := range logs[0] {
		for _, key := range []string{"loss", "grad_norm"} {
			a, b := logs[0][k][key], logs[1][k][key]
			if math.Abs(a-b) > 1e-5*math.Abs(a) {
				t.Errorf("step %d %s: %v plain, %v checkpointed", k+1, key, a, b)
			}
		}
	}
	acts := func(extra ...string) float64 {
		t.Helper()
		t.Setenv(memlimit.Env, "16MiB")
		args := trainArgs(append([]string{"--steps", "1", "--set", "layers=3", "--batch", "64", "--window", "64", "-o", filepath.Join(dir, "x.safetensors")}, extra...)...)
		code, _, stderr := zoo(t, args...)
		i := strings.Index(stderr, "activations ")
		if code != 2 || i < 0 {
			t.Fatalf("%v under a 16 MiB limit: exit %d, stderr %q; want the guard's refusal", extra, code, stderr)
		}
		var v float64
		var unit string
		if _, err := fmt.Sscanf(stderr[i+len("activations "):], "%g %3s", &v, &unit); err != nil {
			t.Fatalf("stderr %q: %v", stderr, err)
		}
		scale := map[string]float64{"B": 1, "B)": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[strings.TrimSuffix(unit, ")")]
		if scale == 0 {
			t.Fatalf("stderr %q: unit %q", stderr, unit)
		}
		return v * scale
	}
	plain, ck := acts(), acts("--checkpoint-activations")
	if ck >= plain {
		t.Errorf("estimated activations %.0f bytes checkpointed, %.0f plain: want fewer", ck, plain)
	}
	t.Logf("estimated step activations: %.0f bytes plain, %.0f checkpointed", plain, ck)
}

// TestTrainOptionsRenderAsFlags: every option name package train's messages carry (and
// package zoo's LoadOptions, which they name too) renders as a flag that some command
// defines, so that a library message reaches the user in the CLI's words.
func TestTrainOptionsRenderAsFlags(t *testing.T) {
	defined := map[string]bool{}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					defined[n] = true
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(commands())
	opts := train.OptionNames()
	for _, opt := range zooroot.OptionNames() {
		if strings.HasPrefix(opt, "LoadOptions.") {
			opts = append(opts, opt)
		}
	}
	for _, opt := range opts {
		got := flagNames(opt)
		if name := strings.TrimLeft(got, "-"); got == opt || !defined[name] || flagOf(opt) != name {
			t.Errorf("%s renders as %q (flagOf %q): want a flag some command defines", opt, got, flagOf(opt))
		}
	}
	if got := flagNames("EvalConfig.Batch and Config.Batch"); got != "--batch and --batch" {
		t.Errorf("EvalConfig.Batch and Config.Batch render as %q", got)
	}
}

// waitLogLines waits until the --log file of a running zoo holds n lines.
func waitLogLines(t *testing.T, p *zooProc, log string, n int) {
	t.Helper()
	for {
		if lines, err := os.ReadFile(log); err == nil && bytes.Count(lines, []byte("\n")) >= n {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("zoo train ended before its log had %d lines: %s", n, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestTrainResumeCarriesSettings: `zoo train --resume FILE --steps N`, with nothing else,
// continues the run as it was started: its --eval and --eval-every (evaluations after the
// resume), its --log (appended: one line per step 1–6 and per evaluation), its --plot
// (redrawn), -o (the checkpoint itself) and its --save-every (a resumed run killed after step
// 9 of 400 kept a checkpoint of step 8, not the resumed step 4).
func TestTrainResumeCarriesSettings(t *testing.T) {
	dir := t.TempDir()
	out, log, plot := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "m.jsonl"), filepath.Join(dir, "m.png")
	if code, _, stderr := zoo(t, trainArgs("--steps", "4", "--eval", text, "--eval-every", "2", "--save-every", "2", "-o", out, "--log", log, "--plot", plot)...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	if err := os.Remove(plot); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := zoo(t, "train", "--resume", out, "--steps", "6")
	if code != 0 {
		t.Fatalf("resumed run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "with the run's --eval "+text+" --eval-every 2 --log "+log+" --plot "+plot+" --save-every 2") {
		t.Errorf("stderr %q does not say which settings the resumed run carried", stderr)
	}
	var steps, evals []int
	for _, l := range readTrainLog(t, log) {
		if _, ok := l["eval_loss"]; ok {
			evals = append(evals, int(l["step"]))
		} else {
			steps = append(steps, int(l["step"]))
		}
	}
	if fmt.Sprint(steps) != "[1 2 3 4 5 6]" || fmt.Sprint(evals) != "[0 2 4 6]" {
		t.Errorf("log after the resume: steps %v, evaluations %v; want 1–6 and 0 2 4 6", steps, evals)
	}
	if png, err := os.ReadFile(plot); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the resumed run did not redraw --plot: %v", err)
	}
	ck, err := train.ReadCheckpoint(out)
	if err != nil || ck.Step != 6 {
		t.Fatalf("checkpoint after the resume: %+v, %v", ck, err)
	}

	// --save-every comes along: a resumed run killed after step 9 lost at most one step.
	p := startZoo(t, t.TempDir(), nil, "train", "--resume", out, "--steps", "400", "--eval-every", "0", "--schedule", "linear")
	waitLogLines(t, p, log, len(steps)+len(evals)+3) // steps 7, 8 and 9
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if ck, err := train.ReadCheckpoint(out); err != nil || ck.Step < 8 {
		t.Errorf("after a kill at step 9 of a resumed run the checkpoint holds step %d (%v); want 8, saved by the run's --save-every 2", ck.Step, err)
	}
}

// TestTrainExtendSchedule: `zoo train --resume FILE --steps N` beyond a finished linear run
// follows the documented rule (train.ExtendRule), says so on stderr, and logs it: the first
// run's learning rates stay, the rate climbs back from the 0 it ended at by a tenth of --lr a
// step (no jump) and decays linearly to 0 at the new last step.
func TestTrainExtendSchedule(t *testing.T) {
	dir := t.TempDir()
	out, log := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "m.jsonl")
	if code, _, stderr := zoo(t, trainArgs("--steps", "6", "-o", out, "--log", log)...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	first := readTrainLog(t, log)
	code, _, stderr := zoo(t, "train", "--resume", out, "--steps", "26")
	if code != 0 {
		t.Fatalf("extended run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "extending the run from 6 to 26 steps: steps 7–26: warm-up over 10 steps from lr 0 to 0.001, then linear to 0 at step 26") {
		t.Errorf("stderr %q does not state the schedule of the added steps", stderr)
	}
	lines := readTrainLog(t, log)
	if len(lines) != 26 {
		t.Fatalf("%d log lines, want 26", len(lines))
	}
	for k := range first {
		if lines[k]["lr"] != first[k]["lr"] {
			t.Errorf("step %d: lr %g after the extension, %g before", k+1, lines[k]["lr"], first[k]["lr"])
		}
	}
	for k := 6; k < 26; k++ {
		if d := math.Abs(lines[k]["lr"] - lines[k-1]["lr"]); d > 1e-4+1e-12 {
			t.Errorf("lr %g at step %d, %g at step %d: a jump of %g", lines[k-1]["lr"], k, lines[k]["lr"], k+1, d)
		}
	}
	if lines[15]["lr"] != 1e-3 || lines[25]["lr"] != 0 {
		t.Errorf("lr %g at step 16 and %g at step 26; want the peak 0.001 back and 0 at the end", lines[15]["lr"], lines[25]["lr"])
	}
}

// tempFiles lists the temporary files of atomic writes in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestTrainKilledSaveLeavesNoTemp kills a real zoo train with SIGKILL while it writes a
// checkpoint (its temporary file is on disk), and checks that the next run on that output
// removes what the killed save left and says so, and that the resumed checkpoint still holds.
func TestTrainKilledSaveLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.safetensors")
	// A wider model, saved every step, so that a save is in progress often.
	args := trainArgs("--steps", "100000", "--save-every", "1", "--set", "d_model=256", "--set", "d_ff=1024", "-o", out)
	var left []string
	for try := 0; try < 20 && len(left) == 0; try++ {
		p := startZoo(t, t.TempDir(), nil, args...)
		deadline := time.Now().Add(30 * time.Second)
		for len(tempFiles(t, dir)) == 0 || !fileExists(out) {
			select {
			case <-p.done:
				t.Fatalf("zoo train ended: %s", p.stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("no save in progress seen within 30 s")
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		left = tempFiles(t, dir)
	}
	if len(left) == 0 {
		t.Skip("no kill landed inside a save in 20 tries")
	}
	t.Logf("the killed save left %v", left)
	ck, err := train.ReadCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := zoo(t, "train", "--resume", out, "--steps", strconv.Itoa(ck.Step+1), "--save-every", "0")
	if code != 0 {
		t.Fatalf("the run after the kill: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "that killed saves left") {
		t.Errorf("stderr %q does not say what was removed", stderr)
	}
	if rest := tempFiles(t, dir); len(rest) != 0 {
		t.Errorf("temporary files after the next run: %v", rest)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestTrainStreamsInput trains on a 64 MB text in a real zoo process and checks its peak
// resident memory: the windows are read from the file as batches need them, so the text is
// not held (as int64 token ids it would take 512 MB).
func TestTrainStreamsInput(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	chunk := bytes.Repeat([]byte("In the beginning God created the heaven and the earth. "), 1<<14)
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	for written := 0; written < 64<<20; written += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := startZoo(t, t.TempDir(), nil, "train", "vanilla.tiny", "--input", big, "--window", "64", "--batch", "2", "--steps", "40", "--shuffle",
		"-o", filepath.Join(dir, "m.safetensors"))
	// The peak is the kernel's high-water mark of the process's own memory (VmHWM), read
	// until it exits: rusage's maxrss would also count the test process, whose memory the
	// child shares until it execs.
	var peak int64
	for done := false; !done; {
		select {
		case err := <-p.done:
			p.done <- err
			done = true
		case <-time.After(5 * time.Millisecond):
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); err == nil {
			for _, line := range strings.Split(string(st), "\n") {
				var kb int64
				if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
					peak = max(peak, kb<<10)
				}
			}
		}
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.String())
	}
	if peak == 0 {
		t.Skip("no /proc/PID/status on this platform")
	}
	t.Logf("peak RSS training on a 64 MiB text: %d MiB", peak>>20)
	if peak > 256<<20 {
		t.Errorf("peak RSS %d MiB training on a 64 MiB text: the text is held in memory", peak>>20)
	}
}
