package cpu_test

import (
	"context"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// TestRunProfiled checks the profiling hook on the vanilla encoder, fused and unfused: the
// outputs are Run's, the steps lie in order inside the measured total without overlapping,
// every graph node that runs is covered by exactly one step (folded ones by none), fused
// steps say so and cover more than their own node, and unfused steps are the graph's
// nodes themselves.
func TestRunProfiled(t *testing.T) {
	g := vanillaBase(t, map[string]any{"layers": int64(2), "d_model": int64(32), "heads": int64(2), "d_ff": int64(64)})
	fused, plain := compileBoth(t, g, backends.Options{Threads: 1})
	in := encoderInputs(2, 9)
	for _, tc := range []struct {
		name string
		p    backends.Program
	}{{"fused", fused}, {"unfused", plain}} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.p.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, prof, err := tc.p.(backends.Profiler).RunProfiled(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range want {
				if d, _ := maxDiff(got[name], w); d != 0 {
					t.Errorf("output %s differs from Run's by %g", name, d)
				}
			}
			inGraph := map[*graph.Node]bool{}
			for _, n := range g.Nodes {
				inGraph[n] = true
			}
			seen := map[*graph.Node]bool{}
			nfused := 0
			var end, sum int64
			for i, st := range prof.Steps {
				if int64(st.Start) < end || st.Duration < 0 {
					t.Fatalf("step %d (%s %q) starts at %v, before the previous step ended (%v), or has a negative duration", i, st.Op, st.Name, st.Start, end)
				}
				end = int64(st.Start + st.Duration)
				sum += int64(st.Duration)
				if st.Fused {
					nfused++
					if len(st.Nodes) < 2 {
						t.Errorf("fused step %d (%s) covers %d nodes", i, st.Op, len(st.Nodes))
					}
				} else if len(st.Nodes) != 1 || st.Nodes[0].Op != st.Op || st.Nodes[0].Name != st.Name {
					t.Errorf("step %d (%s %q) covers %v", i, st.Op, st.Name, st.Nodes)
				}
				if st.IOBytes <= 0 && st.Op != "Shape" {
					t.Errorf("step %d (%s %q) moved %d bytes", i, st.Op, st.Name, st.IOBytes)
				}
				for _, n := range st.Nodes {
					if !inGraph[n] {
						t.Errorf("step %d (%s) covers node %q (%s), which is not one of the graph's", i, st.Op, n.Name, n.Op)
					}
					if seen[n] {
						t.Errorf("node %q (%s) covered twice", n.Name, n.Op)
					}
					seen[n] = true
				}
			}
			if end > int64(prof.Total) || sum > int64(prof.Total) {
				t.Errorf("steps end at %v (sum %v), after the measured total %v", end, sum, prof.Total)
			}
			if (nfused > 0) != (tc.name == "fused") {
				t.Errorf("%d fused steps", nfused)
			}
			// Every node not covered must be one that folding removed: all its inputs constant.
			runs := map[string]bool{}
			for _, in := range g.Inputs {
				runs[in.Name] = true
			}
			for _, n := range g.Nodes {
				dyn := false
				for _, x := range n.Inputs {
					dyn = dyn || runs[x]
				}
				if dyn {
					for _, o := range n.Outputs {
						runs[o] = true
					}
					if !seen[n] {
						t.Errorf("node %q (%s) reads run-time values but no step covers it", n.Name, n.Op)
					}
				}
			}
		})
	}
}
