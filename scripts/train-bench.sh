#!/usr/bin/env bash
# Training speed of zoo train against PyTorch 1.13 on the same model, batch, window and threads:
# the seed's vanilla base encoder, AdamW, mlm, clip 1.0 (scripts/train_bench_torch.py says how
# PyTorch's side is set up). Both time forward + backward + clip + optimizer step, leave out the
# first SKIP steps, and count every token of the step's windows. A benchmark, not a test: run it
# on a quiet machine and read the ratio; both sides run back to back in one invocation. Give
# PyTorch a real BLAS first (Debian: apt-get install libopenblas0-pthread), see the Python script.
#
#   scripts/train-bench.sh                  # n = 128 and 512, batch 8, every core
#   WINDOWS="128" BATCH=4 THREADS=1 STEPS=8 scripts/train-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOWS="${WINDOWS:-128 512}" BATCH="${BATCH:-8}" THREADS="${THREADS:-$(nproc)}" STEPS="${STEPS:-12}" SKIP="${SKIP:-2}"
INPUT="${INPUT:-examples/corpus/kjv-genesis-exodus.txt}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/zoo" ./cmd/zoo
for n in $WINDOWS; do
  "$tmp/zoo" train vanilla --input "$INPUT" --window "$n" --batch "$BATCH" --threads "$THREADS" --steps "$STEPS" \
    --set dropout=0.1 --log "$tmp/log.jsonl" -o "$tmp/m.safetensors" >/dev/null
  zoo_tps="$(/usr/bin/python3 - "$tmp/log.jsonl" "$SKIP" "$n" "$BATCH" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
kept = [s for s in steps if s["step"] > int(sys.argv[2])]
tokens = int(sys.argv[3]) * int(sys.argv[4])
print(tokens * len(kept) / sum(tokens / s["tokens_per_s"] for s in kept))
PY
)"
  torch_json="$(/usr/bin/python3 scripts/train_bench_torch.py --input "$INPUT" --window "$n" --batch "$BATCH" \
    --threads "$THREADS" --steps "$STEPS" --skip "$SKIP")"
  /usr/bin/python3 - "$zoo_tps" "$torch_json" "$n" "$BATCH" "$THREADS" <<'PY'
import json, sys
zoo, peer = float(sys.argv[1]), json.loads(sys.argv[2])
print(f"vanilla base, n={sys.argv[3]}, batch {sys.argv[4]}, {sys.argv[5]} threads: zoo train {zoo:.0f} tokens/s, "
      f"{peer['peer']} ({peer['blas']}) {peer['tokens_per_s']:.0f} tokens/s, ratio {zoo / peer['tokens_per_s']:.2f}x")
PY
done
