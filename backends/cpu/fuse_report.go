package cpu

import (
	"fmt"
	"sort"
	"strings"
)

// FusionNote is one place the fusion passes looked at: an attention candidate (a Softmax
// step), a linear candidate (a MatMul or Gemm step) or a kernelized-attention candidate (an
// Exp of a shifted product, an Elu, or a MatMul by Bᵀ·V) with what became of it.
type FusionNote struct {
	// Pattern is "attention", "attention-train" (a training step's attention, whose
	// probabilities the backward pass reads), "linear", "random-features", "elu-feature" or
	// "linear-attention".
	Pattern string
	// Node and Op name the candidate's anchor step in the graph.
	Node, Op string
	// Fused is the kind it was fused as (a key of Program.Fusions), or "" when it was not.
	Fused string
	// Why says what stopped the match when Fused is "".
	Why string
}

// Report is what the compiler made of a graph: the steps the program runs, in order, under
// their kernel names (fused steps are "FusedAttention", "FusedLinear", ...; others keep
// their op), the fusion counts of Program.Fusions, and a note per fusion candidate.
type Report struct {
	Steps   []string
	Fusions map[string]int
	Notes   []FusionNote
}

// Report returns the compile report of p; a program compiled with NoFusion has no fusions
// and no notes.
func (p *Program) Report() Report {
	r := Report{Steps: p.Kernels(), Fusions: p.Fusions(), Notes: append([]FusionNote(nil), p.notes...)}
	return r
}

// Kernels returns the op each step of the program runs, in run order: "FusedAttention" and
// "FusedLinear" (and the other Fused* names) for fused steps, the graph op for the rest.
func (p *Program) Kernels() []string {
	out := make([]string, len(p.plan.Steps))
	for i, st := range p.plan.Steps {
		out[i] = st.Node.Op
	}
	return out
}

// CompileReport returns Report as text (backends.CompileReporter): the step count by
// kernel, the fusions, and one line per candidate that did not fuse, with the reason.
func (p *Program) CompileReport() string { return p.Report().String() }

// String formats the report as lines ending in newlines.
func (r Report) String() string {
	var b strings.Builder
	counts := map[string]int{}
	for _, s := range r.Steps {
		counts[s]++
	}
	fmt.Fprintf(&b, "cpu: %d steps: %s\n", len(r.Steps), countList(counts))
	if len(r.Fusions) == 0 {
		b.WriteString("cpu: fusions: none\n")
	} else {
		fmt.Fprintf(&b, "cpu: fusions: %s\n", countList(r.Fusions))
	}
	for _, n := range r.Notes {
		if n.Fused == "" {
			fmt.Fprintf(&b, "cpu: not fused: %s at %s %q: %s\n", n.Pattern, n.Op, n.Node, n.Why)
		}
	}
	return b.String()
}

// countList writes counts as "a 3, b 2, c 1", largest first, then by name.
func countList(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}
