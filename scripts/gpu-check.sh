#!/usr/bin/env bash
# gpu-check.sh — the checks of zoo's CUDA backend that need an NVIDIA GPU, in one script.
#
# The GPU machine has the driver, CUDA 13 (nvcc, cuBLAS, NVRTC in the CUDA Python wheels),
# PyTorch with CUDA and ONNX Runtime, but no Go: every Go binary is built here first, then
# carried.
#
#   1. Here (any Linux machine with Go and a C compiler; no CUDA needed):
#        scripts/gpu-check.sh build [DIR [--xz]]
#      builds into DIR (default .gpu-build, ignored through .git/info/exclude) the zoo binary
#      and the test binary of backends/cuda, stripped (about 42 MiB; with --xz built without
#      inlining and packed in one xz archive of about 9 MiB, which run unpacks), and copies
#      this script and scripts/gpu/*.py beside them, so DIR is all a run needs besides the
#      repository. (The device tool carries 64 MiB with the working tree; if one binary
#      is left out, run reports the steps that need it as not run.)
#      The per-variant GPU checks live in the test binary (it imports variants.Builtin()).
#   2. On the GPU machine, from the repository's root (registry.yaml, the seed's modules and
#      examples/text.txt are read from there), through the device tool:
#        run(command="bash .gpu-build/gpu-check.sh run", carry=[".gpu-build"], timeout_s=540)
#      or on any GPU machine with the repository checked out: bash scripts/gpu-check.sh run
#      The log is written to $OUT/gpu-check.log (./gpu-check.log when OUT is unset); every
#      step has its own time limit and the whole run stops starting steps after
#      GPU_CHECK_BUDGET seconds (default 360), so that it ends inside one device call.
#      GPU_CHECK_STEPS="nvrtc attention ..." runs only the steps named (default: all).
#
# What "run" checks, in order (each step is reported; the exit status is 1 if any failed):
#   env        nvidia-smi, nvcc, PyTorch, and where libcublas / libnvrtc are;
#   discover   `zoo backends` with no library path given: zoo finds the libraries itself;
#   backends   `zoo backends` lists the GPU (name, memory, compute capability, SMs, driver,
#              cuBLAS and NVRTC versions) and chooses it automatically;
#   nvrtc      NVRTC compiles kernels.cu afresh; every entry point loads; registers, shared
#              and local memory per kernel;
#   attention  the fused attention (tiled kernels at 32 and 64 features per head, the
#              per-row kernel otherwise, the fallback) against its unfused steps;
#   conformance  the shared backend conformance suite on CUDA (every op of the op table);
#   zoo-run    `zoo run vanilla --input examples/text.txt` with no flags runs on cuda and
#              matches --backend cpu within 1e-4;
#   parity     every built-in variant at tiny and base: CUDA fused and unfused against the CPU
#              within 1e-4, a second run bitwise equal;
#   bench-zoo / bench-torch  vanilla base, batch 32, n = 512 and 2048: zoo (fp32, tf32, bf16;
#              fused and unfused) and PyTorch eager and SDPA (fp32, bf16) on the same GPU;
#   precision  TF32 and bf16 against fp32 for every variant;
#   train      `zoo train vanilla.tiny --steps 3` on cuda, its losses against --backend cpu.
# The last lines are a table of the benchmark as ratios (PyTorch time / zoo time: above 1,
# zoo is faster).
set -u
self=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	local bin=${1:-.gpu-build}
	cd "$self/.."
	mkdir -p "$bin"
	case "$bin" in
	/*) ;;
	*)
		local exclude
		exclude=$(git rev-parse --git-path info/exclude)
		mkdir -p "$(dirname "$exclude")"
		grep -qxF "/$bin/" "$exclude" 2>/dev/null || echo "/$bin/" >>"$exclude"
		;;
	esac
	export CGO_ENABLED=1
	local gcflags=
	# --xz: the device tool carries at most 64 MiB with the working tree. Without inlining
	# the binaries are a tenth smaller (the GPU work does not notice), and xz with its x86
	# filter shrinks them about fourfold; run unpacks them to /tmp.
	[ "${2:-}" = "--xz" ] && gcflags=all=-l
	go build -trimpath -ldflags="-s -w" -gcflags="$gcflags" -o "$bin/zoo" ./cmd/zoo
	go test -c -trimpath -ldflags="-s -w" -gcflags="$gcflags" -o "$bin/cuda.test" ./backends/cuda
	cp scripts/gpu-check.sh scripts/gpu/*.py "$bin/"
	git rev-parse HEAD >"$bin/COMMIT" 2>/dev/null || true
	if [ "${2:-}" = "--xz" ]; then
		# One solid archive: the two binaries share most of their code, so together they
		# pack a tenth smaller than apart.
		tar -C "$bin" -cf - zoo cuda.test | xz -9e --x86 --lzma2=preset=9e,dict=128MiB -T1 >"$bin/bins.tar.xz"
		rm "$bin/zoo" "$bin/cuda.test"
	fi
	ls -la "$bin"
	du -sh "$bin"
}

# The steps' commands, exported to the bash -c of each step (they read BIN, ROOT, T, LIBDIRS).

# quiet drops the RUN and PASS lines of subtests from -test.v output (their logs stay).
quiet() { grep -vE '^ *(=== RUN|--- PASS: .*/|=== PAUSE|=== CONT)'; }

# gotest LIMIT PATTERN runs the CUDA test binary's tests matching PATTERN, verbosely.
gotest() {
	set -o pipefail
	cd "$ROOT/backends/cuda" && ZOO_GPU_TESTS=1 "$T" -test.v -test.timeout "${1}s" -test.run "$2" 2>&1 | quiet
}

chk_env() {
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
	nvcc --version | tail -2
	python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
	echo "library dirs: $LIBDIRS"
	for d in $(echo "$LIBDIRS" | tr : " "); do ls "$d"; done 2>/dev/null | grep -E '^lib(cublas|cublasLt|nvrtc|nvrtc-builtins)\.so' | sort -u | paste -sd" " -
	return 0
}

# chk_discover: with no library path given, zoo finds the CUDA libraries itself.
chk_discover() {
	env -u LD_LIBRARY_PATH -u ZOO_CUDA_LIB_PATH "$BIN/zoo" backends | tee /tmp/backends.txt
	grep -Eq '^cuda +available \(chosen\)' /tmp/backends.txt
}

chk_backends() {
	"$BIN/zoo" backends --json && "$BIN/zoo" backends | grep -Eq '^cuda +available \(chosen\)'
}

chk_conformance() {
	cd "$ROOT/backends/cuda" || return 1
	ZOO_GPU_TESTS=1 "$T" -test.v -test.timeout 170s -test.run 'TestRegistered|TestConformance' >/tmp/conformance.txt 2>&1
	local rc=$?
	grep -E -A4 '^\s*--- FAIL' /tmp/conformance.txt | head -200
	grep -E '^(ok|FAIL|PASS)|panic' /tmp/conformance.txt
	echo "conformance cases passed: $(grep -c -- '--- PASS: TestConformance/' /tmp/conformance.txt), failed: $(grep -c -- '--- FAIL: TestConformance/' /tmp/conformance.txt)"
	return $rc
}

chk_bench_zoo() { ZOO_GPU_BENCH=1 ZOO_GPU_BENCH_N=${GPU_BENCH_N:-512,2048} gotest 190 TestBenchVanilla; }

chk_bench_torch() {
	PYTHONUNBUFFERED=1 python3 "$BIN/bench_torch.py" --batch 32 --n "${GPU_BENCH_N:-512,2048}" --reps 10 --root "$ROOT"
}

# chk_zoo_run: zoo run with no flags chooses cuda, and agrees with --backend cpu.
chk_zoo_run() {
	cd "$ROOT" || return 1
	"$BIN/zoo" run vanilla --input examples/text.txt --output /tmp/gpu.json || return 1
	grep -Eq '"backend": *"cuda' /tmp/gpu.json || { echo "zoo run did not choose cuda"; return 1; }
	"$BIN/zoo" run vanilla --backend cpu --input examples/text.txt --output /tmp/cpu.json 2>/dev/null || return 1
	python3 "$BIN/compare_runs.py" /tmp/gpu.json /tmp/cpu.json
}

# chk_train: three training steps with no flags run on cuda (or are refused in one line),
# and their losses match --backend cpu.
chk_train() {
	cd /tmp || return 1
	"$BIN/zoo" train vanilla.tiny --steps 3 -i "$ROOT/examples/text.txt" -o /tmp/train-gpu.safetensors --json >/tmp/train-gpu.json
	local rc=$?
	cat /tmp/train-gpu.json
	[ $rc = 0 ] || return $rc
	"$BIN/zoo" train vanilla.tiny --steps 3 -i "$ROOT/examples/text.txt" -o /tmp/train-cpu.safetensors --backend cpu --json >/tmp/train-cpu.json || return 1
	python3 - <<'PY'
import json
g, c = (json.load(open(p)) for p in ("/tmp/train-gpu.json", "/tmp/train-cpu.json"))
print("train:", g["backend"], "losses", g["first_loss"], "->", g["final_loss"], f"({g['tokens_per_second']:.0f} tokens/s);",
      c["backend"], c["first_loss"], "->", c["final_loss"], f"({c['tokens_per_second']:.0f} tokens/s)")
assert g["backend"] == "cuda", "training did not run on cuda"
d = max(abs(g[k] - c[k]) for k in ("first_loss", "final_loss"))
print("max loss difference", d)
assert d < 1e-3, "losses differ"
PY
}

run() {
	set -o pipefail
	# The binaries: beside this script when build copied it there, else .gpu-build.
	local bin=${GPU_CHECK_BIN:-}
	if [ -z "$bin" ]; then
		if [ -e "$self/cuda.test" ] || [ -e "$self/zoo" ] || [ -e "$self/bins.tar.xz" ]; then bin=$self; else bin=$self/../.gpu-build; fi
	fi
	bin=$(cd "$bin" && pwd)
	if [ -f "$bin/bins.tar.xz" ] && [ ! -x "$bin/zoo" ] && [ ! -x "$bin/cuda.test" ]; then # packed by build --xz
		local unpacked=/tmp/zoo-gpu-bin
		mkdir -p "$unpacked"
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2], filter="fully_trusted")' "$bin/bins.tar.xz" "$unpacked"
		cp "$bin"/*.py "$bin"/COMMIT "$unpacked/" 2>/dev/null
		bin=$unpacked
	fi
	# The repository root: the current directory when it holds registry.yaml, else above.
	local root=$PWD
	[ -f "$root/registry.yaml" ] || root=$(cd "$self/.." && pwd)
	cd "$root"
	local out=${OUT:-.}
	local log="$out/gpu-check.log"
	: >"$log"
	local failed=() skipped=()
	local t0=$SECONDS budget=${GPU_CHECK_BUDGET:-360}
	step() { # step NAME TIMEOUT COMMAND [ARG...]: run with a time limit, log, remember failures
		local name=$1 limit=$2
		shift 2
		if { [[ $needs_zoo == *" $name "* ]] && [ ! -x "$BIN/zoo" ]; } || { [[ $needs_test == *" $name "* ]] && [ ! -x "$T" ]; }; then
			echo "=== $name: NOT RUN (its binary was not carried)" | tee -a "$log"
			skipped+=("$name")
			return
		fi
		if [ -n "${GPU_CHECK_STEPS:-}" ] && [[ " $GPU_CHECK_STEPS " != *" $name "* ]]; then
			echo "=== $name: not in GPU_CHECK_STEPS" | tee -a "$log"
			return
		fi
		if ((SECONDS - t0 + 10 > budget)); then
			echo "=== $name: SKIPPED (budget of ${budget}s used)" | tee -a "$log"
			skipped+=("$name")
			return
		fi
		local s=$SECONDS
		echo "=== $name (limit ${limit}s): $*" | tee -a "$log"
		if timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" 2>&1 | tee -a "$log"; then
			echo "=== $name: ok ($((SECONDS - s))s)" | tee -a "$log"
		else
			echo "=== $name: FAILED ($((SECONDS - s))s)" | tee -a "$log"
			failed+=("$name")
		fi
	}
	for f in bench_torch.py compare_runs.py; do
		[ -e "$bin/$f" ] || { echo "missing $bin/$f: run 'scripts/gpu-check.sh build' where Go is, and carry that folder" | tee -a "$log"; exit 2; }
	done
	[ -x "$bin/zoo" ] || [ -x "$bin/cuda.test" ] || { echo "neither $bin/zoo nor $bin/cuda.test: run 'scripts/gpu-check.sh build' where Go is, and carry that folder" | tee -a "$log"; exit 2; }
	# A call may carry only one of the two binaries: the steps that need the other are
	# reported as not run.
	local needs_zoo=" discover backends zoo-run train " needs_test=" nvrtc attention conformance parity bench-zoo precision "
	echo "gpu-check: binaries in $bin (commit $(cat "$bin/COMMIT" 2>/dev/null || echo unknown)), repository $root" | tee -a "$log"
	# Where the CUDA libraries are: the toolkit, or the nvidia-* Python wheels.
	local dirs
	dirs=$( {
		ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null
		python3 -c 'import glob, os, nvidia; [print(os.path.dirname(p)) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")]' 2>/dev/null
	} | sort -u | paste -sd: -)
	export BIN=$bin ROOT=$root LIBDIRS=$dirs T=$bin/cuda.test
	export XDG_CACHE_HOME=/tmp/zoo-cache-$$ # a fresh kernel cache: NVRTC compiles in this run
	export -f quiet gotest chk_env chk_discover chk_backends chk_conformance chk_zoo_run chk_train chk_bench_zoo chk_bench_torch

	step env 30 chk_env
	step discover 60 chk_discover
	export ZOO_CUDA_LIB_PATH=${ZOO_CUDA_LIB_PATH:-$dirs}
	step backends 60 chk_backends
	step nvrtc 120 gotest 110 'TestNVRTCCompilesEveryKernel|TestProbe$'
	step attention 120 gotest 110 TestFusedAttentionMatchesUnfused
	step conformance 180 chk_conformance
	step zoo-run 120 chk_zoo_run
	step parity 300 gotest 290 TestVariantsMatchCPU
	step bench-zoo 200 chk_bench_zoo
	step bench-torch 200 chk_bench_torch
	step precision 150 gotest 140 TestPrecisionModes
	step train 150 chk_train

	echo "=== summary" | tee -a "$log"
	python3 - "$log" <<'EOF' 2>&1 | tee -a "$log"
import re, sys
zoo, torch = {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"BENCH zoo n=(\d+) (\w+) (\w+): device ([\d.]+) ms/batch .*e2e ([\d.]+) ms", line)
    if m:
        zoo[(int(m[1]), m[2], m[3])] = (float(m[4]), float(m[5]))
    m = re.search(r"BENCH torch n=(\d+) ([\w-]+) (\w+): device ([\d.]+) ms/batch .*e2e ([\d.]+) ms", line)
    if m:
        torch[(int(m[1]), m[2], m[3])] = (float(m[4]), float(m[5]))
if zoo or torch:
    print("ratios: PyTorch ms / zoo ms (above 1: zoo is faster); device time (e2e time), vanilla base, batch 32")
    for (n, prec, mode), (zd, ze) in sorted(zoo.items()):
        cells = []
        for attn in ("eager", "sdpa", "sdpa-nomask"):
            t = torch.get((n, attn, prec))
            cells.append(f"{attn} {t[0] / zd:.2f} ({t[1] / ze:.2f})" if t else f"{attn} -")
        print(f"  n={n:<5} {prec} {mode:<8} zoo {zd:8.2f} ms (e2e {ze:8.2f}): " + ", ".join(cells))
EOF
	((${#skipped[@]})) && echo "SKIPPED: ${skipped[*]}" | tee -a "$log"
	if [ ${#failed[@]} -gt 0 ]; then
		echo "FAILED: ${failed[*]} (after $((SECONDS - t0))s)" | tee -a "$log"
		return 1
	fi
	echo "all GPU checks passed (after $((SECONDS - t0))s)" | tee -a "$log"
}

case "${1:-}" in
build) build "${2:-}" "${3:-}" ;;
run) run ;;
*)
	echo "usage: $0 build [DIR [--xz]] | run (see the header of this script)" >&2
	exit 2
	;;
esac
