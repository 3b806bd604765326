package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/profile"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestProfileAccounting profiles the tiny vanilla encoder and checks the accounting rather
// than any speed: the steps' times, measured in the same runs as the whole run, add up to it
// within 10 % (and never exceed it); the op-type table and the step list each add up to the
// steps' total; the FLOPs are the graph's (zoo show's count at the same shape); the fused
// kernels are named as such; and the trace is JSON with one complete event per step run,
// in order and without overlaps, that no other event imitates.
func TestProfileAccounting(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.json")
	const reps = 3
	// The gaps between steps are real time, so one descheduling of the process between two
	// steps of a 1.5 ms run (a busy CI machine running other test packages) can take more
	// than a tenth of it: the 90 % floor is asked of the best of three profiles. A profiler
	// that lost steps or timed them outside the run fails every attempt.
	var rep profile.Report
	for attempt := 1; ; attempt++ {
		code, out, errs := zoo(t, "profile", "vanilla.tiny", "--seq", "64", "--reps", "3", "--trace", trace, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		rep = profile.Report{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if rep.RunMS <= 0 || rep.StepsMS > rep.RunMS {
			t.Fatalf("steps take %.4f ms of a %.4f ms run: more than the run", rep.StepsMS, rep.RunMS)
		}
		if rep.StepsMS >= 0.9*rep.RunMS {
			break
		}
		if attempt == 3 {
			t.Fatalf("steps take %.4f ms of a %.4f ms run (%.1f %%) in the last of %d profiles: want 90-100 %%", rep.StepsMS, rep.RunMS, 100*rep.Accounted, attempt)
		}
		t.Logf("profile %d: steps take %.1f %% of the run; profiling again", attempt, 100*rep.Accounted)
	}
	var opsMS, opsPct, nodesMS float64
	var opsFLOPs, nodesFLOPs int64
	calls := 0
	for _, o := range rep.Ops {
		opsMS, opsPct, opsFLOPs, calls = opsMS+o.MS, opsPct+o.Percent, opsFLOPs+o.FLOPs, calls+o.Calls
	}
	fusedAttention := 0
	for _, s := range rep.Nodes {
		nodesMS, nodesFLOPs = nodesMS+s.MS, nodesFLOPs+s.FLOPs
		if s.Fused != (len(s.Covers) > 0) || s.Fused != strings.Contains(s.Kind, "[") {
			t.Errorf("step %s: fused %v, covers %d nodes, kind %q", s.Name, s.Fused, len(s.Covers), s.Kind)
		}
		if strings.HasPrefix(s.Kind, "FusedAttention[") && strings.Contains(s.Kind, "Softmax") {
			fusedAttention++
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	if !near(opsMS, rep.StepsMS) || !near(nodesMS, rep.StepsMS) || calls != len(rep.Nodes) {
		t.Errorf("op types add up to %.6f ms in %d calls, steps to %.6f ms in %d; total %.6f ms", opsMS, calls, nodesMS, len(rep.Nodes), rep.StepsMS)
	}
	if math.Abs(opsPct-100*rep.Accounted) > 1e-6 {
		t.Errorf("op types add up to %.4f %% of the run, steps account for %.4f %%", opsPct, 100*rep.Accounted)
	}
	if fusedAttention != 2 {
		t.Errorf("%d FusedAttention[...Softmax...] steps, want one per layer (2)", fusedAttention)
	}
	code, showOut, errs := zoo(t, "show", "vanilla.tiny", "--seq", "64", "--json")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errs)
	}
	var show struct {
		Costs []struct {
			FLOPs int64 `json:"flops"`
		} `json:"costs"`
	}
	if err := json.Unmarshal([]byte(showOut), &show); err != nil || len(show.Costs) != 1 {
		t.Fatalf("show: %v\n%s", err, showOut)
	}
	if rep.FLOPs != show.Costs[0].FLOPs || opsFLOPs != rep.FLOPs || nodesFLOPs != rep.FLOPs {
		t.Errorf("FLOPs: report %d, op types %d, steps %d; zoo show counts %d", rep.FLOPs, opsFLOPs, nodesFLOPs, show.Costs[0].FLOPs)
	}

	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ph   string         `json:"ph"`
			TS   *float64       `json:"ts"`
			Dur  *float64       `json:"dur"`
			PID  *int           `json:"pid"`
			TID  *int           `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	var complete int
	end := -1.0
	for _, ev := range doc.TraceEvents {
		if ev.PID == nil || ev.TID == nil || ev.TS == nil || ev.Name == "" {
			t.Fatalf("event %+v lacks name, pid, tid or ts", ev)
		}
		switch ev.Ph {
		case "M":
			continue
		case "X":
		default:
			t.Fatalf("event %q has phase %q", ev.Name, ev.Ph)
		}
		if ev.Dur == nil || *ev.Dur < 0 || *ev.TS < end {
			t.Fatalf("event %d (%s) at %v µs: no duration, or it starts before the previous one ended (%v µs)", complete, ev.Name, *ev.TS, end)
		}
		end = *ev.TS + *ev.Dur
		step := rep.Nodes[complete%len(rep.Nodes)]
		if ev.Cat != step.Kind || int(ev.Args["run"].(float64)) != complete/len(rep.Nodes) {
			t.Errorf("event %d: category %q, run %v; want step %q of run %d", complete, ev.Cat, ev.Args["run"], step.Kind, complete/len(rep.Nodes))
		}
		complete++
	}
	if complete != reps*len(rep.Nodes) {
		t.Errorf("%d complete events, want %d runs × %d steps", complete, reps, len(rep.Nodes))
	}
}

// TestProfileTable checks the table of a variant and of an .onnx file: the header, the
// op-type table with its fused kernels, and the step list.
func TestProfileTable(t *testing.T) {
	onnxPath := filepath.Join(t.TempDir(), "tiny.onnx")
	if code, _, errs := zoo(t, "export", "vanilla.tiny", "--onnx", "-o", onnxPath); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{
		{"profile", "vanilla.tiny", "--seq", "16", "--reps", "1"},
		{"profile", "--seq", "16", "--batch", "2", onnxPath, "--top", "0"},
	} {
		code, out, errs := zoo(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		for _, want := range []string{"by op type:", "FusedAttention[", "FusedLinear[", "(fused, ", "GFLOP/s", "% of the run", "compile report (fusions applied", "fusions: linear "} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
		if args[len(args)-1] == "0" && !strings.Contains(out, "every step, in order") {
			t.Errorf("--top 0: no full step list:\n%s", out)
		}
	}
}

// TestProfileTrain profiles the training step of the tiny vanilla encoder: the report says
// so, its steps include the backward pass (autodiff's grad/ nodes and the softmax backward
// fused by the CPU backend) and the loss, and the step costs about three forward passes
// (the backward pass does two products per forward product), counted from the gradient
// graph.
func TestProfileTrain(t *testing.T) {
	code, out, errs := zoo(t, "profile", "vanilla.tiny", "--train", "--batch", "2", "--seq", "32", "--reps", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep profile.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !rep.Train || rep.Batch != 2 || rep.N != 32 || rep.NoCost != "" {
		t.Fatalf("train %v, batch %d, n %d, no cost %q; want a costed training step at 2 × 32", rep.Train, rep.Batch, rep.N, rep.NoCost)
	}
	// The accounting itself is TestProfileAccounting's; one short run on a shared machine
	// can lose a good part of itself between steps.
	if rep.RunMS <= 0 || rep.StepsMS <= 0 || rep.StepsMS > rep.RunMS {
		t.Errorf("steps take %.4f ms of a %.4f ms run", rep.StepsMS, rep.RunMS)
	}
	var grads, attnGrad, loss int
	for _, s := range rep.Nodes {
		switch {
		case strings.HasPrefix(s.Name, "grad/"):
			grads++
		case strings.HasPrefix(s.Name, "xent/"):
			loss++
		}
		if strings.HasPrefix(s.Kind, "FusedAttentionBackward[") {
			attnGrad++
		}
	}
	if grads == 0 || loss == 0 || attnGrad != 2 {
		t.Errorf("%d backward steps, %d loss steps, %d fused attention backwards (want some, some, one per layer)", grads, loss, attnGrad)
	}
	code, out, errs = zoo(t, "profile", "vanilla.tiny", "--batch", "2", "--seq", "32", "--reps", "1", "--json")
	if code != 0 {
		t.Fatalf("inference: exit %d: %s", code, errs)
	}
	var inf profile.Report
	if err := json.Unmarshal([]byte(out), &inf); err != nil {
		t.Fatal(err)
	}
	if r := float64(rep.FLOPs) / float64(inf.FLOPs); r < 2.5 || r > 3.5 {
		t.Errorf("the training step counts %d FLOPs, %.2f× inference's %d; want about 3×", rep.FLOPs, r, inf.FLOPs)
	}
	code, out, errs = zoo(t, "profile", "vanilla.tiny", "--train", "--seq", "16", "--reps", "1")
	if code != 0 || !strings.Contains(out, "vanilla.tiny training step (loss and gradients) on cpu") {
		t.Errorf("table: exit %d, %s\n%s", code, errs, out)
	}
}

// TestProfileBadInput: one line, exit 2, and no trace file, for each mistake.
func TestProfileBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"profile", "vanilla.tiny", "--trace", filepath.Join(dir, "t.txt")}, ".json"},
		{[]string{"profile", "vanilla.tiny", "--seq", "0"}, "--seq"},
		{[]string{"profile", "vanilla.tiny", "--warmup", "-1"}, "--warmup"},
		{[]string{"profile", "linformer.tiny", "--seq", "4096", "--trace", filepath.Join(dir, "t.json")}, "maximum length"},
		{[]string{"profile", "vanilla.tiny", "--trace", filepath.Join(dir, "missing", "t.json")}, "t.json"},
		{[]string{"profile"}, "want one model"},
		{[]string{"profile", "model.onnx", "--train"}, "ONNX file"},
		{[]string{"profile", "vanilla.tiny", "--checkpoint-activations"}, "--train"},
		{[]string{"profile", "vanilla.tiny", "--train", "--feed", "tokens=1"}, "--feed"},
	} {
		code, _, errs := zoo(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %q", tc.args, code, errs, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad input left %d files behind", len(entries))
	}
}

// noProfile is a program without a step timer, as the CUDA backend's are.
type noProfile struct{}

func (noProfile) Run(context.Context, map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	return nil, nil
}
func (noProfile) Close() error { return nil }

func TestProfilerOf(t *testing.T) {
	if _, err := profile.ProfilerOf(noProfile{}, "cuda"); err == nil || !strings.Contains(err.Error(), "backend cuda cannot profile") {
		t.Errorf("a program without a step timer: error %v", err)
	}
}
