#!/usr/bin/python3
"""Golden cases for Resize, computed with ONNX's own reference (interpolate_nd and the
nearest/linear/cubic coefficient rules of onnx/backend/test/case/node/resize.py, which the ONNX
backend tests' expected outputs come from), with Debian's onnx 1.12. Run from anywhere:

    /usr/bin/python3 zoo/graph/testdata/gen_resize.py

It writes resize_golden.json next to itself in gen_opset23.py's format.
"""
import json
import os

import numpy as np
from onnx.backend.test.case.node.resize import cubic_coeffs, interpolate_nd, linear_coeffs, nearest_coeffs

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_golden.json")
CASES = []


def enc(t):
    if t is None:
        return None
    t = np.asarray(t)
    kind = "int64" if t.dtype == np.int64 else "float32"
    data = t.reshape(-1).tolist() if kind == "int64" else t.reshape(-1).astype(np.float64).tolist()
    return {"dtype": kind, "shape": list(t.shape), "data": data}


def case(name, attrs, ins, want):
    kinds = {int: "int", float: "float", str: "string"}
    a = {k: {kinds[type(v)]: v} for k, v in attrs.items()}
    CASES.append({"name": name, "op": "Resize", "attrs": a, "in": [enc(x) for x in ins], "want": [enc(np.asarray(want, dtype=np.float32))]})


def main():
    f32 = lambda *v: np.array(v, dtype=np.float32)
    i64 = lambda *v: np.array(v, dtype=np.int64)
    x22 = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    x24 = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], dtype=np.float32)
    x44 = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    empty = np.zeros(0, dtype=np.float32)
    near = lambda mode: (lambda r, scale=1.0: nearest_coeffs(r, mode=mode))
    lin = lambda r, scale=1.0: linear_coeffs(r)

    # ONNX's documented examples (resize_upsample_scales_nearest, ...), then other modes.
    s = f32(1, 1, 2, 3)
    case("upsample scales nearest", {"mode": "nearest"}, [x22, empty, s], interpolate_nd(x22, near("round_prefer_floor"), scale_factors=s))
    s = f32(1, 1, 0.6, 0.6)
    case("downsample scales nearest", {"mode": "nearest"}, [x24, empty, s], interpolate_nd(x24, near("round_prefer_floor"), scale_factors=s))
    z = i64(1, 1, 7, 8)
    case("upsample sizes nearest", {"mode": "nearest"}, [x22, None, None, z], interpolate_nd(x22, near("round_prefer_floor"), output_size=z))
    z = i64(1, 1, 8, 8)
    case("sizes nearest ceil half_pixel", {"mode": "nearest", "nearest_mode": "ceil"}, [x44, None, None, z],
         interpolate_nd(x44, near("ceil"), output_size=z, coordinate_transformation_mode="half_pixel"))
    case("sizes nearest floor align_corners", {"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "align_corners"},
         [x44, None, None, z], interpolate_nd(x44, near("floor"), output_size=z, coordinate_transformation_mode="align_corners"))
    case("sizes nearest round_prefer_ceil asymmetric", {"mode": "nearest", "nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "asymmetric"},
         [x44, None, None, z], interpolate_nd(x44, near("round_prefer_ceil"), output_size=z, coordinate_transformation_mode="asymmetric"))
    s = f32(1, 1, 2, 2)
    case("upsample scales linear", {"mode": "linear"}, [x22, empty, s], interpolate_nd(x22, lin, scale_factors=s))
    case("upsample scales linear align_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [x22, empty, s],
         interpolate_nd(x22, lin, scale_factors=s, coordinate_transformation_mode="align_corners"))
    case("upsample scales linear asymmetric", {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [x22, empty, s],
         interpolate_nd(x22, lin, scale_factors=s, coordinate_transformation_mode="asymmetric"))
    s = f32(1, 1, 0.6, 0.6)
    case("downsample scales linear", {"mode": "linear"}, [x24, empty, s], interpolate_nd(x24, lin, scale_factors=s))
    z = i64(1, 1, 3, 1)
    case("downsample sizes linear pytorch_half_pixel", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
         [x44, None, None, z], interpolate_nd(x44, lin, output_size=z, coordinate_transformation_mode="pytorch_half_pixel"))
    # Opset 18's axes: sizes for the last two axes only.
    z = i64(1, 1, 3, 5)
    # (the Go test adds the attribute axes = [2, 3], an ints attribute this format does not hold)
    case("axes, sizes linear", {"mode": "linear"}, [x24, None, None, i64(3, 5)], interpolate_nd(x24, lin, output_size=z))

    # Cubic (Keys' kernel, a = -0.75 or -0.5, with exclude_outside) and tf_crop_and_resize.
    cub = lambda a: (lambda r, scale=1.0: cubic_coeffs(r, A=a))
    s = f32(1, 1, 2, 2)
    case("upsample scales cubic", {"mode": "cubic"}, [x44, empty, s], interpolate_nd(x44, cub(-0.75), scale_factors=s))
    s = f32(1, 1, 0.8, 0.8)
    case("downsample scales cubic a=-0.5 exclude_outside", {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [x44, empty, s],
         interpolate_nd(x44, cub(-0.5), scale_factors=s, exclude_outside=True))
    z = i64(1, 1, 3, 5)
    case("sizes cubic asymmetric", {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}, [x44, None, None, z],
         interpolate_nd(x44, cub(-0.75), output_size=z, coordinate_transformation_mode="asymmetric"))
    roi = f32(0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7)
    z = i64(1, 1, 3, 3)
    case("tf_crop_and_resize extrapolation", {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10.0},
         [x44, roi, None, z], interpolate_nd(x44, lin, output_size=z, roi=roi, coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0))

    with open(OUT, "w") as f:
        json.dump(CASES, f, indent=0)
        f.write("\n")
    print(f"{len(CASES)} cases in {OUT}")


if __name__ == "__main__":
    main()
