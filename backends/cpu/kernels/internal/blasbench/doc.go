// Package blasbench benchmarks kernels.Sgemm against OpenBLAS's cblas_sgemm on the same
// shapes. Everything is behind the blasbench build tag (and needs cgo and libopenblas-dev),
// so ordinary builds and tests never need OpenBLAS:
//
//	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
//	    go test -tags blasbench -run '^$' -bench . ./backends/cpu/kernels/internal/blasbench/
//
// Unset OPENBLAS_CORETYPE: these machines set it to Haswell, which forces OpenBLAS's AVX2
// kernels and halves its speed on AVX-512 CPUs, understating the reference.
package blasbench
