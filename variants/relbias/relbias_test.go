package relbias_test

import (
	"context"

	"strings"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/relbias"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 3, "d_ff": 128}

func build(t *testing.T, over map[string]any, seed uint64) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, relbias.New(), seed, over)
}

// The bucket table the research notes verified against HF T5 (32 buckets, max distance 128).
func TestBucketsMatchT5Table(t *testing.T) {
	want := map[int]int{0: 0, -1: 1, -7: 7, -8: 8, -11: 8, -12: 9, -15: 9, -16: 10, -22: 10, -23: 11, -31: 11,
		-32: 12, -45: 12, -46: 13, -63: 13, -64: 14, -90: 14, -91: 15, -128: 15, -5000: 15,
		1: 17, 7: 23, 8: 24, 11: 24, 12: 25, 16: 26, 23: 27, 32: 28, 46: 29, 64: 30, 90: 30, 91: 31, 128: 31, 5000: 31}
	for rel, b := range want {
		if got := relbias.Bucket(rel, 32, 128); got != b {
			t.Errorf("bucket(%d) = %d, want %d", rel, got, b)
		}
	}
}

// zoo's lookup table, clamped at ±max_distance, equals HF's _relative_position_bucket for every
// j − i in [−600, 600], as computed by torch in each fixture.
func TestBucketTableMatchesHF(t *testing.T) {
	for _, name := range []string{"tiny", "tiny_long"} {
		f := loadFixture(t, name)
		cfg, _ := f.config(t)
		nb, D := cfg.Int("num_buckets"), cfg.Int("max_distance")
		table := relbias.BucketTable(nb, D)
		hf := f.get(t, "buckets_hf")
		for i, want := range hf.I64 {
			rel := i - 600
			c := min(max(rel, -D), D)
			if got := table[c+D]; got != want {
				t.Errorf("%s: bucket(%d) = %d, HF says %d", name, rel, got, want)
			}
		}
	}
}

// Only layer 0 owns the bias table (num_buckets, heads); no absolute positions by default.
func TestParameters(t *testing.T) {
	inits := build(t, tiny, 1).InitializerMap()
	if x := inits[relbias.EmbeddingName]; x == nil || !tensor.SameShape(x.Shape, []int{32, 4}) {
		t.Fatalf("%s: %v, want shape (32, 4)", relbias.EmbeddingName, x)
	}
	for name := range inits {
		if strings.Contains(name, "relative_attention_bias") && name != relbias.EmbeddingName {
			t.Errorf("unexpected %s: only layer 0 owns the bias", name)
		}
	}
	if _, ok := inits["pos_encoding.pe"]; ok {
		t.Error("pos_encoding=none still has pos_encoding.pe")
	}
	if _, ok := build(t, paritytest.With(tiny, "pos_encoding", "sinusoidal", "max_len", 64), 1).InitializerMap()["pos_encoding.pe"]; !ok {
		t.Error("pos_encoding=sinusoidal has no pos_encoding.pe")
	}
	t5 := build(t, paritytest.With(tiny, "attn_bias", false, "norm_first", true), 1).InitializerMap()
	if _, ok := t5["layers.0.self_attn.W_Q.bias"]; ok {
		t.Error("attn_bias=false still has W_Q.bias")
	}
	if _, ok := t5["norm.weight"]; !ok {
		t.Error("norm_first=true has no final norm")
	}
}

func TestBadHyperparameters(t *testing.T) {
	cases := []struct {
		over map[string]any
		want string
	}{
		{paritytest.With(tiny, "num_buckets", "31"), "num_buckets=31 must be even and at least 4"},
		{paritytest.With(tiny, "num_buckets", "2"), "must be at least 4"},
		{paritytest.With(tiny, "max_distance", "0"), "must be at least 1"},
		{paritytest.With(tiny, "pos_encoding", "rotary"), "want one of none, sinusoidal"},
	}
	for _, c := range cases {
		cfg, err := variant.Resolve(relbias.New().Describe(), c.over)
		if err == nil {
			_, err = relbias.New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.over, err, c.want)
		}
	}
}

func TestSameSeedSameWeights(t *testing.T) {
	a, b, c := build(t, tiny, 7).InitializerMap(), build(t, tiny, 7).InitializerMap(), build(t, tiny, 8).InitializerMap()
	differ := 0
	for name, ta := range a {
		if !tensor.Equal(ta, b[name]) {
			t.Errorf("%s differs between two builds with seed 7", name)
		}
		if !tensor.Equal(ta, c[name]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("seeds 7 and 8 give identical weights")
	}
}
