#!/usr/bin/env bash
# Training speed of zoo train against PyTorch 1.13 on the same model, batch, window and threads:
# the seed's vanilla base encoder, AdamW, mlm, clip 1.0, dropout 0.1 (scripts/train_bench_torch.py
# says how PyTorch's side is set up). Both time forward + backward + clip + optimizer step and
# count every token of the step's windows.
#
# Paired, so that load on a shared machine weighs on both sides alike: one zoo train process and
# one PyTorch model stay warm (compiled, allocated) for the whole run, and the script alternates
# blocks of BLOCK_STEPS steps of each (zoo A, PyTorch B: A B, B A, A B, ...; zoo is held with
# SIGSTOP while PyTorch runs), after SKIP warm-up steps each. Each pair gives a ratio of tokens/s;
# the figure is the median ratio of the BLOCKS pairs, with their range and interquartile range,
# as `zoo bench --against` reports inference. Give PyTorch a real BLAS (Debian: libopenblas0-pthread;
# or point TORCH_BLAS_DIR at a directory holding an OpenBLAS libblas.so.3, e.g. one unpacked with
# `apt-get download libopenblas0-pthread && dpkg -x`): the line names the BLAS PyTorch loaded.
#
#   scripts/train-bench.sh                  # n = 128 and 512, batch 8, every core
#   WINDOWS="128" BATCH=4 THREADS=1 BLOCKS=4 scripts/train-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOWS="${WINDOWS:-128 512}" BATCH="${BATCH:-8}" THREADS="${THREADS:-$(nproc)}" SKIP="${SKIP:-2}"
BLOCKS="${BLOCKS:-6}" BLOCK_STEPS="${BLOCK_STEPS:-3}"
INPUT="${INPUT:-examples/corpus/kjv-genesis-exodus.txt}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/zoo" ./cmd/zoo
for n in $WINDOWS; do
  json="$(LD_LIBRARY_PATH="${TORCH_BLAS_DIR:+$TORCH_BLAS_DIR:}${LD_LIBRARY_PATH:-}" /usr/bin/python3 scripts/train_bench_torch.py \
    --zoo "$tmp/zoo" --input "$INPUT" --window "$n" --batch "$BATCH" --threads "$THREADS" --skip "$SKIP" \
    --blocks "$BLOCKS" --block-steps "$BLOCK_STEPS")"
  /usr/bin/python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"vanilla base, n={r['window']}, batch {r['batch']}, {r['threads']} threads, {r['blocks']} pairs of {r['block_steps']}-step blocks: "
      f"zoo train {r['zoo_tokens_per_s']:.0f} tokens/s, {r['peer']} ({r['blas']}) {r['torch_tokens_per_s']:.0f} tokens/s (medians); "
      f"ratio {r['ratio_median']:.2f}x (median of pairs; IQR {r['ratio_iqr'][0]:.2f}-{r['ratio_iqr'][1]:.2f}, range {r['ratio_min']:.2f}-{r['ratio_max']:.2f})")
print("  pairs: " + ", ".join(f"{p['ratio']:.2f}" for p in r["pairs"]))
PY
done
