package graph

import (
	"sort"
	"testing"
)

// The op table is complete: every definition has a schema, an opset range, an inference
// rule, a reference evaluation, a cost rule and a gradient rule, and the registry views agree
// with it.
func TestOpTableComplete(t *testing.T) {
	if len(duplicateOps) > 0 {
		t.Errorf("ops registered twice: %v", duplicateOps)
	}
	ops := Ops()
	if len(ops) == 0 || len(ops) != KnownOps() {
		t.Fatalf("Ops() has %d entries, KnownOps() = %d", len(ops), KnownOps())
	}
	if !sort.SliceIsSorted(ops, func(i, j int) bool { return ops[i].Key() < ops[j].Key() }) {
		t.Error("Ops() is not sorted by name")
	}
	for _, d := range ops {
		t.Run(d.Key(), func(t *testing.T) {
			if got, ok := LookupOp(d.Key()); !ok || got != d {
				t.Errorf("LookupOp(%q) does not return the table's definition", d.Key())
			}
			if d.Domain != "" && d.Domain != MicrosoftDomain {
				t.Errorf("domain %q: only ai.onnx and %s are implemented", d.Domain, MicrosoftDomain)
			}
			if d.Doc == "" {
				t.Error("no Doc")
			}
			if d.SinceVersion < 1 || d.ThroughVersion < d.SinceVersion || d.ThroughVersion > LatestOpset {
				t.Errorf("opset range [%d, %d] is not within [1, %d]", d.SinceVersion, d.ThroughVersion, LatestOpset)
			}
			if d.SinceVersion > DefaultOpset && !newerThanIR[d.Name] {
				t.Errorf("since opset %d, after the IR's DefaultOpset %d", d.SinceVersion, DefaultOpset)
			}
			if d.infer == nil || d.Eval == nil || d.Cost == nil {
				t.Errorf("missing rule: infer %v, Eval %v, Cost %v", d.infer != nil, d.Eval != nil, d.Cost != nil)
			}
			if d.Grad == nil {
				t.Error("no gradient rule: set Grad (NoGrad when the op is not differentiable) and add a finite-difference case to zoo/autodiff")
			}
			if len(d.Outputs) == 0 {
				t.Error("no outputs declared")
			}
			for _, list := range [][]ParamDef{d.Inputs, d.Outputs} {
				seen := map[string]bool{}
				for i, p := range list {
					if p.Name == "" || seen[p.Name] {
						t.Errorf("parameter %d has an empty or repeated name %q", i, p.Name)
					}
					seen[p.Name] = true
					if p.Variadic && i != len(list)-1 {
						t.Errorf("variadic parameter %q is not last", p.Name)
					}
					// ONNX Runtime's contrib schemas have optional inputs between required
					// ones (EmbedLayerNormalization's segment_ids), given as empty names.
					if i > 0 && list[i-1].Optional && !p.Optional && !p.Variadic && d.Domain == "" {
						t.Errorf("required parameter %q follows an optional one", p.Name)
					}
				}
			}
			if d.MinIn > d.MaxIn && d.MaxIn >= 0 || d.MinOut < 1 || (d.MaxOut >= 0 && d.MinOut > d.MaxOut) {
				t.Errorf("arity %+v is inconsistent", d.OpSpec)
			}
			seen := map[string]bool{}
			for _, a := range d.Attrs {
				if a.Name == "" || seen[a.Name] {
					t.Errorf("attribute with an empty or repeated name %q", a.Name)
				}
				seen[a.Name] = true
				if a.Kind < AttrInt || a.Kind > AttrTensor {
					t.Errorf("attribute %q has kind %v", a.Name, a.Kind)
				}
				if a.Default.Kind != 0 && (a.Default.Kind != a.Kind || a.Required) {
					t.Errorf("attribute %q: default of kind %v for a %v attribute (required %v)", a.Name, a.Default.Kind, a.Kind, a.Required)
				}
			}
		})
	}
}

// The arity derived from the schema matches what the IR accepted before the table existed.
func TestOpTableArity(t *testing.T) {
	want := map[string]OpSpec{
		"Concat": {1, -1, 1, 1}, "Constant": {0, 0, 1, 1}, "Gemm": {2, 3, 1, 1}, "LayerNormalization": {2, 3, 1, 3},
		"Max": {1, -1, 1, 1}, "ReduceMean": {1, 2, 1, 1}, "Slice": {3, 5, 1, 1}, "Split": {1, 2, 1, -1},
		"Squeeze": {1, 2, 1, 1}, "Unsqueeze": {2, 2, 1, 1}, "Where": {3, 3, 1, 1}, "Relu": {1, 1, 1, 1},
	}
	for op, w := range want {
		d, ok := LookupOp(op)
		if !ok {
			t.Errorf("%s is not in the table", op)
			continue
		}
		if d.OpSpec != w {
			t.Errorf("%s: arity %+v, want %+v", op, d.OpSpec, w)
		}
	}
}

// newerThanIR lists the ops from opsets after DefaultOpset that the IR holds all the same (the
// exporter writes them out as basic ops below their SinceVersion).
var newerThanIR = map[string]bool{"Gelu": true, "RMSNormalization": true, "RotaryEmbedding": true, "Attention": true}
