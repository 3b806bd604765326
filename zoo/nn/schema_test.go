package nn

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func resolve(t *testing.T, params []variant.Param, set map[string]any) variant.Config {
	t.Helper()
	cfg, err := variant.Resolve(variant.Description{Name: "v", Params: params}, set)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestEncoderConfigFrom(t *testing.T) {
	withoutMaxLen := slices.DeleteFunc(EncoderParams(), func(p variant.Param) bool { return p.Name == "max_len" })
	for _, tc := range []struct {
		name    string
		params  []variant.Param
		set     map[string]any
		want    EncoderConfig
		wantErr string
	}{
		{name: "seed defaults", params: EncoderParams(),
			want: EncoderConfig{Vocab: 257, DModel: 512, Layers: 6, DFF: 2048, MaxLen: 5000, PosEncoding: "sinusoidal", Activation: "relu", LNEps: 1e-5, Dropout: 0.1}},
		{name: "pre-LN gelu", params: EncoderParams(), set: map[string]any{"norm_first": true, "activation": "gelu", "max_len": 64},
			want: EncoderConfig{Vocab: 257, DModel: 512, Layers: 6, DFF: 2048, MaxLen: 64, PosEncoding: "sinusoidal", NormFirst: true, Activation: "gelu", LNEps: 1e-5, Dropout: 0.1}},
		{name: "no max_len: no positions", params: withoutMaxLen,
			want: EncoderConfig{Vocab: 257, DModel: 512, Layers: 6, DFF: 2048, PosEncoding: "none", Activation: "relu", LNEps: 1e-5, Dropout: 0.1}},
		{name: "causal, no dropout", params: append(EncoderParams(), CausalParam()), set: map[string]any{"causal": true, "dropout": 0},
			want: EncoderConfig{Vocab: 257, DModel: 512, Layers: 6, DFF: 2048, MaxLen: 5000, PosEncoding: "sinusoidal", Activation: "relu", LNEps: 1e-5, Causal: true}},
		{name: "dropout 1", params: EncoderParams(), set: map[string]any{"dropout": 1}, wantErr: "dropout must be at least 0 and below 1"},
		{name: "heads not dividing", params: EncoderParams(), set: map[string]any{"heads": 5}, wantErr: "heads=5 must divide d_model=512"},
		{name: "ln_eps zero", params: EncoderParams(), set: map[string]any{"ln_eps": 0}, wantErr: "ln_eps must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncoderConfigFrom(resolve(t, tc.params, tc.set))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

func TestAttentionParams(t *testing.T) {
	params := append(EncoderParams(), AttentionParams()...)
	if got := AttentionOptionsFrom(resolve(t, params, nil)); got != (AttentionOptions{Bias: true, Scale: 0}) {
		t.Errorf("defaults %+v, want biased, scale 0 (divide by √d_k)", got)
	}
	if got := AttentionOptionsFrom(resolve(t, params, map[string]any{"attn_bias": "false", "scale": "1"})); got != (AttentionOptions{Scale: 1}) {
		t.Errorf("attn_bias=false scale=1: %+v", got)
	}
	if _, err := variant.Resolve(variant.Description{Name: "v", Params: params}, map[string]any{"scale": false}); err == nil {
		t.Error("scale=false (the old bool) is accepted")
	}
}

// TestScaleScores checks the ops each scale gives: 0 divides by √dk, 1 adds nothing, any other
// value multiplies by it; the bias comes after the scaling.
func TestScaleScores(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		ops   []string
		c     float32 // the constant of the Div or Mul
	}{
		{0, []string{"Transpose", "MatMul", "Div", "Add", "Identity"}, 4}, // √16; Identity names the output
		{1, []string{"Transpose", "MatMul", "Add", "Identity"}, 0},
		{0.125, []string{"Transpose", "MatMul", "Mul", "Add", "Identity"}, 0.125},
	} {
		c := NewCtx(context.Background(), "t", 1)
		q := c.B.Input("q", tensor.Float32, graph.Fixed(1), graph.Fixed(2), graph.Fixed(3), graph.Fixed(16))
		bias := c.B.Input("bias", tensor.Float32, graph.Fixed(1), graph.Fixed(1), graph.Fixed(1), graph.Fixed(3))
		c.B.Output("s", c.AttentionScores(q, q, bias, 4, 16, tc.scale), tensor.Float32, graph.Fixed(1), graph.Fixed(2), graph.Fixed(3), graph.Fixed(3))
		g, err := c.B.Build()
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, n := range g.Nodes {
			ops = append(ops, n.Op)
			if n.Op == "Div" || n.Op == "Mul" {
				if k := g.Initializer(n.Inputs[1]); k == nil || k.F32[0] != tc.c {
					t.Errorf("scale %v: %s by %v, want %v", tc.scale, n.Op, k, tc.c)
				}
			}
		}
		if !reflect.DeepEqual(ops, tc.ops) {
			t.Errorf("scale %v: ops %v, want %v", tc.scale, ops, tc.ops)
		}
	}
}

func TestSetBuildMeta(t *testing.T) {
	c := NewCtx(context.Background(), "v", 42)
	cfg := resolve(t, EncoderParams(), map[string]any{"layers": 1})
	c.SetBuildMeta("v", "1.2.3", cfg)
	e, err := EncoderConfigFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Encoder(e, MultiHeadAttention(e.DModel, cfg.Int("heads")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{MetaVariant: "v", MetaVariantVersion: "1.2.3", MetaConfig: cfg.JSON(), MetaSeed: "42"}
	for k, w := range want {
		if g.Meta[k] != w {
			t.Errorf("meta %s = %q, want %q", k, g.Meta[k], w)
		}
	}
}
