#!/usr/bin/python3
"""Write ONNX's own backend node tests (the operator conformance suite that ships with onnx)
into a directory (run from anywhere):

    /usr/bin/python3 onnx/testdata/nodetests/gen.py DIR

Needs Debian's python3-onnx (1.12) and numpy; /usr/bin/python3 because another python3 on PATH
may not see them. It writes DIR/node/test_*/model.onnx with test_data_set_N/input_K.pb and
output_K.pb, exactly as `python3 -m onnx.backend.test.cmd_tools generate-data -o DIR` does,
with two differences: the numpy aliases that numpy 1.24 removed (np.float, np.int, np.bool,
np.object), which onnx 1.12's test cases still use, are put back first; and numpy's global
random generator is seeded, so that the inputs (and so the expected outputs) are the same on
every run. Only the node tests are written (not onnx's "simple" and "real" model tests).

One correction is made to onnx 1.12's data, for the tests that cast to or from bfloat16
(test_cast_*BFLOAT16*, test_castlike_*BFLOAT16*): onnx 1.12 writes their bfloat16 tensors as
uint16 tensors (the bit patterns, data_type UINT16, where the model declares BFLOAT16), and it
computes a cast to bfloat16 by dropping the low 16 bits of the float32. ONNX 1.13 and later
define that cast as round to nearest even (onnx/onnx#4193; ONNX Runtime rounds so too), and
write these tensors as BFLOAT16. This script does the same: the bit patterns are written as
BFLOAT16 tensors, and the expected output of a cast from float32 to bfloat16 is its input
rounded to nearest even (NaN stays NaN). In test_castlike_*BFLOAT16* the model also declares
the one-element "like" input with the output's shape; its declaration is set to the data's.

onnx/nodetests_test.go (TestONNXNodeTests) runs this script into a temporary directory, or
reads $ZOO_ONNX_NODE_TESTS when that names a directory written by it.
"""
import argparse
import os
import sys

import numpy as np

for _alias, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    setattr(np, _alias, _type)

np.random.seed(0)

import onnx  # noqa: E402  (after the aliases: onnx's test cases read them at import)
from onnx.backend.test import cmd_tools  # noqa: E402
from onnx.backend.test.case import model as model_test  # noqa: E402


def bf16_round(x):
    """float32 array → bfloat16 bit patterns (uint16), rounded to nearest even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def fix_bfloat16(node_dir):
    """Writes onnx 1.12's bfloat16 test tensors as ONNX 1.13 does (see the module doc)."""
    from onnx import TensorProto, numpy_helper
    for name in sorted(os.listdir(node_dir)):
        if "BFLOAT16" not in name:
            continue
        tdir = os.path.join(node_dir, name)
        model = onnx.load(os.path.join(tdir, "model.onnx"))
        model_changed = False
        types = {("input", k): vi.type.tensor_type.elem_type for k, vi in enumerate(model.graph.input)}
        types.update({("output", k): vi.type.tensor_type.elem_type for k, vi in enumerate(model.graph.output)})
        for ds in sorted(d for d in os.listdir(tdir) if d.startswith("test_data_set_")):
            ddir = os.path.join(tdir, ds)
            x0 = None
            for (kind, k), elem in sorted(types.items()):
                path = os.path.join(ddir, f"{kind}_{k}.pb")
                tp = onnx.load_tensor(path)
                if kind == "input" and k == 0:
                    x0 = numpy_helper.to_array(tp)
                if kind == "input":
                    dims = model.graph.input[k].type.tensor_type.shape.dim
                    if [d.dim_value for d in dims] != list(tp.dims):
                        del dims[:]
                        for d in tp.dims:
                            dims.add().dim_value = d
                        model_changed = True
                if elem != TensorProto.BFLOAT16:
                    continue
                if kind == "output" and x0 is not None and x0.dtype == np.float32:
                    bits = bf16_round(x0)
                elif tp.data_type == TensorProto.UINT16:
                    bits = numpy_helper.to_array(tp)
                else:
                    continue
                fixed = TensorProto(name=tp.name, dims=tp.dims, data_type=TensorProto.BFLOAT16,
                                    raw_data=bits.astype("<u2").tobytes())
                onnx.save_tensor(fixed, path)
        if model_changed:
            onnx.save(model, os.path.join(tdir, "model.onnx"))


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: gen.py DIR")
    # generate_data also writes onnx's model tests ("simple", "real"); keep only the node ones.
    model_test.collect_testcases = lambda *a, **k: []
    cmd_tools.generate_data(argparse.Namespace(output=sys.argv[1], op_type=None))
    fix_bfloat16(os.path.join(sys.argv[1], "node"))
    print(f"onnx {onnx.__version__}: node tests written to {sys.argv[1]}/node")


if __name__ == "__main__":
    main()
