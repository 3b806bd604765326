// cuda_emul.h: a CPU stand-in for the CUDA execution model, so that kernels.cu runs under
// g++ (TestKernelsEmulated). Each block runs on blockDim.x OS threads; __syncthreads is a
// barrier of the block's threads, __shfl_xor_sync one of the warp's 32 threads; __shared__
// variables are statics, which is right because blocks run one after another. It checks
// the kernels' logic (indexing, tiling, reductions, barriers in the right places), not
// their speed, and not what only a GPU does (memory model, occupancy, NVRTC's compiler).
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct zoo_dim3 {
    unsigned x, y, z;
};
inline thread_local zoo_dim3 threadIdx, blockIdx;
inline zoo_dim3 blockDim, gridDim;

struct alignas(16) float4 {
    float x, y, z, w;
};

inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}

inline std::unique_ptr<std::barrier<>> zoo_block_barrier;
inline std::vector<std::unique_ptr<std::barrier<>>> zoo_warp_barriers;
inline std::vector<float> zoo_warp_vals;

inline void __syncthreads() { zoo_block_barrier->arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float v, int m) {
    unsigned t = threadIdx.x, w = t / 32, lane = t % 32;
    zoo_warp_vals[t] = v;
    zoo_warp_barriers[w]->arrive_and_wait();
    float r = zoo_warp_vals[w * 32 + (lane ^ (unsigned)m)];
    zoo_warp_barriers[w]->arrive_and_wait();
    return r;
}

// zoo_emulate runs kernel over grid blocks of block threads, one block at a time.
template <class F>
void zoo_emulate(unsigned grid, unsigned block, F kernel) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        zoo_block_barrier = std::make_unique<std::barrier<>>(block);
        zoo_warp_barriers.clear();
        for (unsigned w = 0; w < (block + 31) / 32; w++) zoo_warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
        zoo_warp_vals.assign(block + 32, 0.0f);
        std::vector<std::thread> th;
        for (unsigned t = 0; t < block; t++)
            th.emplace_back([=] {
                threadIdx = {t, 0, 0};
                blockIdx = {b, 0, 0};
                kernel();
            });
        for (auto& x : th) x.join();
    }
}
