package onnx

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"google.golang.org/protobuf/proto"
)

// einsumModel returns an ONNX model whose one node is Einsum(eq) (or op, when not Einsum)
// over float inputs x0, x1, … of the given shapes, output y of unknown shape.
func einsumModel(t testing.TB, op, eq string, shapes [][]int64) []byte {
	t.Helper()
	b := graph.NewBuilder("einsum")
	var in []string
	for i, s := range shapes {
		var dims []graph.Dim
		for _, d := range s {
			dims = append(dims, graph.Fixed(d))
		}
		in = append(in, b.Input(fmt.Sprintf("x%d", i), tensor.Float32, dims...))
	}
	b.Output("y", b.Op("Identity", in[:1], nil), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := Export(g, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	n := findNode(&m, "Identity")
	n.OpType, n.Input = op, in
	if op == "Einsum" {
		n.Attribute = []*onnxpb.AttributeProto{{Name: "equation", Type: onnxpb.AttributeProto_STRING, S: []byte(eq)}}
	}
	m.Graph.Output[0].Type.GetTensorType().Shape = nil
	out, err := proto.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// einsumDiff describes how got differs from want (shape, or a value beyond tol), or is "".
func einsumDiff(got, want *tensor.Tensor, tol float64) string {
	if got == nil || !tensor.SameShape(got.Shape, want.Shape) {
		return fmt.Sprintf("got %v, want shape %v", got, want.Shape)
	}
	for i := range want.F32 {
		if d := math.Abs(float64(got.F32[i] - want.F32[i])); !(d <= tol) {
			return fmt.Sprintf("at %d: %g, want %g", i, got.F32[i], want.F32[i])
		}
	}
	return ""
}

// naiveEinsum computes an explicit-label equation by visiting every assignment of the labels.
func naiveEinsum(eq string, xs []*tensor.Tensor) *tensor.Tensor {
	lhs, out, _ := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	size := map[byte]int{}
	var labels []byte
	for i, tm := range terms {
		for j := 0; j < len(tm); j++ {
			if _, ok := size[tm[j]]; !ok {
				labels = append(labels, tm[j])
			}
			size[tm[j]] = xs[i].Shape[j]
		}
	}
	var oshape []int
	for j := 0; j < len(out); j++ {
		oshape = append(oshape, size[out[j]])
	}
	y, _ := tensor.New(tensor.Float32, oshape...)
	at := map[byte]int{}
	offset := func(ls string, shape []int) int {
		o := 0
		for j := 0; j < len(ls); j++ {
			o = o*shape[j] + at[ls[j]]
		}
		return o
	}
	var visit func(k int)
	visit = func(k int) {
		if k == len(labels) {
			p := float32(1)
			for i, tm := range terms {
				p *= xs[i].F32[offset(tm, xs[i].Shape)]
			}
			y.F32[offset(out, oshape)] += p
			return
		}
		for v := 0; v < size[labels[k]]; v++ {
			at[labels[k]] = v
			visit(k + 1)
		}
	}
	visit(0)
	return y
}

// Einsum imports as plain ops that compute the equation: products with batch, contracted
// and own labels in any order, sums of labels only one operand has, outer products,
// three operands and the implicit output; Reciprocal imports as 1/x.
func TestImportEinsum(t *testing.T) {
	for _, c := range []struct {
		eq     string
		shapes [][]int64
		want   string // the explicit equation the result must equal
	}{
		{"ij,jk->ik", [][]int64{{2, 3}, {3, 4}}, ""},
		{"ij,jk", [][]int64{{2, 3}, {3, 4}}, "ij,jk->ik"},
		{"bid,bjd->bij", [][]int64{{2, 3, 5}, {2, 4, 5}}, ""},
		{"nshd,nshm->nhmd", [][]int64{{2, 5, 3, 4}, {2, 5, 3, 6}}, ""},
		{"nlhd,nhd->nlh", [][]int64{{2, 5, 3, 4}, {2, 3, 4}}, ""},
		{"nlhd,nhmd,nlh->nlhm", [][]int64{{2, 5, 3, 4}, {2, 3, 6, 4}, {2, 5, 3}}, ""},
		{"i,j->ji", [][]int64{{3}, {4}}, ""},
		{"bij->bj", [][]int64{{2, 3, 4}}, ""},
		{"bij->jb", [][]int64{{2, 3, 4}}, ""},
		{"ij->ij", [][]int64{{2, 3}}, ""},
		{"ab,bc,cd->ad", [][]int64{{2, 3}, {3, 4}, {4, 5}}, ""},
		{"ik,jk->", [][]int64{{2, 3}, {4, 3}}, ""},
		{"bhnd,bhne->bhde", [][]int64{{1, 2, 7, 3}, {1, 2, 7, 4}}, ""},
		{"...id,...jd->...ij", [][]int64{{2, 3, 5, 4}, {2, 3, 6, 4}}, "bhid,bhjd->bhij"},
		{"...nd,...d->...n", [][]int64{{2, 3, 5, 4}, {2, 3, 4}}, "bhnd,bhd->bhn"},
		{"...de,...nd,...n->...ne", [][]int64{{2, 3, 4, 6}, {2, 3, 5, 4}, {2, 3, 5}}, "bhde,bhnd,bhn->bhne"},
		{"...ij,...jk", [][]int64{{2, 3, 4}, {2, 4, 5}}, "bij,bjk->bik"},
		{"...,...->...", [][]int64{{2, 3}, {2, 3}}, "ab,ab->ab"},
		{"...ij->ij", [][]int64{{2, 3, 4, 5}}, "abij->ij"},
		{"...id,jd->...ij", [][]int64{{2, 3, 5, 4}, {6, 4}}, "bhid,jd->bhij"},
		{"...ij,...jk->...ik", [][]int64{{2, 3, 4}, {4, 5}}, "bij,jk->bik"},
		{"...ij,...kj->...ik", [][]int64{{2, 3, 4}, {2, 5, 4}}, "bij,bkj->bik"},
	} {
		t.Run(c.eq, func(t *testing.T) {
			g, err := Import(einsumModel(t, "Einsum", c.eq, c.shapes))
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewSource(1))
			feeds := map[string]*tensor.Tensor{}
			var xs []*tensor.Tensor
			for i, s := range c.shapes {
				dims := make([]int, len(s))
				for j, d := range s {
					dims[j] = int(d)
				}
				x, _ := tensor.New(tensor.Float32, dims...)
				for k := range x.F32 {
					x.F32[k] = float32(r.NormFloat64())
				}
				feeds[fmt.Sprintf("x%d", i)] = x
				xs = append(xs, x)
			}
			out, err := g.Eval(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			eq := c.want
			if eq == "" {
				eq = c.eq
			}
			if d := einsumDiff(out["y"], naiveEinsum(eq, xs), 1e-5); d != "" {
				t.Errorf("%s: %s", c.eq, d)
			}
		})
	}
	g, err := Import(einsumModel(t, "Reciprocal", "", [][]int64{{3}}))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.FromFloat32([]float32{2, -4, 0.5}, 3)
	out, err := g.Eval(context.Background(), map[string]*tensor.Tensor{"x0": x})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tensor.FromFloat32([]float32{0.5, -0.25, 2}, 3)
	if d := einsumDiff(out["y"], want, 0); d != "" {
		t.Errorf("Reciprocal: %s", d)
	}
}

// An Einsum zoo cannot write as plain ops is refused with an error that names it.
func TestImportEinsumRefused(t *testing.T) {
	for _, c := range []struct {
		eq     string
		shapes [][]int64
		want   string
	}{
		{"ii->i", [][]int64{{3, 3}}, "distinct letters"},
		{"i...j->ij", [][]int64{{2, 3, 4}}, "not leading"},
		{"...ij->i...", [][]int64{{2, 3, 4}}, "not leading"},
		{"i.j->ij", [][]int64{{2, 3, 4}}, "stray"},
		{"ijk,ikl->jl", [][]int64{{2, 3, 4}, {2, 4, 5}}, "at most 1 each"},
		{"ij,jk->iz", [][]int64{{2, 3}, {3, 4}}, "not one input label"},
		{"ij->", [][]int64{{2, 3}, {3, 4}}, "2 inputs"},
	} {
		if _, err := Import(einsumModel(t, "Einsum", c.eq, c.shapes)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.eq, err, c.want)
		}
	}
}
