#!/usr/bin/env bash
# int8's accuracy on trained weights, every built-in variant: each VARIANT.tiny is trained by
# zoo train (clm, or mlm for linformer and nystrom, whose attention cannot be causal; STEPS
# steps of 16 windows of 128 bytes) on the committed corpus
# (examples/corpus/kjv-genesis-exodus.txt), then scored on the held-out book
# (examples/corpus/kjv-ruth.txt) by zoo eval in fp32, int8 and int8-attention, and compared by
# zoo parity --precision int8 and int8-attention (the sample text; relative errors and
# per-position cosine of `hidden` against fp32). Prints one markdown table on stdout; the
# README's int8 table is its output.
#
#   scripts/int8-accuracy.sh
#   VARIANTS="vanilla linear" STEPS=600 scripts/int8-accuracy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="${VARIANTS:-vanilla gqa linformer alibi rope linear performer relbias nystrom sparse}"
STEPS="${STEPS:-300}" THREADS="${THREADS:-2}"
TRAIN=examples/corpus/kjv-genesis-exodus.txt HELDOUT=examples/corpus/kjv-ruth.txt
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/zoo" ./cmd/zoo
for v in $VARIANTS; do
  w="$tmp/$v.safetensors" obj=clm causal=(--set causal=true)
  case "$v" in linformer | nystrom) obj=mlm causal=() ;; esac
  "$tmp/zoo" train "$v.tiny" --objective "$obj" --input "$TRAIN" --window 128 --batch 16 --lr 2e-3 --warmup 50 \
    --steps "$STEPS" --threads "$THREADS" -o "$w" >/dev/null
  for p in fp32 int8 int8-attention; do
    "$tmp/zoo" eval "$v.tiny" --weights "$w" --objective "$obj" -i "$HELDOUT" --window 128 --threads "$THREADS" --precision "$p" --json >"$tmp/$v.eval.$p.json"
  done
  for p in int8 int8-attention; do
    "$tmp/zoo" parity "$v.tiny" --weights "$w" "${causal[@]}" --precision "$p" --threads "$THREADS" --json >"$tmp/$v.$p.parity.json"
  done
  echo "int8-accuracy: $v done" >&2
done
/usr/bin/python3 - "$tmp" "$VARIANTS" "$STEPS" <<'PY'
import json, sys
tmp, variants, steps = sys.argv[1], sys.argv[2].split(), sys.argv[3]
print(f"| variant (tiny, {steps} steps) | objective | precision | held-out loss fp32 | quantized | − fp32 | min cosine | mean cosine | max rel. error | mean rel. error | zoo vs ORT int8: min cosine |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for v in variants:
    e = {p: json.load(open(f"{tmp}/{v}.eval.{p}.json")) for p in ("fp32", "int8", "int8-attention")}
    for p in ("int8", "int8-attention"):
        par = json.load(open(f"{tmp}/{v}.{p}.parity.json"))
        lf, li = e["fp32"]["loss"], e[p]["loss"]
        ort = par.get("onnxruntime")
        o = f"{ort['min_cosine']:.6f}" if ort else ("not run" if p == "int8" else "n/a")
        print(f"| {v} | {e['fp32']['objective']} | {p} | {lf:.4f} | {li:.4f} | {100 * (li - lf) / lf:+.2f} % | {par['min_cosine']:.5f} | {par['mean_cosine']:.5f} | "
              f"{par['max_rel_error']:.2e} | {par['mean_rel_error']:.2e} | {o} |")
PY
