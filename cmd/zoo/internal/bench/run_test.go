package bench

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestParse(t *testing.T) {
	ok := Flags{Seq: "128,512", Batch: "1", Reps: 5, Warmup: 1, Format: "table"}
	with := func(f func(*Flags)) Flags { g := ok; f(&g); return g }
	for _, c := range []struct {
		name string
		f    Flags
		want Options
		err  string
	}{
		{"defaults", ok, Options{Seqs: []int{128, 512}, Batches: []int{1}, Reps: 5, Warmup: 1, Format: Table}, ""},
		{"json", with(func(f *Flags) { f.JSON = true }), Options{Seqs: []int{128, 512}, Batches: []int{1}, Reps: 5, Warmup: 1, Format: JSON}, ""},
		{"ort", with(func(f *Flags) { f.Against = " ORT " }), Options{Seqs: []int{128, 512}, Batches: []int{1}, Reps: 5, Warmup: 1, Format: Table, Against: "onnxruntime"}, ""},
		{"bad seq", with(func(f *Flags) { f.Seq = "0" }), Options{}, `--seq "0"`},
		{"bad batch", with(func(f *Flags) { f.Batch = "x" }), Options{}, `--batch "x"`},
		{"no reps", with(func(f *Flags) { f.Reps = 0 }), Options{}, "--reps must be at least 1, got 0"},
		{"negative threads", with(func(f *Flags) { f.Threads = -1 }), Options{}, "--warmup and --threads must not be negative (got 1, -1)"},
		{"bad format", with(func(f *Flags) { f.Format = "xml" }), Options{}, `unknown --format "xml"`},
		{"json and csv", with(func(f *Flags) { f.Format, f.FormatSet, f.JSON = "csv", true, true }), Options{}, "--json and --format csv disagree"},
		{"bad runtime", with(func(f *Flags) { f.Against = "tvm" }), Options{}, `unknown --against "tvm"`},
		{"plot not png", with(func(f *Flags) { f.Plot = "p.svg" }), Options{}, "--plot p.svg: want a .png file"},
	} {
		got, err := Parse(c.f)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got.Seqs, c.want.Seqs) || !slices.Equal(got.Batches, c.want.Batches) ||
			got.Format != c.want.Format || got.Against != c.want.Against || got.Reps != c.want.Reps {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestBackends(t *testing.T) {
	all := func(backends.Choice) error { return nil }
	got, err := Backends("cpu,cpu", all)
	if err != nil || len(got) != 1 || got[0].Backend.Name() != "cpu" {
		t.Errorf("cpu twice: %v, %v", got, err)
	}
	if _, err := Backends("nosuch", all); err == nil {
		t.Error("an unknown backend: no error")
	}
	refused := errors.New("refused")
	if _, err := Backends("cpu", func(backends.Choice) error { return refused }); err != refused {
		t.Errorf("check's error: %v", err)
	}
}

func TestCheckLengths(t *testing.T) {
	short := Model{Name: "short", MaxLen: 128}
	for _, c := range []struct {
		models []Model
		seqSet bool
		err    string
	}{
		{[]Model{short}, true, "--seq 512 is longer than short's maximum length 128"},
		{[]Model{short}, false, ""},
		{[]Model{short, {Name: "free"}}, true, ""},
		{[]Model{{Name: "free"}}, true, ""},
	} {
		p := &Plan{Options: Options{Seqs: []int{128, 512}}, Models: c.models, SeqSet: c.seqSet}
		err := p.CheckLengths()
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%d models, --seq set %v: error %v, want %q", len(c.models), c.seqSet, err, c.err)
		}
	}
	if !short.Fits(128) || short.Fits(129) || !(Model{}).Fits(1<<20) {
		t.Error("Fits")
	}
}

// TestInputs: every input is fed by its role, as zoo run feeds it: a variant's tokens and
// bool padding mask, and a Hugging Face file's ids, int64 attention mask and token types
// (bench refused those: only ids and a bool mask were fed).
func TestInputs(t *testing.T) {
	in := func(name string, dt tensor.DType) graph.ValueInfo {
		return graph.ValueInfo{Name: name, DType: dt, Shape: graph.Shape{graph.Sym("B"), graph.Sym("n")}}
	}
	for _, c := range []struct {
		name   string
		inputs []graph.ValueInfo
		check  func(map[string]*tensor.Tensor) bool
	}{
		{"variant", []graph.ValueInfo{in("tokens", tensor.Int64), in("key_padding_mask", tensor.Bool)}, func(f map[string]*tensor.Tensor) bool {
			return len(f) == 2 && slices.Equal(f["tokens"].Shape, []int{2, 3}) && f["tokens"].I64[0] != 0 && !slices.Contains(f["key_padding_mask"].Bool, true)
		}},
		{"ids only", []graph.ValueInfo{in("ids", tensor.Int64)}, func(f map[string]*tensor.Tensor) bool {
			return len(f) == 1 && f["ids"].I64[0] != 0
		}},
		{"hugging face", []graph.ValueInfo{in("input_ids", tensor.Int64), in("attention_mask", tensor.Int64), in("token_type_ids", tensor.Int64)}, func(f map[string]*tensor.Tensor) bool {
			return len(f) == 3 && !slices.Contains(f["attention_mask"].I64, 0) && !slices.ContainsFunc(f["token_type_ids"].I64, func(v int64) bool { return v != 0 })
		}},
	} {
		plan, err := zooroot.PlanFeeds(&graph.Graph{Name: c.name, Inputs: c.inputs}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		feed, err := Inputs(Model{Feeds: plan}, 2, 3)
		if err != nil || !c.check(feed) {
			t.Errorf("%s: feed %v, %v", c.name, feed, err)
		}
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	off := NewProgress(&b, "bench", false)
	off.Say("x %d", 1)
	off.Done()
	if b.Len() != 0 {
		t.Errorf("an inactive status line wrote %q", b.String())
	}
	on := NewProgress(&b, "bench", true)
	on.Say("x %d", 1)
	on.Done()
	on.Say("after")
	if got := b.String(); got != "\r\033[Kbench: x 1\r\033[K" {
		t.Errorf("status line wrote %q", got)
	}
	if err := WritePlot("p.png", &Doc{}); err == nil || !strings.Contains(err.Error(), "nothing to plot") {
		t.Errorf("an empty plot: %v", err)
	}
}
