// cuda_prelude.h: just enough declarations for g++ -fsyntax-only to parse kernels.cu as
// C++ (see TestKernelsParse). It is not used to build or run anything.
#include <math.h>
#define __global__
#define __device__
#define __shared__
#define __forceinline__ inline
struct zoo_dim3 { unsigned x, y, z; };
extern zoo_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline float __int_as_float(int i) { float f; __builtin_memcpy(&f, &i, 4); return f; }
inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
inline void __syncthreads() {}
#define __launch_bounds__(...)
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline unsigned __float_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
#define ZOO_EMULATE 1
inline void zoo_mma_bf16(float*, const unsigned*, unsigned, unsigned) {}
inline float __expf(float x) { return expf(x); }
