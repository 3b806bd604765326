//go:build cgo && linux

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <stddef.h>

// The few CUDA driver, cuBLAS and NVRTC declarations the backend needs, written here so
// that zoo builds without the CUDA toolkit; the libraries are loaded with dlopen at run
// time. Values are from the CUDA 12/13 headers (cuda.h, cublas_api.h, nvrtc.h).
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct CUstream_st* CUstream;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef int nvrtcResult;
typedef struct _nvrtcProgram* nvrtcProgram;
typedef int cublasStatus_t;
typedef struct cublasContext* cublasHandle_t;

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int*);
static CUresult (*p_cuDeviceGetCount)(int*);
static CUresult (*p_cuDeviceGet)(CUdevice*, int);
static CUresult (*p_cuDeviceGetName)(char*, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem_v2)(size_t*, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int*, int, CUdevice);
static CUresult (*p_cuGetErrorName)(CUresult, const char**);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease_v2)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemAlloc_v2)(CUdeviceptr*, size_t);
static CUresult (*p_cuMemFree_v2)(CUdeviceptr);
static CUresult (*p_cuMemHostAlloc)(void**, size_t, unsigned int);
static CUresult (*p_cuMemFreeHost)(void*);
static CUresult (*p_cuMemcpyHtoD_v2)(CUdeviceptr, const void*, size_t);
static CUresult (*p_cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void*, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync_v2)(void*, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuStreamCreate)(CUstream*, unsigned int);
static CUresult (*p_cuStreamDestroy_v2)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuModuleLoadData)(CUmodule*, const void*);
static CUresult (*p_cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**);
static CUresult (*p_cuFuncGetAttribute)(int*, int, CUfunction);

static nvrtcResult (*p_nvrtcVersion)(int*, int*);
static nvrtcResult (*p_nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
static nvrtcResult (*p_nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
static nvrtcResult (*p_nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
static nvrtcResult (*p_nvrtcGetProgramLog)(nvrtcProgram, char*);
static nvrtcResult (*p_nvrtcGetPTXSize)(nvrtcProgram, size_t*);
static nvrtcResult (*p_nvrtcGetPTX)(nvrtcProgram, char*);
static nvrtcResult (*p_nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
static nvrtcResult (*p_nvrtcGetCUBIN)(nvrtcProgram, char*);
static nvrtcResult (*p_nvrtcDestroyProgram)(nvrtcProgram*);
static const char* (*p_nvrtcGetErrorString)(nvrtcResult);

static cublasStatus_t (*p_cublasCreate_v2)(cublasHandle_t*);
static cublasStatus_t (*p_cublasDestroy_v2)(cublasHandle_t);
static cublasStatus_t (*p_cublasSetStream_v2)(cublasHandle_t, CUstream);
static cublasStatus_t (*p_cublasSetMathMode)(cublasHandle_t, int);
static cublasStatus_t (*p_cublasGetProperty)(int, int*);
static cublasStatus_t (*p_cublasSgemmStridedBatched)(cublasHandle_t, int, int, int, int, int, const float*,
	const float*, int, long long, const float*, int, long long, const float*, float*, int, long long, int);
static cublasStatus_t (*p_cublasGemmStridedBatchedEx)(cublasHandle_t, int, int, int, int, int, const void*,
	const void*, int, int, long long, const void*, int, int, long long, const void*, void*, int, int, long long, int, int, int);

#define ZLOAD(h, name) do { *(void**)(&p_##name) = dlsym(h, #name); if (!p_##name) return #name; } while (0)
#define ZLOADOPT(h, name) do { *(void**)(&p_##name) = dlsym(h, #name); } while (0)

static const char* z_bind_cuda(void* h) {
	ZLOAD(h, cuInit); ZLOAD(h, cuDriverGetVersion); ZLOAD(h, cuDeviceGetCount); ZLOAD(h, cuDeviceGet);
	ZLOAD(h, cuDeviceGetName); ZLOAD(h, cuDeviceTotalMem_v2); ZLOAD(h, cuDeviceGetAttribute);
	ZLOAD(h, cuGetErrorName); ZLOAD(h, cuDevicePrimaryCtxRetain); ZLOAD(h, cuDevicePrimaryCtxRelease_v2);
	ZLOAD(h, cuCtxSetCurrent); ZLOAD(h, cuMemAlloc_v2); ZLOAD(h, cuMemFree_v2); ZLOAD(h, cuMemHostAlloc);
	ZLOAD(h, cuMemFreeHost); ZLOAD(h, cuMemcpyHtoD_v2); ZLOAD(h, cuMemcpyHtoDAsync_v2); ZLOAD(h, cuMemcpyDtoHAsync_v2);
	ZLOAD(h, cuStreamCreate); ZLOAD(h, cuStreamDestroy_v2); ZLOAD(h, cuStreamSynchronize);
	ZLOAD(h, cuModuleLoadData); ZLOAD(h, cuModuleGetFunction); ZLOAD(h, cuLaunchKernel);
	ZLOADOPT(h, cuFuncGetAttribute);
	return NULL;
}

static const char* z_bind_nvrtc(void* h) {
	ZLOAD(h, nvrtcVersion); ZLOAD(h, nvrtcCreateProgram); ZLOAD(h, nvrtcCompileProgram);
	ZLOAD(h, nvrtcGetProgramLogSize); ZLOAD(h, nvrtcGetProgramLog); ZLOAD(h, nvrtcGetPTXSize); ZLOAD(h, nvrtcGetPTX);
	ZLOAD(h, nvrtcDestroyProgram); ZLOAD(h, nvrtcGetErrorString);
	ZLOADOPT(h, nvrtcGetCUBINSize); ZLOADOPT(h, nvrtcGetCUBIN);
	return NULL;
}

static const char* z_bind_cublas(void* h) {
	ZLOAD(h, cublasCreate_v2); ZLOAD(h, cublasDestroy_v2); ZLOAD(h, cublasSetStream_v2); ZLOAD(h, cublasSetMathMode);
	ZLOAD(h, cublasGetProperty); ZLOAD(h, cublasSgemmStridedBatched); ZLOAD(h, cublasGemmStridedBatchedEx);
	return NULL;
}

static void* z_dlopen(const char* path) { return dlopen(path, RTLD_NOW | RTLD_GLOBAL); }
static const char* z_dlerror(void) { return dlerror(); }

static CUresult z_cuInit(void) { return p_cuInit(0); }
static CUresult z_cuDriverGetVersion(int* v) { return p_cuDriverGetVersion(v); }
static CUresult z_cuDeviceGetCount(int* n) { return p_cuDeviceGetCount(n); }
static CUresult z_cuDeviceGet(CUdevice* d, int i) { return p_cuDeviceGet(d, i); }
static CUresult z_cuDeviceGetName(char* s, int n, CUdevice d) { return p_cuDeviceGetName(s, n, d); }
static CUresult z_cuDeviceTotalMem(size_t* b, CUdevice d) { return p_cuDeviceTotalMem_v2(b, d); }
static CUresult z_cuDeviceGetAttribute(int* v, int a, CUdevice d) { return p_cuDeviceGetAttribute(v, a, d); }
static const char* z_cuErrorName(CUresult r) {
	const char* s = NULL;
	if (p_cuGetErrorName == NULL || p_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}
static CUresult z_cuPrimaryCtxRetain(CUcontext* c, CUdevice d) { return p_cuDevicePrimaryCtxRetain(c, d); }
static CUresult z_cuCtxSetCurrent(CUcontext c) { return p_cuCtxSetCurrent(c); }
static CUresult z_cuMemAlloc(CUdeviceptr* p, size_t n) { return p_cuMemAlloc_v2(p, n); }
static CUresult z_cuMemFree(CUdeviceptr p) { return p_cuMemFree_v2(p); }
static CUresult z_cuMemHostAlloc(void** p, size_t n) { return p_cuMemHostAlloc(p, n, 0); }
static CUresult z_cuMemFreeHost(void* p) { return p_cuMemFreeHost(p); }
static CUresult z_cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) { return p_cuMemcpyHtoD_v2(d, s, n); }
static CUresult z_cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream st) { return p_cuMemcpyHtoDAsync_v2(d, s, n, st); }
static CUresult z_cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream st) { return p_cuMemcpyDtoHAsync_v2(d, s, n, st); }
static CUresult z_cuStreamCreate(CUstream* s) { return p_cuStreamCreate(s, 0); }
static CUresult z_cuStreamDestroy(CUstream s) { return p_cuStreamDestroy_v2(s); }
static CUresult z_cuStreamSynchronize(CUstream s) { return p_cuStreamSynchronize(s); }
static CUresult z_cuModuleLoadData(CUmodule* m, const void* img) { return p_cuModuleLoadData(m, img); }
static CUresult z_cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) { return p_cuModuleGetFunction(f, m, name); }
static CUresult z_cuFuncGetAttribute(int* v, int attr, CUfunction f) {
	if (p_cuFuncGetAttribute == NULL) return 500; // CUDA_ERROR_NOT_FOUND
	return p_cuFuncGetAttribute(v, attr, f);
}

// z_launch passes the arguments packed in buf at offs (cuLaunchKernel copies them).
static CUresult z_launch(CUfunction f, unsigned gx, unsigned bx, unsigned shmem, CUstream s, char* buf, int* offs, int n) {
	void* params[32];
	if (n > 32) return 1;
	for (int i = 0; i < n; i++) params[i] = buf + offs[i];
	return p_cuLaunchKernel(f, gx, 1, 1, bx, 1, 1, shmem, s, params, NULL);
}

static int z_nvrtcVersion(int* major, int* minor) { return p_nvrtcVersion(major, minor); }
static const char* z_nvrtcError(nvrtcResult r) { return p_nvrtcGetErrorString(r); }
static int z_hasCubin(void) { return p_nvrtcGetCUBINSize != NULL && p_nvrtcGetCUBIN != NULL; }

// z_nvrtc compiles src; on success *out (malloc'd, caller frees) holds CUBIN (cubin=1) or
// PTX. *log (malloc'd or NULL) holds the compiler log.
static nvrtcResult z_nvrtc(const char* src, const char* name, const char** opts, int nopts, int cubin,
                           char** out, size_t* outLen, char** log) {
	nvrtcProgram prog;
	*out = NULL; *log = NULL; *outLen = 0;
	nvrtcResult r = p_nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
	if (r != 0) return r;
	nvrtcResult cr = p_nvrtcCompileProgram(prog, nopts, opts);
	size_t ls = 0;
	if (p_nvrtcGetProgramLogSize(prog, &ls) == 0 && ls > 1) {
		*log = (char*)malloc(ls);
		if (*log && p_nvrtcGetProgramLog(prog, *log) != 0) { free(*log); *log = NULL; }
	}
	if (cr != 0) { p_nvrtcDestroyProgram(&prog); return cr; }
	size_t n = 0;
	r = cubin ? p_nvrtcGetCUBINSize(prog, &n) : p_nvrtcGetPTXSize(prog, &n);
	if (r == 0) {
		*out = (char*)malloc(n);
		r = cubin ? p_nvrtcGetCUBIN(prog, *out) : p_nvrtcGetPTX(prog, *out);
		*outLen = n;
	}
	p_nvrtcDestroyProgram(&prog);
	return r;
}

static int z_cublasCreate(cublasHandle_t* h) { return p_cublasCreate_v2(h); }
static int z_cublasDestroy(cublasHandle_t h) { return p_cublasDestroy_v2(h); }
static int z_cublasSetStream(cublasHandle_t h, CUstream s) { return p_cublasSetStream_v2(h, s); }
static int z_cublasSetMathMode(cublasHandle_t h, int m) { return p_cublasSetMathMode(h, m); }
static int z_cublasGetProperty(int which, int* v) { return p_cublasGetProperty(which, v); }

// z_sgemm is cublasSgemmStridedBatched (column-major) with host-side alpha and beta.
static int z_sgemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                   CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb,
                   float beta, CUdeviceptr c, int ldc, long long sc, int batch) {
	return p_cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, (const float*)a, lda, sa, (const float*)b, ldb, sb,
	                                   &beta, (float*)c, ldc, sc, batch);
}

// z_gemmEx is cublasGemmStridedBatchedEx with A and B of type ab (CUDA_R_32F = 0,
// CUDA_R_16BF = 14), C fp32, the given compute type (CUBLAS_COMPUTE_32F = 68,
// CUBLAS_COMPUTE_32F_FAST_16BF = 75, CUBLAS_COMPUTE_32F_FAST_TF32 = 77) and the default
// algorithm (CUBLAS_GEMM_DEFAULT = -1).
static int z_gemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                    CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb,
                    float beta, CUdeviceptr c, int ldc, long long sc, int batch, int compute, int ab) {
	return p_cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, (const void*)a, ab, lda, sa, (const void*)b, ab, ldb, sb,
	                                    &beta, (void*)c, 0, ldc, sc, batch, compute, -1);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// CUDA constants used below (from cuda.h and cublas_api.h).
const (
	attrComputeMajor = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeMinor = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	attrSMCount      = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

	cublasOpN = 0
	cublasOpT = 1

	cublasDefaultMath = 0
	cublasTF32Math    = 3 // CUBLAS_TF32_TENSOR_OP_MATH

	cublasCompute32F = 68 // CUBLAS_COMPUTE_32F
	cudaR16BF        = 14 // CUDA_R_16BF

	propMajor = 0 // MAJOR_VERSION (libraryPropertyType)
	propMinor = 1
	propPatch = 2

	cudaErrorOutOfMemory = 2
)

// driverResultNames covers the results seen most often, for when cuGetErrorName is absent.
var driverResultNames = map[int]string{
	1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
	4: "CUDA_ERROR_DEINITIALIZED", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	304: "CUDA_ERROR_OPERATING_SYSTEM", 400: "CUDA_ERROR_INVALID_HANDLE", 500: "CUDA_ERROR_NOT_FOUND",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 719: "CUDA_ERROR_LAUNCH_FAILED",
	801: "CUDA_ERROR_NOT_SUPPORTED", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	999: "CUDA_ERROR_UNKNOWN",
}

// cuErr is a failed CUDA driver call.
type cuErr struct {
	call string
	code int
}

func (e *cuErr) Error() string {
	name := ""
	if s := C.z_cuErrorName(C.CUresult(e.code)); s != nil {
		name = C.GoString(s)
	} else if n, ok := driverResultNames[e.code]; ok {
		name = n
	} else {
		name = fmt.Sprintf("CUresult %d", e.code)
	}
	return e.call + " failed: " + name
}

// check turns a CUresult into an error naming the call.
func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return &cuErr{call: call, code: int(r)}
}

// blasErr turns a cublasStatus_t into an error naming the call.
func blasErr(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	names := map[int]string{1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
		8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
		14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}
	name, ok := names[int(r)]
	if !ok {
		name = fmt.Sprintf("cublasStatus %d", int(r))
	}
	return fmt.Errorf("%s failed: %s", call, name)
}

// dlopenAny tries each candidate path in order and returns the first handle, the path that
// loaded, and the last dlerror otherwise.
func dlopenAny(cands []string) (unsafe.Pointer, string, string) {
	last := ""
	for _, p := range cands {
		cs := C.CString(p)
		h := C.z_dlopen(cs)
		C.free(unsafe.Pointer(cs))
		if h != nil {
			return h, p, ""
		}
		if e := C.z_dlerror(); e != nil {
			last = C.GoString(e)
		}
	}
	return nil, "", last
}

// bind resolves the symbols of one library; it returns the first missing symbol's name.
func bindCUDA(h unsafe.Pointer) string   { return goStr(C.z_bind_cuda(h)) }
func bindNVRTC(h unsafe.Pointer) string  { return goStr(C.z_bind_nvrtc(h)) }
func bindCUBLAS(h unsafe.Pointer) string { return goStr(C.z_bind_cublas(h)) }

func goStr(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// Go wrappers over the loaded entry points. Handles are opaque pointers; device memory is
// a uint64 (CUdeviceptr).

type (
	cuContext  = C.CUcontext
	cuStream   = C.CUstream
	cuModule   = C.CUmodule
	cuFunction = C.CUfunction
	blasHandle = C.cublasHandle_t
)

func cuInit() error { return check("cuInit", C.z_cuInit()) }
func cuDriverVersion() (int, error) {
	var v C.int
	err := check("cuDriverGetVersion", C.z_cuDriverGetVersion(&v))
	return int(v), err
}

func cuDeviceCount() (int, error) {
	var n C.int
	err := check("cuDeviceGetCount", C.z_cuDeviceGetCount(&n))
	return int(n), err
}

func cuDevice(ordinal int) (int, error) {
	var d C.CUdevice
	err := check("cuDeviceGet", C.z_cuDeviceGet(&d, C.int(ordinal)))
	return int(d), err
}

func cuDeviceName(d int) (string, error) {
	buf := (*C.char)(C.malloc(256))
	defer C.free(unsafe.Pointer(buf))
	if err := check("cuDeviceGetName", C.z_cuDeviceGetName(buf, 256, C.CUdevice(d))); err != nil {
		return "", err
	}
	return C.GoString(buf), nil
}

func cuDeviceMem(d int) (uint64, error) {
	var n C.size_t
	err := check("cuDeviceTotalMem", C.z_cuDeviceTotalMem(&n, C.CUdevice(d)))
	return uint64(n), err
}

func cuAttr(d, attr int) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.z_cuDeviceGetAttribute(&v, C.int(attr), C.CUdevice(d)))
	return int(v), err
}

func cuPrimaryCtx(d int) (cuContext, error) {
	var c C.CUcontext
	err := check("cuDevicePrimaryCtxRetain", C.z_cuPrimaryCtxRetain(&c, C.CUdevice(d)))
	return c, err
}

func cuSetCurrent(c cuContext) error { return check("cuCtxSetCurrent", C.z_cuCtxSetCurrent(c)) }

func cuMalloc(n int) (uint64, error) {
	var p C.CUdeviceptr
	err := check(fmt.Sprintf("cuMemAlloc(%d bytes)", n), C.z_cuMemAlloc(&p, C.size_t(n)))
	return uint64(p), err
}

func isOOM(err error) bool {
	e, ok := err.(*cuErr)
	return ok && e.code == cudaErrorOutOfMemory
}

func cuFree(p uint64) error { return check("cuMemFree", C.z_cuMemFree(C.CUdeviceptr(p))) }

func cuHostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check(fmt.Sprintf("cuMemHostAlloc(%d bytes)", n), C.z_cuMemHostAlloc(&p, C.size_t(n)))
	return p, err
}

func cuFreeHost(p unsafe.Pointer) error { return check("cuMemFreeHost", C.z_cuMemFreeHost(p)) }

// cuCopyHtoD copies synchronously from Go memory (used for weights at Compile).
func cuCopyHtoD(dst uint64, src unsafe.Pointer, n int) error {
	return check("cuMemcpyHtoD", C.z_cuMemcpyHtoD(C.CUdeviceptr(dst), src, C.size_t(n)))
}

// cuCopyHtoDAsync copies from pinned memory on stream s.
func cuCopyHtoDAsync(dst uint64, src unsafe.Pointer, n int, s cuStream) error {
	return check("cuMemcpyHtoDAsync", C.z_cuMemcpyHtoDAsync(C.CUdeviceptr(dst), src, C.size_t(n), s))
}

// cuCopyDtoHAsync copies to pinned memory on stream s.
func cuCopyDtoHAsync(dst unsafe.Pointer, src uint64, n int, s cuStream) error {
	return check("cuMemcpyDtoHAsync", C.z_cuMemcpyDtoHAsync(dst, C.CUdeviceptr(src), C.size_t(n), s))
}

func cuNewStream() (cuStream, error) {
	var s C.CUstream
	err := check("cuStreamCreate", C.z_cuStreamCreate(&s))
	return s, err
}

func cuDestroyStream(s cuStream) error { return check("cuStreamDestroy", C.z_cuStreamDestroy(s)) }
func cuSync(s cuStream) error          { return check("cuStreamSynchronize", C.z_cuStreamSynchronize(s)) }

func cuLoadModule(img []byte) (cuModule, error) {
	// cuModuleLoadData reads a NUL-terminated PTX string or a CUBIN image from C memory.
	cimg := C.CBytes(append(img, 0))
	defer C.free(cimg)
	var m C.CUmodule
	err := check("cuModuleLoadData", C.z_cuModuleLoadData(&m, cimg))
	return m, err
}

func cuFunc(m cuModule, name string) (cuFunction, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	err := check("cuModuleGetFunction("+name+")", C.z_cuModuleGetFunction(&f, m, cs))
	return f, err
}

// Function attributes (CUfunction_attribute) for cuFuncAttr.
const (
	funcMaxThreads   = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	funcSharedBytes  = 1 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static)
	funcLocalBytes   = 3 // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES (per thread: spills and local arrays)
	funcNumRegisters = 4 // CU_FUNC_ATTRIBUTE_NUM_REGS
)

// cuFuncAttr reads one attribute of a loaded kernel.
func cuFuncAttr(f cuFunction, attr int) (int, error) {
	var v C.int
	err := check("cuFuncGetAttribute", C.z_cuFuncGetAttribute(&v, C.int(attr), f))
	return int(v), err
}

// cuLaunch launches f with a 1-D grid; args holds the packed parameters at offs.
func cuLaunch(f cuFunction, name string, grid, block, shmem int, s cuStream, args []byte, offs []int32) error {
	if len(offs) == 0 {
		return fmt.Errorf("launch %s: no arguments", name)
	}
	r := C.z_launch(f, C.uint(grid), C.uint(block), C.uint(shmem), s,
		(*C.char)(unsafe.Pointer(&args[0])), (*C.int)(unsafe.Pointer(&offs[0])), C.int(len(offs)))
	return check("cuLaunchKernel("+name+")", r)
}

func nvrtcVersion() (int, int, error) {
	var a, b C.int
	if r := C.z_nvrtcVersion(&a, &b); r != 0 {
		return 0, 0, fmt.Errorf("nvrtcVersion failed: %d", int(r))
	}
	return int(a), int(b), nil
}

func nvrtcHasCubin() bool { return C.z_hasCubin() != 0 }

// nvrtcCompile compiles src with opts and returns the CUBIN (cubin) or PTX image and the log.
func nvrtcCompile(src, name string, opts []string, cubin bool) ([]byte, string, error) {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	copts := C.malloc(C.size_t(len(opts)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(copts)
	optv := unsafe.Slice((**C.char)(copts), len(opts)+1)
	for i, o := range opts {
		optv[i] = C.CString(o)
		defer C.free(unsafe.Pointer(optv[i]))
	}
	var out, logp *C.char
	var n C.size_t
	cb := C.int(0)
	if cubin {
		cb = 1
	}
	r := C.z_nvrtc(csrc, cname, (**C.char)(copts), C.int(len(opts)), cb, &out, &n, &logp)
	log := ""
	if logp != nil {
		log = C.GoString(logp)
		C.free(unsafe.Pointer(logp))
	}
	if r != 0 {
		if out != nil {
			C.free(unsafe.Pointer(out))
		}
		return nil, log, fmt.Errorf("NVRTC: %s", C.GoString(C.z_nvrtcError(r)))
	}
	img := C.GoBytes(unsafe.Pointer(out), C.int(n))
	C.free(unsafe.Pointer(out))
	return img, log, nil
}

func cublasCreate() (blasHandle, error) {
	var h C.cublasHandle_t
	err := blasErr("cublasCreate", C.z_cublasCreate(&h))
	return h, err
}

func cublasDestroy(h blasHandle) error { return blasErr("cublasDestroy", C.z_cublasDestroy(h)) }
func cublasSetStream(h blasHandle, s cuStream) error {
	return blasErr("cublasSetStream", C.z_cublasSetStream(h, s))
}
func cublasSetMathMode(h blasHandle, m int) error {
	return blasErr("cublasSetMathMode", C.z_cublasSetMathMode(h, C.int(m)))
}

// cublasVersion returns "major.minor.patch" from cublasGetProperty.
func cublasVersion() (int, string) {
	var a, b, c C.int
	if C.z_cublasGetProperty(propMajor, &a) != 0 || C.z_cublasGetProperty(propMinor, &b) != 0 || C.z_cublasGetProperty(propPatch, &c) != 0 {
		return 0, "unknown"
	}
	return int(a), fmt.Sprintf("%d.%d.%d", int(a), int(b), int(c))
}

// gemmArgs is one column-major strided-batched GEMM: C = alpha·op(A)·op(B) + beta·C.
type gemmArgs struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        uint64
	lda, ldb, ldc  int
	sa, sb, sc     int64
	batch          int
	computeType    int  // 0: cublasSgemmStridedBatched; else cublasGemmStridedBatchedEx compute type
	bf16           bool // A and B hold bf16 (CUDA_R_16BF); C stays fp32
}

func cublasGemm(h blasHandle, g gemmArgs) error {
	op := func(t bool) C.int {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	if g.computeType != 0 {
		ab := 0
		if g.bf16 {
			ab = cudaR16BF
		}
		return blasErr("cublasGemmStridedBatchedEx", C.z_gemmEx(h, op(g.transA), op(g.transB), C.int(g.m), C.int(g.n), C.int(g.k),
			C.float(g.alpha), C.CUdeviceptr(g.a), C.int(g.lda), C.longlong(g.sa), C.CUdeviceptr(g.b), C.int(g.ldb), C.longlong(g.sb),
			C.float(g.beta), C.CUdeviceptr(g.c), C.int(g.ldc), C.longlong(g.sc), C.int(g.batch), C.int(g.computeType), C.int(ab)))
	}
	return blasErr("cublasSgemmStridedBatched", C.z_sgemm(h, op(g.transA), op(g.transB), C.int(g.m), C.int(g.n), C.int(g.k),
		C.float(g.alpha), C.CUdeviceptr(g.a), C.int(g.lda), C.longlong(g.sa), C.CUdeviceptr(g.b), C.int(g.ldb), C.longlong(g.sb),
		C.float(g.beta), C.CUdeviceptr(g.c), C.int(g.ldc), C.longlong(g.sc), C.int(g.batch)))
}
