package profile

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestSettingsCheck(t *testing.T) {
	ok := Settings{Batch: 1, Seq: 8, Reps: 1}
	for _, c := range []struct {
		s   Settings
		err string
	}{
		{ok, ""},
		{Settings{Batch: 1, Seq: 0, Reps: 1}, "--seq, --batch and --reps must be at least 1 (got 0, 1, 1)"},
		{Settings{Batch: 1, Seq: 8, Reps: 1, Warmup: -1}, "--warmup, --top and --threads must not be negative"},
		{Settings{Batch: 1, Seq: 8, Reps: 1, Threads: -2}, "must not be negative"},
	} {
		err := c.s.Check()
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: error %v, want %q", c.s, err, c.err)
		}
	}
}

func TestShape(t *testing.T) {
	for _, c := range []struct {
		name             string
		lim              Limits
		b, n             int
		batchSet, seqSet bool
		wantB, wantN     int
		err              string
	}{
		{"free", Limits{}, 2, 64, true, true, 2, 64, ""},
		{"static sizes", Limits{Batch: 4, Seq: 32}, 1, 128, false, false, 4, 32, ""},
		{"static batch disagrees", Limits{Batch: 4}, 2, 8, true, false, 0, 0, "--batch 2: m's inputs are fixed at batch 4"},
		{"static length disagrees", Limits{Seq: 32}, 1, 16, false, true, 0, 0, "--seq 16: m's inputs are fixed at 32 tokens"},
		{"default length clamped", Limits{MaxLen: 100}, 1, 128, false, false, 1, 100, ""},
		{"explicit length too long", Limits{MaxLen: 100}, 1, 128, false, true, 0, 0, "longer than m's maximum length 100 (max_len; pass a shorter --seq"},
		{"position table", Limits{TableRows: 64, TableWhy: "the rows of its position table pos.weight"}, 1, 128, false, true, 0, 0, "(the rows of its position table pos.weight)"},
	} {
		b, n, err := Shape("m", c.lim, c.b, c.n, c.batchSet, c.seqSet)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || b != c.wantB || n != c.wantN {
			t.Errorf("%s: %d × %d, %v; want %d × %d", c.name, b, n, err, c.wantB, c.wantN)
		}
	}
}

func TestFullBatch(t *testing.T) {
	b := FullBatch(2, 5, 7)
	if b.B != 2 || b.N != 5 || len(b.Tokens) != 10 || b.Lengths[1] != 5 {
		t.Fatalf("batch %+v", b)
	}
	for _, id := range b.Tokens {
		if id < 0 || id >= 7 {
			t.Errorf("id %d outside the vocabulary of 7", id)
		}
	}
}

// twoSteps is a graph a → Relu → b → Relu → c, a of shape (batch, 3) float32, and its nodes.
func twoSteps() (*graph.Graph, []*graph.Node) {
	r1 := &graph.Node{Name: "r1", Op: "Relu", Inputs: []string{"a"}, Outputs: []string{"b"}}
	r2 := &graph.Node{Name: "r2", Op: "Relu", Inputs: []string{"b"}, Outputs: []string{"c"}}
	g := &graph.Graph{Nodes: []*graph.Node{r1, r2},
		Inputs:  []graph.ValueInfo{{Name: "a", DType: tensor.Float32, Shape: graph.Shape{graph.Sym("batch"), graph.Fixed(3)}}},
		Outputs: []graph.ValueInfo{{Name: "c", DType: tensor.Float32}}}
	return g, []*graph.Node{r1, r2}
}

// TestStepCosts: a fused step moves the values its nodes read that none of them makes and
// those they make that are read outside (here: a in, c out; b stays inside).
func TestStepCosts(t *testing.T) {
	g, nodes := twoSteps()
	sc, err := NewStepCosts(g, map[string][]int{"a": {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, bytes := sc.of(backends.StepTime{Nodes: nodes, Fused: true}); bytes != 2*24 {
		t.Errorf("the fused step moves %d bytes, want 48 (a and c)", bytes)
	}
	if _, bytes := sc.of(backends.StepTime{Nodes: nodes[:1]}); bytes <= 0 {
		t.Errorf("a plain Relu moves %d bytes", bytes)
	}
	if _, bytes := (StepCosts{}).of(backends.StepTime{Nodes: nodes, IOBytes: 7}); bytes != 7 {
		t.Errorf("without costs, a step moves %d bytes, want its measured 7", bytes)
	}
}

func TestSummarizeAndTrace(t *testing.T) {
	_, nodes := twoSteps()
	run := func(d1, d2 time.Duration) Run {
		return Run{prof: &backends.Profile{Total: d1 + d2 + time.Millisecond, Steps: []backends.StepTime{
			{Op: "Relu", Name: "r1", Nodes: nodes[:1], Duration: d1, IOBytes: 48},
			{Op: "FusedThing", Name: "r2", Nodes: nodes, Fused: true, Start: d1, Duration: d2, IOBytes: 96},
		}}}
	}
	runs := []Run{run(2*time.Millisecond, 4*time.Millisecond), run(2*time.Millisecond, 6*time.Millisecond)}
	rep := &Report{Model: "m"}
	steps, err := Summarize(rep, runs, StepCosts{}) // costs not counted: bytes as measured
	if err != nil {
		t.Fatal(err)
	}
	if rep.RunMS != 8 || rep.StepsMS != 7 || len(steps) != 2 || steps[1].Kind != "FusedThing[Relu]" || len(steps[1].Covers) != 2 || steps[0].Bytes != 48 {
		t.Errorf("report %+v, steps %+v", rep, steps)
	}
	if len(rep.Ops) != 2 || rep.Ops[0].Op != "FusedThing[Relu]" || rep.Ops[0].MS != 5 {
		t.Errorf("op types %+v: want the fused kernel first, 5 ms", rep.Ops)
	}
	var b bytes.Buffer
	Print(&b, *rep, 1)
	if out := b.String(); !strings.Contains(out, "slowest 1 of 2 steps") || !strings.Contains(out, "r2 (fused, 2 nodes)") {
		t.Errorf("table:\n%s", out)
	}
	b.Reset()
	if err := WriteTrace(&b, "t", runs, steps); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []TraceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || len(doc.TraceEvents) != 2+4 {
		t.Fatalf("trace: %v, %d events", err, len(doc.TraceEvents))
	}
	if e := doc.TraceEvents[5]; e.Ph != "X" || e.TS != 2000 || *e.Dur != 6000 || e.Cat != "FusedThing[Relu]" {
		t.Errorf("last event %+v: want run 2's fused step at 2 ms for 6 ms", e)
	}
	if _, err := Summarize(&Report{}, nil, StepCosts{}); err == nil {
		t.Error("no runs: no error")
	}
}
