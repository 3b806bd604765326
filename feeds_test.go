package zoo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// minilm is a real tokenizer.json (all-MiniLM-L6-v2's WordPiece), shipped with the tokenizers' tests.
const minilm = "zoo/tokenize/testdata/minilm.tokenizer.json"

// TestPlanFeeds checks the role guess and the tensors each role gets, padded to static shapes.
func TestPlanFeeds(t *testing.T) {
	in := func(name string, dt tensor.DType, dims ...graph.Dim) graph.ValueInfo {
		return graph.ValueInfo{Name: name, DType: dt, Shape: dims}
	}
	b, s := graph.Sym("batch"), graph.Sym("seq")
	for _, c := range []struct {
		name      string
		inputs    []graph.ValueInfo
		overrides []string
		roles     []Role
		err       string
	}{
		{"zoo", []graph.ValueInfo{in("tokens", tensor.Int64, b, s), in("key_padding_mask", tensor.Bool, b, s)}, nil, []Role{RoleIDs, RolePadding}, ""},
		{"hf", []graph.ValueInfo{in("input_ids", tensor.Int64, b, s), in("attention_mask", tensor.Int64, b, s), in("token_type_ids", tensor.Int64, b, s)}, nil, []Role{RoleIDs, RoleMask, RoleTypes}, ""},
		{"bool mask by name", []graph.ValueInfo{in("ids", tensor.Int32, b, s), in("mask", tensor.Bool, b, s), in("position_ids", tensor.Int32, b, s)}, nil, []Role{RoleIDs, RolePadding, RolePositions}, ""},
		{"float mask", []graph.ValueInfo{in("x", tensor.Int64, b, s), in("attention_mask", tensor.Float32, b, s)}, nil, []Role{RoleIDs, RoleMask}, ""},
		{"by type", []graph.ValueInfo{in("a", tensor.Int64, b, s), in("b", tensor.Bool, b, s)}, nil, []Role{RoleIDs, RolePadding}, ""},
		{"override", []graph.ValueInfo{in("input_ids", tensor.Int64, b, s), in("attention_mask", tensor.Int64, b, s)}, []string{"attention_mask=padding"}, []Role{RoleIDs, RolePadding}, ""},
		{"float input", []graph.ValueInfo{in("src", tensor.Float32, b, s, graph.Fixed(8))}, nil, nil, "does not take text"},
		{"float ids", []graph.ValueInfo{in("src", tensor.Float32, b, s)}, []string{"src=ids"}, nil, "role ids cannot take"},
		{"no ids", []graph.ValueInfo{in("attention_mask", tensor.Int64, b, s)}, nil, nil, "no input takes token ids"},
		{"rank 3", []graph.ValueInfo{in("input_ids", tensor.Int64, b, s, graph.Fixed(2))}, nil, nil, "rank 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := PlanFeeds(&graph.Graph{Name: "m", Inputs: c.inputs}, c.overrides)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range p.Feeds {
				if f.Role != c.roles[i] {
					t.Errorf("input %s: role %s, want %s", f.Name, f.Role, c.roles[i])
				}
			}
		})
	}

	// Static (3, 4) inputs: a batch of 2 windows of lengths 3 and 1 is padded to 3 rows of 4.
	g := &graph.Graph{Name: "m", Inputs: []graph.ValueInfo{
		in("input_ids", tensor.Int32, graph.Fixed(3), graph.Fixed(4)), in("attention_mask", tensor.Float32, graph.Fixed(3), graph.Fixed(4)),
		in("pad", tensor.Bool, graph.Fixed(3), graph.Fixed(4)), in("token_type_ids", tensor.Int64, graph.Fixed(3), graph.Fixed(4)),
		in("position_ids", tensor.Int64, graph.Fixed(3), graph.Fixed(4)),
	}}
	p, err := PlanFeeds(g, []string{"pad=padding"})
	if err != nil {
		t.Fatal(err)
	}
	batch := &tokenize.Batch{B: 2, N: 3, Tokens: []int64{7, 8, 9, 5, 0, 0}, Mask: []bool{false, false, false, false, true, true}, Lengths: []int{3, 1}, Offsets: []int64{0, 3}}
	ts, err := p.Tensors(PadBatch(batch, p.Seq, 99), 99)
	if err != nil {
		t.Fatal(err)
	}
	p99 := int64(99)
	wantI := map[string][]int64{
		"input_ids":      {7, 8, 9, p99, 5, p99, p99, p99, p99, p99, p99, p99},
		"token_type_ids": make([]int64, 12),
		"position_ids":   {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3},
	}
	for name, want := range wantI {
		if !slices.Equal(ts[name].Shape, []int{3, 4}) || !slices.Equal(ts[name].I64, want) || ts[name].DType != g.Inputs[indexOf(g, name)].DType {
			t.Errorf("%s: %v %v %v, want %v", name, ts[name].DType, ts[name].Shape, ts[name].I64, want)
		}
	}
	if want := []float32{1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(ts["attention_mask"].F32, want) {
		t.Errorf("attention_mask %v, want %v", ts["attention_mask"].F32, want)
	}
	for i, v := range ts["pad"].Bool {
		if want := !(i < 3 || i == 4); v != want {
			t.Errorf("pad[%d] = %v, want %v", i, v, want)
		}
	}
	if _, err := p.Tensors(&tokenize.Batch{B: 4, N: 1, Tokens: make([]int64, 4), Mask: make([]bool, 4), Lengths: []int{1, 1, 1, 1}}, 0); err == nil {
		t.Error("a batch of 4 fed to inputs fixed at 3 rows: no error")
	}
}

func indexOf(g *graph.Graph, name string) int {
	for i, in := range g.Inputs {
		if in.Name == name {
			return i
		}
	}
	return -1
}

// TestTokenWindows cuts a pretrained tokenizer's ids into windows with [CLS] … [SEP] in each,
// batch by batch, with offsets counting text tokens; an input with no tokens is one window of
// the special tokens; an id past the embedding rows is bad input.
func TestTokenWindows(t *testing.T) {
	tok, err := tokenize.Load(minilm)
	if err != nil {
		t.Fatal(err)
	}
	tk := &Tokenizer{Tokenizer: tok, Path: minilm}
	ids := func(text string) []int64 {
		v, _, err := tok.EncodeRaw(text)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b, c, d, e := ids("a")[0], ids("b")[0], ids("c")[0], ids("d")[0], ids("e")[0]
	for _, tc := range []struct {
		text    string
		window  int
		rows    int // vocabulary rows (0: unchecked)
		batches [][][]int64
		offsets [][]int64
		err     string
	}{
		{"a b c d e", 4, 0, [][][]int64{{{101, a, b, 102}, {101, c, d, 102}}, {{101, e, 102}}}, [][]int64{{0, 2}, {4}}, ""},
		{"a b", 8, 0, [][][]int64{{{101, a, b, 102}}}, [][]int64{{0}}, ""},
		{" \n ", 8, 0, [][][]int64{{{101, 102}}}, [][]int64{{0}}, ""},
		{"a b", 2, 0, nil, nil, "leaves no room"},
		{"a b", 8, 1000, nil, nil, "has 1000 rows"},
	} {
		src, stop, err := NewWindows(context.Background(), tk, strings.NewReader(tc.text), tc.window, 2, tc.rows, "word.weight")
		var got [][][]int64
		var offs [][]int64
		for err == nil {
			var bt *tokenize.Batch
			if bt, err = src.Next(); err == nil {
				var rows [][]int64
				for i := 0; i < bt.B; i++ {
					rows = append(rows, append([]int64(nil), bt.Row(i)...))
					for j := bt.Lengths[i]; j < bt.N; j++ {
						if !bt.Mask[i*bt.N+j] || bt.Tokens[i*bt.N+j] != 0 {
							t.Errorf("%q: padded position (%d, %d) is not [PAD] with the mask set", tc.text, i, j)
						}
					}
				}
				got, offs = append(got, rows), append(offs, bt.Offsets)
			}
		}
		if stop != nil {
			stop()
		}
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.text, err, tc.err)
			}
		case err != io.EOF:
			t.Errorf("%q: %v", tc.text, err)
		case fmt.Sprint(got) != fmt.Sprint(tc.batches) || fmt.Sprint(offs) != fmt.Sprint(tc.offsets):
			t.Errorf("%q: batches %v offsets %v, want %v %v", tc.text, got, offs, tc.batches, tc.offsets)
		}
	}
}

// TestChooseTokenizer finds the tokenizer next to a model: tokenizer.json first, then vocab.txt,
// then a single SentencePiece .model; several .model files are an error; none, the byte tokenizer.
func TestChooseTokenizer(t *testing.T) {
	spm, err := os.ReadFile("zoo/tokenize/testdata/spm-unigram.model")
	if err != nil {
		t.Fatal(err)
	}
	vocab := []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
	for _, c := range []struct {
		files map[string][]byte
		kind  string // substring of Kind(), or of the error
		err   bool
	}{
		{map[string][]byte{}, "bytes", false},
		{map[string][]byte{"vocab.txt": vocab, "x.model": spm}, "WordPiece", false},
		{map[string][]byte{"x.model": spm}, "SentencePiece", false},
		{map[string][]byte{"a.model": spm, "b.model": spm}, "several SentencePiece models", true},
	} {
		dir := t.TempDir()
		for name, data := range c.files {
			os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
		tk, err := ChooseTokenizer("", filepath.Join(dir, "m.onnx"), true)
		switch {
		case c.err:
			if err == nil || !strings.Contains(err.Error(), c.kind) {
				t.Errorf("%v: error %v, want %q", c.files, err, c.kind)
			}
		case err != nil:
			t.Errorf("%v: %v", c.files, err)
		case !strings.Contains(tk.Tokenizer.Kind(), c.kind):
			t.Errorf("%v: tokenizer %s, want %s", c.files, tk.Tokenizer.Kind(), c.kind)
		}
	}
	// A variant keeps the byte tokenizer unless given one.
	if tk, err := ChooseTokenizer("", "vanilla.tiny", false); err != nil || tk.Tokenizer.Kind() != "bytes" {
		t.Errorf("variant: %v, %v", tk, err)
	}
}
