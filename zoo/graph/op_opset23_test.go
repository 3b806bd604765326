package graph_test

import (
	"encoding/json"
	"github.com/zoo-dev/zoo/internal/goldenjson"
	"os"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The golden cases of Gelu (opset 20), RMSNormalization, RotaryEmbedding and Attention (opset
// 23) come from testdata/gen_opset23.py (numpy, from the operator definitions); the rejected
// inputs are written here.

func init() { goldenSets["opset23"] = opset23Cases }

type goldenJSON struct {
	Name  string                    `json:"name"`
	Op    string                    `json:"op"`
	Attrs map[string]map[string]any `json:"attrs"`
	In    []*goldenjson.Tensor      `json:"in"`
	Want  []*goldenjson.Tensor      `json:"want"`
}

// goldenTensor decodes j, nil for a JSON null (an omitted optional input).
func goldenTensor(j *goldenjson.Tensor) *tensor.Tensor {
	if j == nil {
		return nil
	}
	t, err := j.Decode()
	if err != nil {
		panic(err)
	}
	return t
}

// goldenJSONCases reads golden cases written by a testdata script (see gen_opset23.py for the
// format).
func goldenJSONCases(path string) []evalCase {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var gs []goldenJSON
	if err := json.Unmarshal(data, &gs); err != nil {
		panic(err)
	}
	var cs []evalCase
	for _, g := range gs {
		c := evalCase{name: g.Name, op: g.Op, attrs: graph.Attrs{}}
		for k, v := range g.Attrs {
			switch {
			case v["int"] != nil:
				c.attrs[k] = graph.Int(int64(v["int"].(float64)))
			case v["float"] != nil:
				c.attrs[k] = graph.Float(float32(v["float"].(float64)))
			default:
				c.attrs[k] = graph.String(v["string"].(string))
			}
		}
		for _, t := range g.In {
			c.in = append(c.in, goldenTensor(t))
		}
		for len(c.in) > 0 && c.in[len(c.in)-1] == nil {
			c.in = c.in[:len(c.in)-1]
		}
		for _, t := range g.Want {
			c.want = append(c.want, goldenTensor(t))
		}
		cs = append(cs, c)
	}
	return cs
}

func opset23Cases() []evalCase {
	cs := goldenJSONCases("testdata/opset23_golden.json")
	x := tf(sh(2, 4), 1, 2, 3, 4, 5, 6, 7, 8)
	q := zeros(1, 2, 3, 4)
	return append(cs,
		evalCase{name: "bad approximate", op: "Gelu", attrs: graph.Attrs{"approximate": graph.String("fast")}, in: []*tensor.Tensor{x}, wantErr: "approximate"},
		evalCase{name: "int input", op: "Gelu", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "float32"},
		evalCase{name: "bad scale", op: "RMSNormalization", in: []*tensor.Tensor{x, tf(sh(3), 1, 1, 1)}, wantErr: "scale"},
		evalCase{name: "odd rotary dim", op: "RotaryEmbedding", attrs: graph.Attrs{"rotary_embedding_dim": graph.Int(3)},
			in: []*tensor.Tensor{q, zeros(1, 3, 1), zeros(1, 3, 1)}, wantErr: "even"},
		evalCase{name: "3-D without num_heads", op: "RotaryEmbedding", in: []*tensor.Tensor{zeros(1, 3, 8), zeros(1, 3, 4), zeros(1, 3, 4)}, wantErr: "num_heads"},
		evalCase{name: "position out of range", op: "RotaryEmbedding", in: []*tensor.Tensor{q, zeros(2, 2), zeros(2, 2), ti(sh(1, 3), 0, 1, 2)}, wantErr: "outside"},
		evalCase{name: "heads not grouped", op: "Attention", in: []*tensor.Tensor{zeros(1, 3, 2, 4), zeros(1, 2, 2, 4), zeros(1, 2, 2, 4)}, wantErr: "multiple"},
		evalCase{name: "mask shape", op: "Attention", in: []*tensor.Tensor{q, q, q, zeros(3, 3, 3)}, wantErr: "broadcast"},
		evalCase{name: "mixed ranks", op: "Attention", in: []*tensor.Tensor{q, zeros(1, 3, 8), q}, wantErr: "ranks"},
	)
}
