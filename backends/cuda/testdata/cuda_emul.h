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
struct alignas(8) float2 {
    float x, y;
};

#define ZOO_EMULATE 1

inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}

inline float __expf(float x) { return expf(x); }

inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
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

// zoo_mma_bf16 is mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 for the calling lane:
// the warp's fragments are exchanged through memory, laid out as the PTX ISA gives them
// (groupID = lane / 4, tg = lane % 4; A element i at row groupID + 8·(i/2 % 2), column
// 2·tg + i%2 + 8·(i/4), two per register, low half first; B element i at row 2·tg + i%2 +
// 8·(i/2), column groupID; C element i at row groupID + 8·(i/2), column 2·tg + i%2), and the
// products summed in float.
struct zoo_mma_frags {
    unsigned a[32][4], b[32][2];
};
inline std::vector<zoo_mma_frags> zoo_mma_x;

inline float zoo_bf16(unsigned h) { return __int_as_float((int)(h << 16)); }

inline void zoo_mma_bf16(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    unsigned t = threadIdx.x, w = t / 32, lane = t % 32;
    zoo_mma_frags& X = zoo_mma_x[w];
    for (int i = 0; i < 4; i++) X.a[lane][i] = a[i];
    X.b[lane][0] = b0;
    X.b[lane][1] = b1;
    zoo_warp_barriers[w]->arrive_and_wait();
    float A[16][16], B[16][8];
    for (int L = 0; L < 32; L++) {
        int g = L >> 2, tg = L & 3;
        for (int i = 0; i < 8; i++) {
            unsigned h = (X.a[L][i / 2] >> (16 * (i % 2))) & 0xffffu;
            A[g + 8 * ((i / 2) % 2)][2 * tg + i % 2 + 8 * (i / 4)] = zoo_bf16(h);
        }
        for (int i = 0; i < 4; i++) {
            unsigned h = (X.b[L][i / 2] >> (16 * (i % 2))) & 0xffffu;
            B[2 * tg + i % 2 + 8 * (i / 2)][g] = zoo_bf16(h);
        }
    }
    zoo_warp_barriers[w]->arrive_and_wait();
    int g = lane >> 2, tg = lane & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + 8 * (i / 2), col = 2 * tg + i % 2;
        float acc = d[i];
        for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
        d[i] = acc;
    }
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
        zoo_mma_x.assign((block + 31) / 32, zoo_mma_frags{});
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
