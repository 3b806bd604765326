#!/usr/bin/env bash
# int8 on the CPU backend, a benchmark (not a test; run it on a quiet machine):
#
#  1. every built-in variant, base preset, batch 8, n = 512, 2 threads: int8 and int8-attention
#     against fp32, paired run by run (BenchmarkBuiltinsInt8 in backends/cpu: PAIRS pairs each,
#     the ms the medians of each side, the speed-up the median of the pairs' ratios, so that a
#     shared machine's drift, which moves the same run by a third within minutes, hits both
#     sides of every pair alike); the compiled weights' memory (zoo bench's weight_bytes); the
#     accuracy of both against fp32 (zoo parity --precision P on the sample text: relative errors
#     and per-position cosine of `hidden`). Where the CPU's best path is amx-int8, VNNI_VARIANTS
#     (default: every one of VARIANTS) are also run on its vnni512 path (ZOO_INT8=vnni512: what a
#     CPU with AVX512-VNNI and no AMX runs). Where the CPU has better kernels than AVX2,
#     AVX2_VARIANTS (default: every one of VARIANTS) are also run under ZOO_CPU=avx2
#     ZOO_INT8=avx2: the instructions an AVX2-only CPU has (no AVX-512, no AVX-VNNI), on these
#     cores.
#  2. vanilla base against ONNX Runtime on the same int8 file, batch 1 and 8, n = 128 and 512: zoo's
#     own export (zoo export --precision int8: per output column) and a file in ONNX Runtime's
#     quantize_dynamic form (its defaults: per tensor; written from the fp32 export by
#     onnx/testdata/gen_int8.py --quantize-dynamic, a re-implementation of quantize_dynamic), each
#     with zoo bench FILE --against onnxruntime (interleaved pairs, zoo/ORT = median of ORT time /
#     zoo time; zoo imports the file onto its int8 kernels).
#
# It writes one markdown file, FILE (default OUT/int8-PATH-tTHREADS.md, OUT docs/bench, PATH the
# CPU's best int8 path). THREADS (default 2) is for zoo parity and the ONNX Runtime rows; the
# paired speed-ups always run on 2 threads, the issue's figure.
#
#   scripts/int8-bench.sh
#   VARIANTS="vanilla gqa" PAIRS=12 ORT_REPS=20 scripts/int8-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="${VARIANTS:-vanilla gqa linformer alibi rope linear performer relbias nystrom sparse}"
THREADS="${THREADS:-2}" PAIRS="${PAIRS:-8}"
ORT_MODEL="${ORT_MODEL:-vanilla}" ORT_REPS="${ORT_REPS:-10}" OUT="${OUT:-docs/bench}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/zoo" ./cmd/zoo
go test -c -o "$tmp/cpu.test" ./backends/cpu
mkdir -p "$OUT"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
flags="$(grep -o -w -E 'avx2|avx512f|avx512_vnni|avx_vnni|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
path="$("$tmp/zoo" backends --json | /usr/bin/python3 -c 'import json,sys; print([b["int8"] for b in json.load(sys.stdin) if b["name"]=="cpu"][0])')"
load_before="$(uptime)"
f="${FILE:-$OUT/int8-$path-t$THREADS.md}"

# pairs NAME ENV VARIANTS writes BenchmarkBuiltinsInt8's lines for VARIANTS under ENV to $tmp/NAME.pairs
# (the test binary runs in its package's directory, where it finds registry.yaml).
pairs() {
  local re
  re="$(tr ' ' '|' <<<"$3")"
  (cd backends/cpu && env $2 "$tmp/cpu.test" -test.run '^$' -test.bench "BuiltinsInt8/($re)/" -test.benchtime "${PAIRS}x") \
    | grep '^BenchmarkBuiltinsInt8/' >"$tmp/$1.pairs"
}
for v in $VARIANTS; do
  for p in int8 int8-attention; do
    "$tmp/zoo" parity "$v" --precision "$p" --threads "$THREADS" --json >"$tmp/$v.$p.parity.json"
  done
  for p in fp32 int8; do
    "$tmp/zoo" bench "$v" --batch 1 --seq 16 --reps 1 --precision "$p" --json >"$tmp/$v.$p.weights.json"
  done
done
pairs best "" "$VARIANTS"
echo "int8-bench: $path done" >&2
# The other paths this CPU runs, each as NAME|ENV|VARIANTS: vnni512 where AMX is the best,
# and the AVX2 level where anything better is.
VNNI_VARIANTS="${VNNI_VARIANTS-$VARIANTS}"
AVX2_VARIANTS="${AVX2_VARIANTS-$VARIANTS}"
others=()
if [[ "$path" == "amx-int8" && -n "$VNNI_VARIANTS" ]]; then
  others+=("vnni512|ZOO_INT8=vnni512|$VNNI_VARIANTS")
fi
if [[ "$path" != "avx2" && "$path" != "generic" && -n "$AVX2_VARIANTS" ]]; then
  others+=("avx2|ZOO_CPU=avx2 ZOO_INT8=avx2|$AVX2_VARIANTS")
fi
for o in "${others[@]}"; do
  IFS='|' read -r name envs vs <<<"$o"
  for v in $vs; do
    for p in int8 int8-attention; do
      env $envs "$tmp/zoo" parity "$v" --precision "$p" --threads "$THREADS" --json >"$tmp/$name.$v.$p.parity.json"
    done
  done
  pairs "$name" "$envs" "$vs"
  echo "int8-bench: $envs done" >&2
done

"$tmp/zoo" export "$ORT_MODEL" --onnx --precision int8 -o "$tmp/zoo-int8.onnx" >/dev/null
"$tmp/zoo" export "$ORT_MODEL" --onnx -o "$tmp/fp32.onnx" >/dev/null
/usr/bin/python3 onnx/testdata/gen_int8.py --quantize-dynamic "$tmp/fp32.onnx" "$tmp/ort-int8.onnx"
for file in zoo-int8 ort-int8; do
  "$tmp/zoo" bench "$tmp/$file.onnx" --against onnxruntime --batch 1,8 --seq 128,512 --reps "$ORT_REPS" --threads "$THREADS" --json >"$tmp/$file.ort.json"
  echo "int8-bench: $file against onnxruntime done" >&2
done
load_after="$(uptime)"

/usr/bin/python3 - "$tmp" "$VARIANTS" "${others[@]}" >"$tmp/table" <<'PY'
import json, re, sys
tmp, variants = sys.argv[1], sys.argv[2].split()
others = [o.split("|") for o in sys.argv[3:]]
precs = ("fp32", "int8", "int8-attention")
def pairs(name):
    """{variant: {precision: (fp32 ms, ms, speed-up)}} from BenchmarkBuiltinsInt8's lines."""
    out = {}
    for line in open(f"{tmp}/{name}.pairs"):
        m = re.match(r"BenchmarkBuiltinsInt8/([^/]+)/([^/]+)/\S+\s+\d+\s+\d+ ns/op\s+([\d.]+) fp32-ms\s+([\d.]+) \S+-ms\s+([\d.]+) speedup", line)
        if m:
            out.setdefault(m[1], {})[m[2]] = (float(m[3]), float(m[4]), float(m[5]))
    return out
def cells(p):
    """fp32 ms (the int8 pairs'), then ms and speed-up of int8 and of int8-attention."""
    a, b = p["int8"], p["int8-attention"]
    return f"{a[0]:.0f} | {a[1]:.0f} | {a[2]:.2f}× | {b[1]:.0f} | {b[2]:.2f}×"
best = pairs("best")
print("| variant | fp32 ms | int8 ms | int8 speed-up | int8-attention ms | int8-attention speed-up | weights fp32 | weights int8 | int8/fp32 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for v in variants:
    wb = {p: json.load(open(f"{tmp}/{v}.{p}.weights.json"))["rows"][0].get("weight_bytes", 0) for p in ("fp32", "int8")}
    print(f"| {v} | {cells(best[v])} | {wb['fp32'] / 2**20:.1f} MiB | {wb['int8'] / 2**20:.1f} MiB | {wb['int8'] / wb['fp32']:.3f} |")
print()
print("| variant | precision | max rel. error | mean rel. error | min cosine | mean cosine |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for v in variants:
    for p in precs[1:]:
        par = json.load(open(f"{tmp}/{v}.{p}.parity.json"))
        print(f"| {v} | {p} | {par['max_rel_error']:.2e} | {par['mean_rel_error']:.2e} | {par['min_cosine']:.5f} | {par['mean_cosine']:.5f} |")
print()
about = {
    "vnni512": "On the vnni512 path (ZOO_INT8=vnni512: AVX512-VNNI, what a CPU without AMX runs; min cosine by zoo parity on that path):",
    "avx2": "At the avx2 kernel level on the avx2 int8 path (ZOO_CPU=avx2 ZOO_INT8=avx2: AVX2 and FMA only, what an AVX2-only CPU runs;\n"
            "the linear layers' weights in 7 bits, their inputs in 0…127; min cosine by zoo parity at that level):",
}
for name, envs, vs in others:
    print(about[name])
    print()
    print("| variant | fp32 ms | int8 ms | int8 speed-up | int8-attention ms | int8-attention speed-up | int8 min cosine | int8-attention min cosine |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ps = pairs(name)
    for v in vs.split():
        cos = {p: json.load(open(f"{tmp}/{name}.{v}.{p}.parity.json"))["min_cosine"] for p in precs[1:]}
        print(f"| {v} | {cells(ps[v])} | {cos['int8']:.5f} | {cos['int8-attention']:.5f} |")
    print()
print("| file | batch | n | zoo ms | ONNX Runtime ms | zoo/ORT |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for file, what in (("zoo-int8", "zoo export --precision int8 (per column)"), ("ort-int8", "ORT's quantize_dynamic form (per tensor)")):
    for r in json.load(open(f"{tmp}/{file}.ort.json"))["rows"]:
        print(f"| {what} | {r['batch']} | {r['n']} | {r['ms_mean']:.1f} | {r['ort_ms_mean']:.1f} | {r['zoo_over_ort']:.2f}× |")
PY
{
  echo "# int8 against fp32 and against ONNX Runtime on the CPU backend: $cpu, $THREADS thread(s)"
  echo
  echo "Written by scripts/int8-bench.sh on $(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores,"
  echo "CPU flags of note: ${flags:-none}; int8 path: $path."
  echo "Load before: \`$load_before\`; after: \`$load_after\`."
  echo
  echo "Speed: \`go test ./backends/cpu -run '^\$' -bench BuiltinsInt8 -benchtime ${PAIRS}x\` (base presets, batch 8, n = 512, 2 threads):"
  echo "fp32 and int8, and fp32 and int8-attention, paired run by run, $PAIRS pairs each; the ms are the medians of each side (fp32's"
  echo "from the int8 pairs), the speed-up the median of the pairs' ratios. Weights: the compiled program's constants (zoo bench's"
  echo "weight_bytes; int8-attention holds the same). Accuracy: \`zoo parity NAME --precision P --threads $THREADS\` (the"
  echo "sample text, 3 windows of 37, 29 and 11 tokens; random weights from --seed 0): the relative error of an element is"
  echo "|P − fp32| / max |fp32| of its position's vector; cosine is per position."
  echo
  echo "Against ONNX Runtime: \`zoo bench FILE --against onnxruntime --batch 1,8 --seq 128,512 --reps $ORT_REPS --threads $THREADS\`"
  echo "on $ORT_MODEL (base) exported by \`zoo export $ORT_MODEL --onnx --precision int8\`, and on its fp32 export rewritten by"
  echo "\`onnx/testdata/gen_int8.py --quantize-dynamic\` (ONNX Runtime's quantize_dynamic defaults: per-tensor int8 weights)."
  echo
  cat "$tmp/table"
} >"$f"
echo "int8-bench: wrote $f" >&2
