#!/usr/bin/python3
"""Fixtures for `--weights`: state_dicts written by PyTorch, loaded by zoo.

    /usr/bin/python3 cmd/zoo/testdata/gen_weights.py

The seed's vanilla Transformer (variants/vanilla/testdata/gen_fixtures.py) at vanilla.tiny's shape is
initialised by PyTorch itself (torch.manual_seed(11): weights zoo never drew), cast to float64,
float16 and bfloat16, saved with torch.save and converted by scripts/state_dict_to_safetensors.py
(the path a PyTorch user takes without the safetensors package). For each dtype the fixture holds
the hidden states and logits that the float32 module computes with those weights (rounded to the
dtype and back) on the first window of examples/text.txt, 37 bytes, as `zoo run vanilla.tiny --set max_len=64 --window 37
--max-windows 1` cuts it.

It also writes eval_clm.safetensors, what `zoo eval vanilla.tiny --set max_len=64 --weights
torch_tiny_f64.safetensors --objective clm --window 37 --label-smoothing 0.1` must report on
examples/text.txt (16 windows of 37 bytes): the seed's module with the causal mask, position t
predicting token t+1 within each window, F.cross_entropy with label_smoothing=0.1 (the loss),
the plain cross-entropy summed (bits per byte, perplexity) and the argmax hits.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "variants", "vanilla", "testdata"))
sys.path.insert(0, os.path.join(ROOT, "variants", "internal", "fixtures"))
import gen_fixtures as vanilla  # noqa: E402
import zoofixtures as zf  # noqa: E402

WINDOW = 37


def main():
    torch.manual_seed(11)
    model = vanilla.Transformer(257, d_model=64, h=4, num_layers=2, d_ff=128, max_len=64)
    model.eval()
    text = open(os.path.join(ROOT, "examples", "text.txt"), "rb").read()[:WINDOW]
    tokens = torch.from_numpy(np.frombuffer(text, dtype=np.uint8).astype(np.int64) + 1)[None, :]
    for name, dtype in (("f64", torch.float64), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        state = {k: v.to(dtype) for k, v in model.state_dict().items()}
        with tempfile.TemporaryDirectory() as tmp:
            pt = os.path.join(tmp, "model.pt")
            torch.save(state, pt)
            out = os.path.join(HERE, f"torch_tiny_{name}.safetensors")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "state_dict_to_safetensors.py"), pt, out],
                           check=True, stdout=subprocess.DEVNULL)
        ref = vanilla.Transformer(257, d_model=64, h=4, num_layers=2, d_ff=128, max_len=64)
        ref.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
        ref.eval()
        with torch.no_grad():
            hidden, logits = ref(tokens)
        zf.write_safetensors(os.path.join(HERE, f"torch_tiny_{name}_outputs.safetensors"),
                             {"tokens": tokens.numpy(), "hidden": hidden.numpy(), "logits": logits.numpy()},
                             {"torch": torch.__version__, "dtype": name})
        print(f"wrote torch_tiny_{name}.safetensors and its outputs")
        if name == "f64":
            eval_clm({k: v.float() for k, v in state.items()})


def eval_clm(state):
    model = vanilla.Transformer(257, d_model=64, h=4, num_layers=2, d_ff=128, max_len=64, causal=True)
    model.load_state_dict(state, strict=True)
    model.eval()
    text = open(os.path.join(ROOT, "examples", "text.txt"), "rb").read()
    assert len(text) % WINDOW == 0, "the windows would need padding"
    tokens = torch.from_numpy(np.frombuffer(text, dtype=np.uint8).astype(np.int64) + 1).view(-1, WINDOW)
    with torch.no_grad():
        _, logits = model(tokens)
    flat, tgt = logits[:, :-1].reshape(-1, 257), tokens[:, 1:].reshape(-1)
    loss = torch.nn.functional.cross_entropy(flat, tgt, label_smoothing=0.1)
    nll = torch.nn.functional.cross_entropy(flat.double(), tgt, reduction="sum")
    hits = int((flat.argmax(-1) == tgt).sum())
    out = {"loss": np.array([loss.item()]), "nll_sum": np.array([nll.item()]), "correct": np.array([hits], dtype=np.int64),
           "tokens": np.array([tgt.numel()], dtype=np.int64)}
    zf.write_safetensors(os.path.join(HERE, "eval_clm.safetensors"),
                         {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in out.items()},
                         {"torch": torch.__version__, "loss": repr(loss.item()), "nll_sum": repr(nll.item()),
                          "bits_per_byte": repr(nll.item() / math.log(2) / tgt.numel())})
    print(f"wrote eval_clm.safetensors: loss {loss.item():.6f}, {hits}/{tgt.numel()} correct")


if __name__ == "__main__":
    main()
