package graph_test

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() { goldenSets["Resize"] = resizeCases }

// resizeCases: ONNX's reference results (testdata/gen_resize.py), and the rejected forms.
func resizeCases() []evalCase {
	cs := goldenJSONCases("testdata/resize_golden.json")
	for i := range cs {
		if cs[i].name == "axes, sizes linear" {
			cs[i].attrs["axes"] = graph.Ints(2, 3)
		}
	}
	x := tf(sh(1, 1, 2, 2), 1, 2, 3, 4)
	s := tf(sh(4), 1, 1, 2, 2)
	none := tf(sh(0))
	return append(cs,
		evalCase{name: "antialias", op: "Resize", attrs: graph.Attrs{"mode": graph.String("cubic"), "antialias": graph.Int(1)}, in: []*tensor.Tensor{x, none, s}, wantErr: "antialias"},
		evalCase{name: "tf_crop_and_resize by scales", op: "Resize", attrs: graph.Attrs{"coordinate_transformation_mode": graph.String("tf_crop_and_resize")},
			in: []*tensor.Tensor{x, tf(sh(8), 0, 0, 0, 0, 1, 1, 1, 1), s}, wantErr: "give sizes"},
		evalCase{name: "tf_crop_and_resize without roi", op: "Resize", attrs: graph.Attrs{"coordinate_transformation_mode": graph.String("tf_crop_and_resize")},
			in: []*tensor.Tensor{x, none, nil, ti(sh(4), 1, 1, 3, 3)}, wantErr: "roi"},
		evalCase{name: "scales and sizes", op: "Resize", in: []*tensor.Tensor{x, none, s, ti(sh(4), 1, 1, 4, 4)}, wantErr: "exactly one"},
		evalCase{name: "scales of wrong length", op: "Resize", in: []*tensor.Tensor{x, none, tf(sh(2), 2, 2)}, wantErr: "2 entries for 4 axes"},
		evalCase{name: "int data", op: "Resize", in: []*tensor.Tensor{ti(sh(1, 2), 1, 2), none, tf(sh(2), 1, 2)}, wantErr: "float"},
	)
}
