package paritycheck

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func TestFlags(t *testing.T) {
	for _, c := range []struct {
		f   Flags
		err string
	}{
		{Flags{Atol: 1e-4, Rtol: 1e-4, Window: 64}, ""},
		{Flags{Atol: -1, Window: 64}, "--atol and --rtol must be finite and >= 0 (got -1, 0)"},
		{Flags{Window: 32, WindowSet: true}, "--window applies with --input"},
		{Flags{Window: 0, WindowSet: true, Input: "t.txt"}, "--window must be at least 1"},
	} {
		err := c.f.Check()
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: error %v, want %q", c.f, err, c.err)
		}
	}
	if w := (Flags{Window: 64}).TextWindow(); w != 0 {
		t.Errorf("default window: %d, want 0", w)
	}
	if w := (Flags{Window: 32, WindowSet: true}).TextWindow(); w != 32 {
		t.Errorf("--window 32: %d", w)
	}
	set := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	if err := CheckFileFlags("m.onnx", set("set")); err == nil || !strings.Contains(err.Error(), "--set does not apply to m.onnx") {
		t.Errorf("--set on a file: %v", err)
	}
	if err := CheckPrecisionFlags("bf16", set("layers")); err == nil || !strings.Contains(err.Error(), "drop --layers") {
		t.Errorf("--layers with bf16: %v", err)
	}
	if err := CheckPrecisionFlags("fp32", set("atol", "layers")); err != nil {
		t.Errorf("fp32: %v", err)
	}
}

func TestLayerValuesAndOutputs(t *testing.T) {
	g := &graph.Graph{Meta: map[string]string{nn.LayerOutputMeta + "10": "h10", nn.LayerOutputMeta + "2": "h2"},
		Nodes:   []*graph.Node{{Name: "ln", Op: "LayerNormalization", Outputs: []string{"y"}}},
		Outputs: []graph.ValueInfo{{Name: "pooled"}, {Name: "last_hidden_state"}}}
	if got := LayerValues(g); !slices.Equal(got, []LayerValue{{"layers.2", "h2"}, {"layers.10", "h10"}}) {
		t.Errorf("recorded layers: %v", got)
	}
	g.Meta = nil
	if got := LayerValues(g); !slices.Equal(got, []LayerValue{{"ln", "y"}}) {
		t.Errorf("LayerNormalization outputs: %v", got)
	}
	if out, err := HiddenOutput(g, []string{"hidden", "last_hidden_state"}); err != nil || out != "last_hidden_state" {
		t.Errorf("hidden output %q, %v", out, err)
	}
	if _, err := HiddenOutput(g, []string{"hidden"}); err == nil || !strings.Contains(err.Error(), "outputs: pooled, last_hidden_state") {
		t.Errorf("no hidden output: %v", err)
	}
	valid := []bool{true, false, true, true}
	x := &tensor.Tensor{Shape: []int{2, 2, 8}}
	if v := ValidFor(x, valid); len(v) != 4 {
		t.Errorf("(2, 2, 8): %v", v)
	}
	if v := ValidFor(&tensor.Tensor{Shape: []int{2, 8}}, valid); v != nil {
		t.Errorf("(2, 8): %v", v)
	}
}

func TestSyntheticInputs(t *testing.T) {
	g := &graph.Graph{Inputs: []graph.ValueInfo{
		{Name: "ids", DType: tensor.Int64, Shape: graph.Shape{graph.Sym("b"), graph.Sym("n")}},
		{Name: "pad", DType: tensor.Bool, Shape: graph.Shape{graph.Sym("b"), graph.Sym("n")}},
		{Name: "x", DType: tensor.Float32, Shape: graph.Shape{graph.Sym("b"), graph.Fixed(3)}},
	}}
	a, valid, err := SyntheticInputs(g, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := SyntheticInputs(g, 7)
	if !slices.Equal(a["x"].F32, b["x"].F32) || !slices.Equal(a["ids"].I64, b["ids"].I64) {
		t.Error("the same seed gave different inputs")
	}
	if !slices.Equal(a["ids"].Shape, []int{2, 37}) || !slices.Equal(a["x"].Shape, []int{2, 3}) || len(valid) != 74 {
		t.Fatalf("shapes %v, %v; %d valid", a["ids"].Shape, a["x"].Shape, len(valid))
	}
	for i, ok := range valid {
		if want := i < 37+29; ok != want {
			t.Fatalf("position %d valid %v, want %v (the last 8 of row 2 padded)", i, ok, want)
		}
		if !ok && a["ids"].I64[i] != 0 {
			t.Fatalf("padded position %d holds id %d", i, a["ids"].I64[i])
		}
	}
	if _, _, err := SyntheticInputs(&graph.Graph{Inputs: []graph.ValueInfo{{Name: "u", DType: tensor.Float32}}}, 0); err == nil {
		t.Error("an input of unknown rank: no error")
	}
}

func TestSampleBatchAndCutRows(t *testing.T) {
	b := SampleBatch([]byte("abcdefgh"), 3, 2)
	if b.B != 2 || b.N != 3 || !slices.Equal(b.Lengths, []int{3, 2}) || !slices.Equal(b.Offsets, []int64{0, 3}) ||
		!slices.Equal(b.Row(1), tokenize.Encode([]byte("de"))) || !b.Mask[5] {
		t.Errorf("batch %+v", b)
	}
	full := &tokenize.Batch{B: 2, N: 5, Tokens: []int64{1, 10, 11, 12, 2, 1, 20, 21, 22, 2}, Lengths: []int{5, 5}}
	cut := CutRows(full, []int{5, 3}, []int64{2}, 0)
	if !slices.Equal(cut.Tokens, []int64{1, 10, 11, 12, 2, 1, 20, 2, 0, 0}) || !slices.Equal(cut.Lengths, []int{5, 3}) || !cut.Mask[8] || cut.Mask[7] {
		t.Errorf("cut %+v", cut)
	}
}

func TestRenderLayers(t *testing.T) {
	var b bytes.Buffer
	layers := []parity.Result{{Name: "layers.0", Pass: true}, {Name: "layers.1"}}
	if err := RenderLayers(&b, layers, nil, parity.RenderOptions{Got: "zoo", Want: "ort"}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "Per-layer comparison (2 values)") || !strings.Contains(out, "first divergent layer: layers.1") {
		t.Errorf("table:\n%s", out)
	}
}

// TestPrintPrecisionPath checks the report's first line names the int8 path, with its
// weights' bits where they are not 8, and the bf16 path for bf16.
func TestPrintPrecisionPath(t *testing.T) {
	for _, tc := range []struct {
		r    PrecisionReport
		want string
	}{
		{PrecisionReport{Precision: "int8", Int8Path: "avx2", Int8WeightBits: 7}, "int8 path avx2, 7-bit weights)"},
		{PrecisionReport{Precision: "int8-attention", Int8Path: "vnni512", Int8WeightBits: 8}, "int8 path vnni512)"},
		{PrecisionReport{Precision: "bf16", BF16Path: "avx512-bf16"}, "bf16 path avx512-bf16)"},
	} {
		var b strings.Builder
		PrintPrecision(&b, tc.r)
		if line, _, _ := strings.Cut(b.String(), "\n"); !strings.HasSuffix(line, tc.want) {
			t.Errorf("%s: first line %q, want it to end %q", tc.r.Precision, line, tc.want)
		}
	}
}
