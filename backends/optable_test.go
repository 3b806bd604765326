package backends_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/backendtest"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cuda"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// tableOps returns the names of graph's op table, sorted.
func tableOps() []string {
	var ops []string
	for _, d := range graph.Ops() {
		ops = append(ops, d.Key())
	}
	return ops
}

// uncovered returns the problems of one implementation against the op table: every op it
// lacks (has is false) that gaps does not list, every gap it has after all, and every
// name it has or lists that the table does not know.
func uncovered(table []string, has func(op string) bool, extra []string, gaps map[string]string) []string {
	var bad []string
	known := map[string]bool{}
	for _, op := range table {
		known[op] = true
		_, gap := gaps[op]
		switch {
		case !has(op) && !gap:
			bad = append(bad, op+" is missing and not listed as unsupported")
		case has(op) && gap:
			bad = append(bad, op+" is listed as unsupported but is supported")
		}
	}
	for op, why := range gaps {
		if !known[op] {
			bad = append(bad, op+" is listed as unsupported but is not in graph's op table")
		}
		if strings.TrimSpace(why) == "" {
			bad = append(bad, op+" is listed as unsupported without a reason")
		}
	}
	for _, op := range extra {
		if !known[op] {
			bad = append(bad, op+" is implemented but is not in graph's op table")
		}
	}
	sort.Strings(bad)
	return bad
}

func set(ops []string) func(string) bool {
	return func(op string) bool { return slices.Contains(ops, op) }
}

// roundTrips reports whether every conformance case of op survives Export and Import at
// every opset from MinOpset to MaxOpset: at the op's SinceVersion and later it comes back
// with its op and attributes, or, where the exporter writes it in another form at that opset
// (onnx's export adapters), as a graph that still computes the case's outputs on the CPU
// backend; below its SinceVersion Export writes it out as basic ops (onnx.DecomposedBelow,
// checked the same way) or refuses it, naming the op.
func roundTrips(t *testing.T, op string) bool {
	d, _ := graph.LookupOp(op)
	lowered, decomposes := onnx.DecomposedBelow(op)
	ok, found := true, false
	for _, c := range backendtest.Cases() {
		if c.Op != op {
			continue
		}
		found = true
		g, inputs, err := backendtest.BuildCase(c, false)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			return false
		}
		for opset := onnx.MinOpset; opset <= onnx.MaxOpset; opset++ {
			data, err := onnx.Export(g, onnx.ExportOptions{Opset: opset})
			if opset < d.SinceVersion && !(decomposes && opset < lowered) {
				if err == nil || !strings.Contains(err.Error(), op) {
					t.Errorf("%s: Export at opset %d (below %s's SinceVersion %d) gives %v, want an error naming the op", c.Name, opset, op, d.SinceVersion, err)
					ok = false
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: Export at opset %d: %v", c.Name, opset, err)
				ok = false
				continue
			}
			back, err := onnx.Import(data)
			if err != nil {
				t.Errorf("%s: Import at opset %d: %v", c.Name, opset, err)
				ok = false
				continue
			}
			n, m := g.Nodes[0], back.Nodes[0]
			if m.Op == n.Op && len(m.Attrs) == len(n.Attrs) && len(m.Inputs) == len(n.Inputs) {
				continue
			}
			if err := sameOutputs(back, inputs, c); (err != nil) != c.WantErr {
				t.Errorf("%s: at opset %d, %s comes back as %d nodes (%s first) that compute other values: %v", c.Name, opset, n.Op, len(back.Nodes), m.Op, err)
				ok = false
			}
		}
	}
	if !found {
		t.Errorf("%s has no backendtest conformance case to round-trip", op)
	}
	return ok && found
}

// sameOutputs runs g on the CPU backend and compares with the case's expected outputs.
func sameOutputs(g *graph.Graph, inputs map[string]*tensor.Tensor, c backendtest.Case) error {
	be, ok := backends.Lookup("cpu")
	if !ok {
		return fmt.Errorf("cpu backend not registered")
	}
	p, err := be.Compile(g, backends.Options{})
	if err != nil {
		return err
	}
	defer p.Close()
	got, err := p.Run(context.Background(), inputs)
	if err != nil {
		return err
	}
	for i, want := range c.Want {
		if want == nil {
			continue
		}
		if err := backendtest.Compare(got[fmt.Sprintf("y%d", i)], want, backendtest.Tolerance); err != nil {
			return fmt.Errorf("output %d: %w", i, err)
		}
	}
	return nil
}

// TestOpTableCoverage walks graph's op table and fails for every op that the CPU backend,
// the CUDA backend, the ONNX exporter or the importer lacks without listing it in its
// explicit gaps (cpu.UnsupportedOps, cuda.UnsupportedOps, onnx.UnsupportedOps), and for
// every op without a conformance case.
func TestOpTableCoverage(t *testing.T) {
	table := tableOps()
	if len(table) == 0 || len(table) != graph.KnownOps() {
		t.Fatalf("graph.Ops() lists %d ops, graph.KnownOps() says %d", len(table), graph.KnownOps())
	}
	t.Run("conformance", func(t *testing.T) {
		var ops []string
		for _, c := range backendtest.Cases() {
			ops = append(ops, c.Op)
		}
		for _, p := range uncovered(table, set(ops), ops, nil) {
			t.Errorf("backendtest.Cases: %s", p)
		}
	})
	t.Run("cpu", func(t *testing.T) {
		for _, p := range uncovered(table, set(cpu.SupportedOps()), cpu.SupportedOps(), cpu.UnsupportedOps()) {
			t.Errorf("CPU backend: %s", p)
		}
	})
	t.Run("cuda", func(t *testing.T) {
		ops := cuda.SupportedOps()
		if ops == nil {
			t.Skip("built without cgo: the CUDA backend links no kernels")
		}
		for _, p := range uncovered(table, set(ops), append(ops, cuda.HostOps()...), cuda.UnsupportedOps()) {
			t.Errorf("CUDA backend: %s", p)
		}
	})
	t.Run("onnx", func(t *testing.T) {
		gaps := onnx.UnsupportedOps()
		has := func(op string) bool {
			if _, gap := gaps[op]; gap {
				return false
			}
			return roundTrips(t, op)
		}
		for _, p := range uncovered(table, has, nil, gaps) {
			t.Errorf("ONNX export/import: %s", p)
		}
	})
}

// TestOpTableCoverageCatchesAGap checks the check itself: a backend that loses one op, or
// lists a gap it does not have, is reported.
func TestOpTableCoverageCatchesAGap(t *testing.T) {
	table := tableOps()
	ops := cpu.SupportedOps()
	lost := ops[len(ops)/2]
	without := slices.DeleteFunc(slices.Clone(ops), func(op string) bool { return op == lost })
	if got := uncovered(table, set(without), without, nil); len(got) != 1 || !strings.HasPrefix(got[0], lost+" is missing") {
		t.Errorf("a backend without %s: problems %q, want that one op reported", lost, got)
	}
	if got := uncovered(table, set(without), without, map[string]string{lost: "not yet"}); len(got) != 0 {
		t.Errorf("a listed gap %s: problems %q, want none", lost, got)
	}
	if got := uncovered(table, set(ops), ops, map[string]string{lost: "stale"}); len(got) != 1 {
		t.Errorf("a stale gap %s: problems %q, want one", lost, got)
	}
	if got := uncovered(table, set(ops), append(ops, "NoSuchOp"), map[string]string{"Bogus": ""}); len(got) != 3 {
		t.Errorf("unknown names: problems %q, want three (NoSuchOp; Bogus unknown and without a reason)", got)
	}
}
