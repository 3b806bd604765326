// Package blasbench benchmarks kernels.Sgemm against OpenBLAS's cblas_sgemm on the same
// shapes. Everything is behind the blasbench build tag (and needs cgo and libopenblas-dev),
// so ordinary builds and tests never need OpenBLAS:
//
//	env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX OPENBLAS_THREAD_TIMEOUT=20 \
//	    go test -tags blasbench -run '^$' -bench GemmPaired -benchtime 30x ./backends/cpu/gemm/internal/blasbench/
//
// BenchmarkGemmPaired interleaves zoo and OpenBLAS call batches and reports the median ratio
// (blas/zoo above 1: zoo is faster); use it for verdicts. BenchmarkGemm times each in its own
// phase, which on a shared VM mostly measures the neighbours.
//
// The environment matters:
//   - OPENBLAS_CORETYPE picks OpenBLAS's kernel family: SkylakeX to compare with zoo's avx512
//     level, Haswell for its avx2 level. These machines set it to Haswell and set
//     OPENBLAS_L2_SIZE, which halves OpenBLAS's speed on AVX-512 CPUs; unset the latter.
//   - OPENBLAS_THREAD_TIMEOUT=20 lets OpenBLAS's idle threads spin for about 2^20 cycles
//     after a call instead of the default 2^28 (a tenth of a second). Without it, at two
//     threads its spinning workers take a core from the zoo batch that follows, and zoo
//     measures up to three times slower than it is. Back-to-back calls inside a batch
//     still find OpenBLAS's threads awake.
package blasbench
