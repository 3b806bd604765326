#!/usr/bin/env bash
# gpu-check.sh — the checks of zoo's CUDA backend that need an NVIDIA GPU.
#
# The GPU machine has the driver, CUDA 13 (nvcc, cuBLAS, NVRTC in the CUDA Python wheels)
# and PyTorch with CUDA, but no Go: every Go binary is built here first, then carried.
#
#   1. Here (any Linux machine with Go and a C compiler; no CUDA needed):
#        scripts/gpu-check.sh build
#      builds into .gpu-build/ (ignored through .git/info/exclude): the zoo binary and the
#      test binary of backends/cuda (about 28 MiB, stripped). The per-variant GPU checks live
#      in that binary (it imports variants.Builtin()); the variants' own test binaries only
#      exercise the CPU, so they are not carried (CI runs them).
#   2. On the GPU machine, through the device tool:
#        run(command="bash scripts/gpu-check.sh run", carry=[".gpu-build"], timeout_s=540)
#      or on any GPU machine with the repository checked out: bash scripts/gpu-check.sh run
#      The log is written to $OUT/gpu-check.log (or ./gpu-check.log when OUT is unset).
#
# What "run" checks, in order (each step is reported; the exit status is 1 if any failed):
#   a. the environment: nvidia-smi, nvcc, where libcublas / libnvrtc are (ZOO_CUDA_LIB_PATH);
#   b. `zoo backends`: the GPU is listed with name, memory, compute capability, driver,
#      cuBLAS and NVRTC versions, and is chosen automatically (the "chosen:" line says why);
#   c. the shared backend conformance suite on CUDA (TestConformance), probe and kernel tests;
#      with ZOO_GPU_TESTS=1 a missing GPU fails these tests instead of skipping them;
#   d. CUDA against the CPU reference for every built-in variant at the tiny and base presets
#      (TestVariantsMatchCPU, tolerance 1e-4), a second run of each program bitwise equal to
#      the first, and the TF32 / bf16 options (TestPrecisionModes);
#   e. `zoo run vanilla --input examples/text.txt` with no flags (must run on cuda) and with
#      --backend cpu, outputs compared;
#   f. the benchmark: vanilla base, batch 32, n=512, zoo on CUDA (fp32, tf32) against PyTorch
#      eager on the same GPU (scripts/gpu/bench_torch.py, the seed's modules).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bin=.gpu-build

build() {
	set -e
	mkdir -p "$bin"
	local exclude
	exclude=$(git rev-parse --git-path info/exclude)
	mkdir -p "$(dirname "$exclude")"
	grep -qxF "/$bin/" "$exclude" 2>/dev/null || echo "/$bin/" >>"$exclude"
	export CGO_ENABLED=1
	go build -trimpath -ldflags="-s -w" -o "$bin/zoo" ./cmd/zoo
	go test -c -trimpath -ldflags="-s -w" -o "$bin/cuda.test" ./backends/cuda
	ls -la "$bin"
	du -sh "$bin"
}

# zoo_run_check runs the CLI with no backend flag (must pick cuda) and with --backend cpu,
# and compares the two outputs on valid positions.
zoo_run_check() {
	"$bin/zoo" run vanilla --input examples/text.txt --output /tmp/gpu.json || return 1
	grep -Eq '"backend": *"cuda' /tmp/gpu.json || { echo "zoo run did not choose cuda"; return 1; }
	"$bin/zoo" run vanilla --backend cpu --input examples/text.txt --output /tmp/cpu.json || return 1
	python3 scripts/gpu/compare_runs.py /tmp/gpu.json /tmp/cpu.json
}

run() {
	set -o pipefail
	local out=${OUT:-.}
	local log="$out/gpu-check.log"
	: >"$log"
	local failed=()
	step() { # step NAME COMMAND...: run, log, remember failures
		local name=$1
		shift
		echo "=== $name: $*" | tee -a "$log"
		if (eval "$@") 2>&1 | tee -a "$log"; then
			echo "=== $name: ok" | tee -a "$log"
		else
			echo "=== $name: FAILED" | tee -a "$log"
			failed+=("$name")
		fi
	}
	for f in zoo cuda.test; do
		[ -x "$bin/$f" ] || { echo "missing $bin/$f: run 'scripts/gpu-check.sh build' where Go is, and carry $bin" | tee -a "$log"; exit 2; }
	done
	# Where the CUDA libraries are: the toolkit, or the nvidia-* Python wheels.
	local dirs
	dirs=$( { ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null
		python3 -c 'import glob, os, nvidia; [print(os.path.dirname(p)) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")]' 2>/dev/null
		} | sort -u | paste -sd: -)
	export ZOO_CUDA_LIB_PATH=${ZOO_CUDA_LIB_PATH:-$dirs}
	export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/zoo-cache}

	step env 'nvidia-smi -L; nvcc --version | tail -2; echo "ZOO_CUDA_LIB_PATH=$ZOO_CUDA_LIB_PATH"; ls $(echo $ZOO_CUDA_LIB_PATH | tr : " ") 2>/dev/null | grep -E "^lib(cublas|cublasLt|nvrtc)\.so" | sort -u'
	step backends "$bin/zoo backends && $bin/zoo backends | grep -q '^cuda .*available (chosen)'"
	step conformance "cd backends/cuda && ZOO_GPU_TESTS=1 ../../$bin/cuda.test -test.v -test.run 'TestProbe|TestRegistered|TestConformance|TestKernelsParse' 2>&1 | grep -vE '^(=== RUN|    --- PASS)'"
	step parity "cd backends/cuda && ZOO_GPU_TESTS=1 ../../$bin/cuda.test -test.v -test.timeout 8m -test.run 'TestVariantsMatchCPU|TestPrecisionModes'"
	step zoo-run zoo_run_check
	step bench-zoo "cd backends/cuda && ZOO_GPU_TESTS=1 ../../$bin/cuda.test -test.run '^\$' -test.bench BenchmarkVanillaBase -test.benchtime 10x"
	step bench-torch "python3 scripts/gpu/bench_torch.py --batch 32 --n 512 --reps 20"
	if [ ${#failed[@]} -gt 0 ]; then
		echo "FAILED: ${failed[*]}" | tee -a "$log"
		return 1
	fi
	echo "all GPU checks passed" | tee -a "$log"
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build|run (see the header of this script)" >&2
	exit 2
	;;
esac
