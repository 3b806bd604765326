#!/usr/bin/env bash
# bf16 on the CPU backend, every built-in variant: its accuracy against zoo's own fp32 run
# (zoo parity --precision bf16: max and mean relative error of `hidden`, per-position cosine)
# and its speed against fp32 (zoo bench, base preset, batch 8, n = 512 by default). fp32 and bf16
# are benched ROUNDS times each, alternating, and the speed-up is the ratio of the medians of
# the per-round means, so a shared machine's drift hits both sides. A benchmark, not a test:
# run it on a quiet machine. It writes one markdown file under OUT (docs/bench by default).
#
#   scripts/bench-bf16.sh
#   VARIANTS="vanilla gqa" BATCH=1 SEQ=128 ROUNDS=5 scripts/bench-bf16.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="${VARIANTS:-vanilla gqa linformer alibi rope linear performer relbias nystrom sparse}"
THREADS="${THREADS:-$(nproc)}" BATCH="${BATCH:-8}" SEQ="${SEQ:-512}" REPS="${REPS:-3}" ROUNDS="${ROUNDS:-2}" OUT="${OUT:-docs/bench}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/zoo" ./cmd/zoo
if ! "$tmp/zoo" backends --json | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if any(b["name"]=="cpu" and b["bf16"] for b in json.load(sys.stdin)) else 1)'; then
  echo "bench-bf16: this CPU has no bf16 path (zoo backends says why)" >&2
  exit 1
fi
mkdir -p "$OUT"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
slug="$(tr -cs 'A-Za-z0-9' '-' <<<"$cpu" | sed 's/-*$//' | tr 'A-Z' 'a-z')"
flags="$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
f="$tmp/bf16-$slug-t$THREADS.md"
for v in $VARIANTS; do
  "$tmp/zoo" parity "$v" --precision bf16 --threads "$THREADS" --json >"$tmp/$v.parity.json"
  for r in $(seq "$ROUNDS"); do
    for p in fp32 bf16; do
      "$tmp/zoo" bench "$v" --batch "$BATCH" --seq "$SEQ" --reps "$REPS" --threads "$THREADS" --precision "$p" --json >"$tmp/$v.$p.$r.json"
    done
  done
  echo "bench-bf16: $v done" >&2
done
/usr/bin/python3 - "$tmp" "$VARIANTS" "$ROUNDS" >"$tmp/table" <<'PY'
import json, statistics, sys
tmp, variants, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
print("| variant | fp32 ms | bf16 ms | bf16 speed-up | max rel. error | mean rel. error | min cosine | mean cosine |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for v in variants:
    par = json.load(open(f"{tmp}/{v}.parity.json"))
    ms = {p: statistics.median(json.load(open(f"{tmp}/{v}.{p}.{r}.json"))["rows"][0]["ms_mean"] for r in range(1, rounds + 1)) for p in ("fp32", "bf16")}
    print(f"| {v} | {ms['fp32']:.1f} | {ms['bf16']:.1f} | {ms['fp32'] / ms['bf16']:.2f}× | {par['max_rel_error']:.2e} | "
          f"{par['mean_rel_error']:.2e} | {par['min_cosine']:.7f} | {par['mean_cosine']:.7f} |")
PY
{
  echo "# bf16 against fp32 on the CPU backend: $cpu, $THREADS thread(s)"
  echo
  echo "Written by scripts/bench-bf16.sh on $(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD 2>/dev/null || echo '?');"
  echo "$(nproc) cores, CPU flags of note: ${flags:-none}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "bf16 path: $("$tmp/zoo" backends --json | /usr/bin/python3 -c 'import json,sys; print([b["bf16"] for b in json.load(sys.stdin) if b["name"]=="cpu"][0])')."
  echo
  echo "Speed: \`zoo bench NAME --batch $BATCH --seq $SEQ --reps $REPS --threads $THREADS --precision fp32|bf16\`, base presets,"
  echo "$ROUNDS alternating rounds each; the ms are the medians of the rounds' means, the speed-up their ratio."
  echo "Accuracy: \`zoo parity NAME --precision bf16 --threads $THREADS\` (its sample input, 3 windows of 37 tokens): the"
  echo "relative error of an element is |bf16 − fp32| / max |fp32| of its position's vector; cosine is per position."
  echo
  cat "$tmp/table"
} >"$f"
mv "$f" "$OUT/$(basename "$f")"
echo "bench-bf16: wrote $OUT/$(basename "$f")" >&2
