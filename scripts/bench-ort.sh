#!/usr/bin/env bash
# Every built-in variant against ONNX Runtime on its own export, at the lengths issue 20 names:
# base presets, batch 1 at n = 512, 2048 and 8192 and batch 8 at n = 512 (max_len raised to 8192
# where the variant has one), with the same threads on both sides. zoo bench runs the two
# interleaved and reports zoo/ORT as the median over the timed pairs, so a shared machine's drift
# cancels out of the ratio (not out of the absolute times). A benchmark, not a test: it takes
# about half an hour on 2 cores. The result is one markdown file per thread count, headed by the
# machine and the exact commands, written under OUT (docs/bench by default) and replaced only
# when the whole run finished.
#
#   scripts/bench-ort.sh                         # every variant, THREADS="2" (all cores)
#   VARIANTS="performer sparse" THREADS="1 2" REPS=5 LONG_REPS=2 scripts/bench-ort.sh
#   LONG=0 scripts/bench-ort.sh                  # leave out n = 8192
#   LONG_LAYERS=1 scripts/bench-ort.sh           # n = 8192 on one layer of each base model
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ZOO_ORT_LIB:?set ZOO_ORT_LIB to libonnxruntime.so (see README: ONNX Runtime parity)}"
VARIANTS="${VARIANTS:-vanilla gqa linformer alibi rope linear performer relbias nystrom sparse}"
THREADS="${THREADS:-$(nproc)}" REPS="${REPS:-3}" LONG="${LONG:-1}" LONG_REPS="${LONG_REPS:-1}" LONG_LAYERS="${LONG_LAYERS:-}" OUT="${OUT:-docs/bench}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/zoo" ./cmd/zoo
mkdir -p "$OUT"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
slug="$(tr -cs 'A-Za-z0-9' '-' <<<"$cpu" | sed 's/-*$//' | tr 'A-Z' 'a-z')"
flags="$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
runs=("--batch 1 --seq 512,2048 --reps $REPS" "--batch 8 --seq 512 --reps $REPS")
# n = 8192 runs alone with fewer repetitions: one base-sized run of an O(n²) variant takes
# about half a minute here, and ONNX Runtime's three times that.
# LONG_LAYERS=1 runs it on one encoder layer instead of all: every layer does the same work, so
# the ratio is the same to within the embedding's share, at a sixth of the time.
long="--batch 1 --seq 8192 --reps $LONG_REPS"
[ -n "$LONG_LAYERS" ] && long+=" --set layers=$LONG_LAYERS"
[ "$LONG" = 1 ] && runs+=("$long")
for t in $THREADS; do
  f="$tmp/ort-$slug-t$t.md"
  {
    echo "# zoo bench against ONNX Runtime: $cpu, $t thread(s)"
    echo
    echo "Written by scripts/bench-ort.sh on $(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD 2>/dev/null || echo '?');"
    echo "$(nproc) cores, CPU flags of note: ${flags:-none}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "zoo/ORT above 1 means zoo is faster (median over interleaved pairs of ORT time / zoo time)."
  } >"$f"
  for v in $VARIANTS; do
    set_len=(--set max_len=8192)
    "$tmp/zoo" show "$v" --set max_len=8192 >/dev/null 2>&1 || set_len=()
    for run in "${runs[@]}"; do
      # shellcheck disable=SC2206
      args=(bench "$v" $run --threads "$t" --against onnxruntime "${set_len[@]}" --format md)
      { echo; echo "## $v, ${run}"; echo; echo "\`zoo ${args[*]}\`"; echo; } >>"$f"
      "$tmp/zoo" "${args[@]}" >>"$f"
      echo "bench-ort: $v $run, $t thread(s) done" >&2
    done
  done
  # A summary of every row first, so the file answers "which variant beats ORT where" at a glance.
  {
    head -5 "$f"
    echo
    echo "| variant | batch | n | zoo ms | ORT ms | zoo/ORT | zoo mem |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    awk -F'|' '$3 ~ /^ *cpu/ && $5 ~ /[0-9]/ {gsub(/ +/, " "); printf "|%s|%s|%s|%s|%s|%s|%s|\n", $2, $5, $6, $7, $12, $13, $11}' "$f"
    tail -n +6 "$f"
  } >"$f.sum"
  mv "$f.sum" "$OUT/$(basename "$f")"
  echo "bench-ort: wrote $OUT/$(basename "$f")" >&2
done
