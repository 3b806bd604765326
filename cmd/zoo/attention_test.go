package main

import (
	"context"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/attention"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/zoo/attnmap"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// attentionJSON runs `zoo attention ... --json` and decodes the document.
func attentionJSON(t *testing.T, args ...string) attnmap.Map {
	t.Helper()
	code, out, errs := zoo(t, append([]string{"attention"}, append(args, "--json")...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var doc attnmap.Map
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return doc
}

// TestAttentionIsTheBackendsSoftmax checks that the weights printed are the softmax of the
// scores the backend computed: the same model, exported and compiled here with each layer's
// pre-softmax scores kept, gives scores whose softmax over the keys (per head, gqa's query
// heads unfolded from their groups) equals the printed rows; and that the tokens are the
// input's first bytes.
func TestAttentionIsTheBackendsSoftmax(t *testing.T) {
	const n = 12
	raw, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	ids := tokenize.Encode(raw[:n])
	for _, tc := range []struct {
		model     string
		keys      int // per row
		groups, r int // softmax heads and query heads per group
	}{
		{"vanilla.tiny", n, 4, 1},
		{"gqa.tiny", n, 2, 2},
		{"linformer.tiny", 16, 4, 1},
	} {
		t.Run(tc.model, func(t *testing.T) {
			doc := attentionJSON(t, tc.model, "--input", text, "--tokens", "12")
			if got, want := strings.Join(doc.Tokens, ""), strings.ReplaceAll(string(raw[:n]), " ", "·"); got != want {
				t.Errorf("tokens %q, want %q", got, want)
			}
			path := filepath.Join(t.TempDir(), "m.onnx")
			if code, _, errs := zoo(t, "export", tc.model, "--onnx", "-o", path); code != 0 {
				t.Fatalf("export: %s", errs)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			sites, err := attnmap.Sites(g)
			if err != nil {
				t.Fatal(err)
			}
			var scores []string
			for _, s := range sites {
				for _, nd := range g.Nodes {
					if nd.Op == "Softmax" && nd.Outputs[0] == s.Value {
						scores = append(scores, nd.Inputs[0])
					}
				}
			}
			p, err := cpu.Backend{}.Compile(g, backends.Options{KeepIntermediates: scores})
			if err != nil {
				t.Fatal(err)
			}
			tok, _ := tensor.FromInt64(ids, 1, n)
			mask, _ := tensor.FromBool(make([]bool, n), 1, n)
			outs, err := p.Run(context.Background(), map[string]*tensor.Tensor{"tokens": tok, "key_padding_mask": mask})
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Layers) != len(scores) {
				t.Fatalf("%d layers printed, %d in the graph", len(doc.Layers), len(scores))
			}
			worst := 0.0
			for li, l := range doc.Layers {
				s := outs[scores[li]]
				if len(l.Heads) != tc.groups*tc.r {
					t.Fatalf("layer %d: %d heads, want %d", li, len(l.Heads), tc.groups*tc.r)
				}
				for _, h := range l.Heads {
					g, j := h.Head/tc.r, h.Head%tc.r
					for i, row := range h.Weights {
						if len(row) != tc.keys {
							t.Fatalf("layer %d head %d row %d: %d keys, want %d", li, h.Head, i, len(row), tc.keys)
						}
						off := ((g*tc.r+j)*n + i) * tc.keys
						want := softmaxRow(s.F32[off : off+tc.keys])
						for k := range row {
							worst = max(worst, math.Abs(float64(row[k])-want[k]))
						}
					}
				}
			}
			if worst > 1e-6 {
				t.Errorf("printed weights differ from the softmax of the backend's scores by up to %g", worst)
			}
		})
	}
}

func softmaxRow(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	out := make([]float64, len(x))
	var sum float64
	for i, v := range x {
		out[i] = math.Exp(float64(v) - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// TestAttentionSparseBlocks: the sparse map is n × n, zero exactly outside the block window
// (sparse.Pattern) and a distribution inside it.
func TestAttentionSparseBlocks(t *testing.T) {
	const n = 21 // not a multiple of the block: the last block is partial
	doc := attentionJSON(t, "sparse.tiny", "--set", "block=4", "--input", text, "--tokens", "21", "--layer", "1")
	pat := sparse.Pattern{Block: 4, Window: 1}
	if len(doc.Layers) != 1 || doc.Layers[0].Layer != 1 || len(doc.Layers[0].Heads) != 4 {
		t.Fatalf("layers %+v: want layer 1 with 4 heads", doc.Layers)
	}
	for _, h := range doc.Layers[0].Heads {
		if len(h.Weights) != n {
			t.Fatalf("head %d: %d rows", h.Head, len(h.Weights))
		}
		for i, row := range h.Weights {
			var sum float64
			for j, w := range row {
				if allowed := pat.Allowed(i, j); (allowed && w <= 0) || (!allowed && w != 0) {
					t.Fatalf("head %d: weight[%d][%d] = %g, allowed %v", h.Head, i, j, w, allowed)
				}
				sum += float64(w)
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("head %d row %d sums to %g", h.Head, i, sum)
			}
		}
	}
}

// TestAttentionLinearImplied checks linear attention's implied weights against the model's
// own attention output: with the exported graph's V (padded keys zeroed) and the output of
// φ(Q)·(φ(K)ᵀV)·Z kept, Σ_j w_ij v_j equals that output for every head, layer 0 and 1.
func TestAttentionLinearImplied(t *testing.T) {
	const n = 10
	raw, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	doc := attentionJSON(t, "linear.tiny", "--input", text, "--tokens", "10")
	path := filepath.Join(t.TempDir(), "m.onnx")
	if code, _, errs := zoo(t, "export", "linear.tiny", "--onnx", "-o", path); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := onnx.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	sites, err := attnmap.LinearSites(g)
	if err != nil {
		t.Fatal(err)
	}
	// kv = MatMul(Transpose(φK), V·keep) and out = Mul(MatMul(φQ, kv), Z), found from φQ.
	var keep []string
	for _, s := range sites {
		var out, vm string
		for _, nd := range g.Nodes {
			if nd.Op != "MatMul" || nd.Inputs[0] != s.Value {
				continue
			}
			for _, kv := range g.Nodes {
				if kv.Op == "MatMul" && kv.Outputs[0] == nd.Inputs[1] && len(kv.Inputs) == 2 {
					vm = kv.Inputs[1]
					for _, mul := range g.Nodes {
						if mul.Op == "Mul" && mul.Inputs[0] == nd.Outputs[0] {
							out = mul.Outputs[0]
						}
					}
				}
			}
		}
		if out == "" || vm == "" {
			t.Fatalf("layer %d: φ(Q)·KV·Z or V not found", s.Layer)
		}
		keep = append(keep, vm, out)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{KeepIntermediates: keep})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := tensor.FromInt64(tokenize.Encode(raw[:n]), 1, n)
	mask, _ := tensor.FromBool(make([]bool, n), 1, n)
	outs, err := p.Run(context.Background(), map[string]*tensor.Tensor{"tokens": tok, "key_padding_mask": mask})
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for li, l := range doc.Layers {
		v, o := outs[keep[2*li]], outs[keep[2*li+1]]
		dk := v.Shape[3]
		for _, h := range l.Heads {
			for i, row := range h.Weights {
				for c := 0; c < dk; c++ {
					var s float64
					for j, w := range row {
						s += float64(w) * float64(v.F32[(h.Head*n+j)*dk+c])
					}
					worst = max(worst, math.Abs(s-float64(o.F32[(h.Head*n+i)*dk+c])))
				}
			}
		}
	}
	if len(doc.Layers) != 2 || worst > 1e-5 {
		t.Errorf("%d layers; Σ_j w_ij v_j differs from the model's attention output by up to %g", len(doc.Layers), worst)
	}
}

// TestAttentionPNG: the picture decodes, with one tile per layer and head (or the one asked
// for), and draws something (not one colour).
func TestAttentionPNG(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args       []string
		rows, cols int
	}{
		{nil, 2, 4},
		{[]string{"--layer", "1"}, 1, 4},
		{[]string{"--head", "3"}, 2, 1},
		{[]string{"--layer", "0", "--head", "0"}, 1, 1},
	} {
		path := filepath.Join(dir, "map.png")
		args := append([]string{"attention", "vanilla.tiny", "--input", text, "--tokens", "10", "-o", path}, tc.args...)
		if code, _, errs := zoo(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		tw, th := attention.Tile(10, 10)
		if b := img.Bounds(); b.Dx() != tc.cols*tw || b.Dy() != tc.rows*th+attention.TitleBand {
			t.Errorf("%v: image %d×%d, want %d×%d tiles of %d×%d plus the title", tc.args, b.Dx(), b.Dy(), tc.cols, tc.rows, tw, th)
		}
		colours := map[[3]uint32]bool{}
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y += 3 {
			for x := b.Min.X; x < b.Max.X; x += 3 {
				r, g, bl, _ := img.At(x, y).RGBA()
				colours[[3]uint32{r, g, bl}] = true
			}
		}
		if len(colours) < 20 {
			t.Errorf("%v: only %d colours: nothing drawn", tc.args, len(colours))
		}
	}
}

// TestAttentionRefuses: one line, exit 2, no file, for variants without a softmax matrix and
// for bad flags.
func TestAttentionRefuses(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "m.png")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"performer.tiny"}, "random features"},
		{[]string{"nystrom.tiny"}, "landmark"},
		{[]string{"vanilla.tiny", "--head", "4"}, "heads 0 to 3"},
		{[]string{"vanilla.tiny", "--layer", "2"}, "layers 0 to 1"},
		{[]string{"sparse.tiny", "--set", "stride=2"}, "sliding-window"},
		{[]string{"linformer.tiny", "--tokens", "200"}, "maximum length"},
	} {
		args := append([]string{"attention", "--input", text, "-o", png}, tc.args...)
		code, _, errs := zoo(t, args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
	if code, _, errs := zoo(t, "attention", "vanilla.tiny", "--input", text); code != 2 || !strings.Contains(errs, "--json") {
		t.Errorf("neither -o nor --json: exit %d, %q", code, errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refusals left %d files", len(entries))
	}
}
