// kernels.cu: zoo's own CUDA kernels. This file is embedded in the Go binary (go:embed) and
// compiled at first use with NVRTC for the device's architecture, so neither building zoo
// nor running it needs nvcc. NVRTC provides the math built-ins (expf, erff, ...) without
// any header; nothing here may include a header.
//
// Conventions: every tensor is a contiguous float32 array unless a Desc gives strides;
// element counts and offsets are 64-bit; kernels use grid-stride loops so any grid size is
// correct. The Desc layout must match packDesc in desc.go.

#define ZMAXD 8
#define ZINF __int_as_float(0x7f800000)
#define ZNAN __int_as_float(0x7fc00000)

// Desc describes up to three strided operands over one iteration shape: element i of the
// iteration space (row-major over shape) is at sum(coord[d] * st[k][d]) in operand k.
struct Desc {
    long long nd;
    long long shape[ZMAXD];
    long long st[3][ZMAXD];
};

// Unary op codes (unaryOps in ops.go).
#define U_ABS 0
#define U_NEG 1
#define U_EXP 2
#define U_LOG 3
#define U_SQRT 4
#define U_ERF 5
#define U_TANH 6
#define U_SIGMOID 7
#define U_RELU 8
#define U_ELU 9
#define U_GELU 10
#define U_GELU_TANH 11

// Binary op codes (binaryOps in ops.go).
#define B_ADD 0
#define B_SUB 1
#define B_MUL 2
#define B_DIV 3
#define B_POW 4
#define B_MAX 5
#define B_MIN 6

// Reduction op codes.
#define R_SUM 0
#define R_MEAN 1
#define R_MAX 2

__device__ __forceinline__ float unary_apply(int op, float x, float alpha) {
    switch (op) {
    case U_ABS: return fabsf(x);
    case U_NEG: return -x;
    case U_EXP: return expf(x);
    case U_LOG: return logf(x);
    case U_SQRT: return sqrtf(x);
    case U_ERF: return erff(x);
    case U_TANH: return tanhf(x);
    case U_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case U_RELU: return x > 0.0f ? x : 0.0f;
    case U_ELU: return x < 0.0f ? alpha * expm1f(x) : x;
    case U_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case U_GELU_TANH: {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
    }
    return ZNAN;
}

__device__ __forceinline__ float binary_apply(int op, float a, float b) {
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return powf(a, b);
    case B_MAX: return (a != a || b != b) ? ZNAN : fmaxf(a, b);
    case B_MIN: return (a != a || b != b) ? ZNAN : fminf(a, b);
    }
    return ZNAN;
}

__device__ __forceinline__ float2 f2(float x, float y) {
    float2 r;
    r.x = x;
    r.y = y;
    return r;
}

__device__ __forceinline__ float4 f4(float x, float y, float z, float w) {
    float4 r;
    r.x = x;
    r.y = y;
    r.z = z;
    r.w = w;
    return r;
}

__device__ __forceinline__ unsigned short f2bf(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; // NaN stays NaN
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// bf2 packs two floats as bf16 into one 32-bit register, lo in the low half (the element of
// the lower index in an mma fragment).
__device__ __forceinline__ unsigned bf2(float lo, float hi) {
#ifdef ZOO_EMULATE
    return (unsigned)f2bf(lo) | ((unsigned)f2bf(hi) << 16);
#else
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo)); // a to the high half
    return d;
#endif
}

// offsets maps flat index i of d's iteration space to operand offsets o[0..nops). One
// dimension (what coalesce makes of same-shape and scalar operands) needs no division; an
// index under 2^31 divides in 32 bits, which costs a fraction of the 64-bit division (a
// software routine on the GPU).
__device__ __forceinline__ void offsets(const Desc& d, long long i, int nops, long long* o) {
    if (d.nd == 1) {
        for (int k = 0; k < nops; k++) o[k] = i * d.st[k][0];
        return;
    }
    for (int k = 0; k < nops; k++) o[k] = 0;
    if (i < 0x80000000LL) {
        // u < 2^31, so a dimension of 2^32 or more (clamped below 2^32) still gives c = u.
        unsigned u = (unsigned)i;
        for (int dim = (int)d.nd - 1; dim >= 0; dim--) {
            unsigned n = d.shape[dim] > 0xffffffffLL ? 0xffffffffu : (unsigned)d.shape[dim];
            unsigned c = u % n;
            u /= n;
            for (int k = 0; k < nops; k++) o[k] += (long long)c * d.st[k][dim];
        }
        return;
    }
    for (int dim = (int)d.nd - 1; dim >= 0; dim--) {
        long long n = d.shape[dim];
        long long c = i % n;
        i /= n;
        for (int k = 0; k < nops; k++) o[k] += c * d.st[k][dim];
    }
}

extern "C" __global__ void zoo_unary(float* y, const float* x, long long n, int op, float alpha) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = unary_apply(op, x[i], alpha);
}

// zoo_binary: y (contiguous over d's shape) = a op b with a, b at strides st[0], st[1].
extern "C" __global__ void zoo_binary(float* y, const float* a, const float* b, long long n, int op, Desc d) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long o[2];
        offsets(d, i, 2, o);
        y[i] = binary_apply(op, a[o[0]], b[o[1]]);
    }
}

// zoo_where: y = c ? a : b with c (bytes), a, b at strides st[0], st[1], st[2].
extern "C" __global__ void zoo_where(float* y, const unsigned char* c, const float* a, const float* b, long long n, Desc d) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long o[3];
        offsets(d, i, 3, o);
        y[i] = c[o[0]] ? a[o[1]] : b[o[2]];
    }
}

// zoo_copy: y[ybase + off1] = x[xbase + off0]: transposes, slices (negative strides),
// broadcasts (zero strides), tiles and concatenation into a sub-block.
extern "C" __global__ void zoo_copy(float* y, long long ybase, const float* x, long long xbase, long long n, Desc d) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long o[2];
        offsets(d, i, 2, o);
        y[ybase + o[1]] = x[xbase + o[0]];
    }
}

// zoo_binary_rows: y[r, c] = a[r, c] op b[(r % brows), c] over rows × cols, everything
// contiguous: b is a full operand (brows = rows) or a row broadcast down the rows (a bias:
// brows = 1; or several rows repeated). relu != 0 applies max(0, ·) to the result (a
// linear layer's bias and ReLU in one pass). res, when not null, is a full rows × cols
// operand added after the op and before the ReLU: a linear layer's bias and its residual
// in one pass, (a op b) + res rounded as the two unfused Adds round. Four columns per
// thread when cols % 4 == 0 (vec), one otherwise. ReLU is the unfused Relu's (x > 0 ? x : 0).
extern "C" __global__ void zoo_binary_rows(float* y, const float* a, const float* b, const float* res, long long rows, long long cols, long long brows, int op, int relu, int vec) {
    long long stride = (long long)gridDim.x * blockDim.x;
    if (vec) {
        long long c4 = cols / 4, n4 = rows * c4, bn4 = brows * c4;
        const float4* a4 = (const float4*)a;
        const float4* b4 = (const float4*)b;
        float4* y4 = (float4*)y;
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
            float4 x = a4[i], w = b4[bn4 == n4 ? i : i % bn4];
            float4 r = f4(binary_apply(op, x.x, w.x), binary_apply(op, x.y, w.y), binary_apply(op, x.z, w.z), binary_apply(op, x.w, w.w));
            if (res) {
                float4 q = ((const float4*)res)[i];
                r = f4(r.x + q.x, r.y + q.y, r.z + q.z, r.w + q.w);
            }
            if (relu) r = f4(unary_apply(U_RELU, r.x, 0.0f), unary_apply(U_RELU, r.y, 0.0f), unary_apply(U_RELU, r.z, 0.0f), unary_apply(U_RELU, r.w, 0.0f));
            y4[i] = r;
        }
        return;
    }
    long long n = rows * cols, bn = brows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float r = binary_apply(op, a[i], b[bn == n ? i : i % bn]);
        if (res) r += res[i];
        y[i] = relu ? unary_apply(U_RELU, r, 0.0f) : r;
    }
}

// zoo_unary4: zoo_unary four elements per thread, for n % 4 == 0.
extern "C" __global__ void zoo_unary4(float* y, const float* x, long long n4, int op, float alpha) {
    const float4* x4 = (const float4*)x;
    float4* y4 = (float4*)y;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        float4 v = x4[i];
        y4[i] = f4(unary_apply(op, v.x, alpha), unary_apply(op, v.y, alpha), unary_apply(op, v.z, alpha), unary_apply(op, v.w, alpha));
    }
}

// zoo_to_bf16: y[i] = x[i] rounded to bf16 (to nearest, ties to even), the inputs of a bf16
// matrix product; four per thread when vec (n % 4 == 0).
extern "C" __global__ void zoo_to_bf16(unsigned short* y, const float* x, long long n, int vec) {
    long long stride = (long long)gridDim.x * blockDim.x;
    if (vec) {
        const float4* x4 = (const float4*)x;
        unsigned* y2 = (unsigned*)y;
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n / 4; i += stride) {
            float4 v = x4[i];
            y2[2 * i] = bf2(v.x, v.y);
            y2[2 * i + 1] = bf2(v.z, v.w);
        }
        return;
    }
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) y[i] = (unsigned short)(bf2(x[i], 0.0f) & 0xffffu);
}

extern "C" __global__ void zoo_fill(float* y, long long n, float v) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = v;
}

// zoo_gather: y[o, i, j] = x[o, idx[i], j] for o < outer, i < nidx, j < inner. Indices are
// already normalised and range-checked on the host.
extern "C" __global__ void zoo_gather(float* y, const float* x, const long long* idx, long long outer, long long nidx, long long axis, long long inner) {
    long long n = outer * nidx * inner;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x) {
        long long j = t % inner;
        long long r = t / inner;
        long long i = r % nidx;
        long long o = r / nidx;
        y[t] = x[(o * axis + idx[i]) * inner + j];
    }
}

// Block-wide reductions; blockDim.x is a multiple of 32 and at most 1024.
__device__ __forceinline__ float warp_sum(float v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
    return v;
}

__device__ float block_sum(float v, float* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = ((int)threadIdx.x < nw) ? sh[threadIdx.x] : 0.0f;
    if (w == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

__device__ float block_max(float v, float* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = ((int)threadIdx.x < nw) ? sh[threadIdx.x] : -ZINF;
    if (w == 0) v = warp_max(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

// zoo_softmax: one block per row. Row r has len elements at stride inner, starting at
// (r / inner) * len * inner + r % inner. A row of -inf gives NaN, as exp(x - max) does on
// the CPU.
extern "C" __global__ void zoo_softmax(float* y, const float* x, long long rows, long long len, long long inner) {
    __shared__ float sh[32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        long long base = (r / inner) * len * inner + r % inner;
        const float* xr = x + base;
        float* yr = y + base;
        float m = -ZINF;
        for (long long j = threadIdx.x; j < len; j += blockDim.x) m = fmaxf(m, xr[j * inner]);
        m = block_max(m, sh);
        float s = 0.0f;
        for (long long j = threadIdx.x; j < len; j += blockDim.x) s += expf(xr[j * inner] - m);
        s = block_sum(s, sh);
        float inv = 1.0f / s;
        for (long long j = threadIdx.x; j < len; j += blockDim.x) yr[j * inner] = expf(xr[j * inner] - m) * inv;
    }
}

// zoo_layernorm: one block per row of cols elements; scale and bias have ns, nb elements
// (cols or 1; nb == 0 means no bias). mean and rstd (may be null) receive the statistics.
extern "C" __global__ void zoo_layernorm(float* y, float* mean, float* rstd, const float* x, const float* scale, const float* bias,
                                         long long rows, long long cols, long long ns, long long nb, float eps) {
    __shared__ float sh[32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float s = 0.0f;
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
        float mu = block_sum(s, sh) / (float)cols;
        float v = 0.0f;
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
            float d = xr[j] - mu;
            v += d * d;
        }
        float var = block_sum(v, sh) / (float)cols;
        float rs = 1.0f / sqrtf(var + eps);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
            float g = scale[ns == 1 ? 0 : j];
            float b = nb == 0 ? 0.0f : bias[nb == 1 ? 0 : j];
            yr[j] = (xr[j] - mu) * rs * g + b;
        }
        if (threadIdx.x == 0) {
            if (mean) mean[r] = mu;
            if (rstd) rstd[r] = rs;
        }
    }
}

// zoo_layernorm_warp: zoo_layernorm with one warp per row for rows of at most 1024
// elements, held in registers between the passes (one read of the row instead of three,
// and no block-wide barriers). Same arguments and semantics as zoo_layernorm.
#define LNW_MAX 32
extern "C" __global__ void zoo_layernorm_warp(float* y, float* mean, float* rstd, const float* x, const float* scale, const float* bias,
                                              long long rows, long long cols, long long ns, long long nb, float eps) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long r = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float v[LNW_MAX];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < LNW_MAX; k++) {
            long long j = lane + 32LL * k;
            v[k] = j < cols ? xr[j] : 0.0f;
            s += v[k];
        }
        float mu = warp_sum(s) / (float)cols;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < LNW_MAX; k++) {
            long long j = lane + 32LL * k;
            float d = v[k] - mu;
            if (j < cols) q += d * d;
        }
        float rs = 1.0f / sqrtf(warp_sum(q) / (float)cols + eps);
#pragma unroll
        for (int k = 0; k < LNW_MAX; k++) {
            long long j = lane + 32LL * k;
            if (j < cols) {
                float g = scale[ns == 1 ? 0 : j];
                float b = nb == 0 ? 0.0f : bias[nb == 1 ? 0 : j];
                yr[j] = (v[k] - mu) * rs * g + b;
            }
        }
        if (lane == 0) {
            if (mean) mean[r] = mu;
            if (rstd) rstd[r] = rs;
        }
    }
}

// zoo_reduce: y[i] = reduce over the nred elements of the reduced space, where kept (in k)
// maps i to the input offset of its first element and red (in r) maps j to the offset
// within the reduced dimensions.
extern "C" __global__ void zoo_reduce(float* y, const float* x, long long nout, long long nred, int op, Desc k, Desc r) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nout; i += (long long)gridDim.x * blockDim.x) {
        long long base;
        offsets(k, i, 1, &base);
        float acc = op == R_MAX ? -ZINF : 0.0f;
        for (long long j = 0; j < nred; j++) {
            long long o;
            offsets(r, j, 1, &o);
            float v = x[base + o];
            if (op == R_MAX) {
                if (v > acc || v != v) acc = v;
                if (acc != acc) break;
            } else {
                acc += v;
            }
        }
        if (op == R_MEAN) acc /= (float)nred;
        y[i] = acc;
    }
}

// AttDesc describes one fused attention (attention.go): bh = batch·heads problems of nq
// queries and nk keys of dh features. Problem z is batch z / heads, head z % heads; st[k]
// gives the element strides over (batch, head, row, column) of q, k, v, y and the additive
// biases b0, b1 (k = 0..5; a broadcast axis has stride 0; the column stride of q, k, v and
// y is 1). scores = (q·k)·scale + b0 + b1, then a softmax over the keys, then the product
// with v. The layout must match attDesc.pack in attention.go.
struct AttDesc {
    long long bh, heads, nq, nk, dh, nbias;
    long long st[6][4];
    float scale;
    int pad_;
};

__device__ __forceinline__ long long att_base(const AttDesc& a, int k, long long z) {
    return (z / a.heads) * a.st[k][0] + (z % a.heads) * a.st[k][1];
}

// att_score scales the product s of query row i and key column j and adds the biases,
// one after the other as the graph adds them; bz[0], bz[1] point at the problem's biases.
__device__ __forceinline__ float att_score(const AttDesc& a, const float* const* bz, long long i, long long j, float s) {
    s *= a.scale;
    if (a.nbias > 0) s += bz[0][i * a.st[4][2] + j * a.st[4][3]];
    if (a.nbias > 1) s += bz[1][i * a.st[5][2] + j * a.st[5][3]];
    return s;
}

// zoo_attention: fused attention for any dh <= 256 with an online softmax, one warp per
// query row (8 features per lane); the n×n scores are never stored. The tiled kernels
// below are faster where they apply (dh 32 or 64); this one covers the rest.
#define ATT_MAXV 8
extern "C" __global__ void zoo_attention(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, AttDesc a) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5); row < a.bh * a.nq; row += warps) {
        long long z = row / a.nq, i = row % a.nq, dh = a.dh;
        const float* qr = q + att_base(a, 0, z) + i * a.st[0][2];
        const float* kz = k + att_base(a, 1, z);
        const float* vz = v + att_base(a, 2, z);
        const float* bz[2] = {a.nbias > 0 ? b0 + att_base(a, 4, z) : b0, a.nbias > 1 ? b1 + att_base(a, 5, z) : b1};
        float qv[ATT_MAXV], acc[ATT_MAXV];
        for (int t = 0; t < ATT_MAXV; t++) {
            long long c = lane + 32LL * t;
            qv[t] = c < dh ? qr[c] : 0.0f;
            acc[t] = 0.0f;
        }
        float m = -ZINF, l = 0.0f;
        for (long long j = 0; j < a.nk; j++) {
            const float* kr = kz + j * a.st[1][2];
            float s = 0.0f;
            for (int t = 0; t < ATT_MAXV; t++) {
                long long c = lane + 32LL * t;
                if (c < dh) s += qv[t] * kr[c];
            }
            s = att_score(a, bz, i, j, warp_sum(s));
            if (s == -ZINF) continue;
            float mn = fmaxf(m, s);
            float corr = expf(m - mn);
            float p = expf(s - mn);
            l = l * corr + p;
            const float* vr = vz + j * a.st[2][2];
            for (int t = 0; t < ATT_MAXV; t++) {
                long long c = lane + 32LL * t;
                if (c < dh) acc[t] = acc[t] * corr + p * vr[c];
            }
            m = mn;
        }
        float inv = 1.0f / l;
        float* yr = y + att_base(a, 3, z) + i * a.st[3][2];
        for (int t = 0; t < ATT_MAXV; t++) {
            long long c = lane + 32LL * t;
            if (c < dh) yr[c] = acc[t] * inv;
        }
    }
}

// The tiled kernel (flash-attention style, fp32 on the CUDA cores): a block of 128 threads
// owns 64 query rows of one problem and walks the keys in tiles of 32, staging Q, K, V and
// the probabilities in shared memory (44 KB at dh 64). Thread t holds rows 4·(t/8)..+3 and,
// of the score tile, columns t%8 + 8·jj (jj < 4); of the output, columns 32·g + 4·(t%8)..+3
// (g < DH/32). The 8 threads of a row group are adjacent lanes, so the row maxima and sums
// reduce with three shuffles. Needs dh = DH, and every stride of q, k, v and y except the
// column's a multiple of 4 (16-byte vector loads); attention.go checks both.
#define AT_BR 64
#define AT_BC 32
#define AT_THREADS 128

__device__ __forceinline__ float4 ld4(const float* p) { return *(const float4*)p; }
__device__ __forceinline__ void st4(float* p, float4 v) { *(float4*)p = v; }

template <int DH>
__device__ __forceinline__ void attention_tiled(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, const AttDesc& a) {
    // float4 arrays, for 16-byte alignment, seen as rows of floats.
    __shared__ float4 Q4[AT_BR * (DH + 4) / 4], K4[AT_BC * (DH + 4) / 4], V4[AT_BC * (DH + 4) / 4], P4[AT_BR * (AT_BC + 4) / 4];
    float(*Qs)[DH + 4] = reinterpret_cast<float(*)[DH + 4]>(Q4);
    float(*Ks)[DH + 4] = reinterpret_cast<float(*)[DH + 4]>(K4);
    float(*Vs)[DH + 4] = reinterpret_cast<float(*)[DH + 4]>(V4);
    float(*Ps)[AT_BC + 4] = reinterpret_cast<float(*)[AT_BC + 4]>(P4);
    const int t = threadIdx.x, ty = t >> 3, tx = t & 7;
    const int G = DH / 32;
    const long long qtiles = (a.nq + AT_BR - 1) / AT_BR;
    const float4 zero4 = f4(0.0f, 0.0f, 0.0f, 0.0f);
    for (long long blk = blockIdx.x; blk < a.bh * qtiles; blk += gridDim.x) {
        const long long z = blk / qtiles, i0 = (blk % qtiles) * AT_BR;
        const float* qz = q + att_base(a, 0, z);
        const float* kz = k + att_base(a, 1, z);
        const float* vz = v + att_base(a, 2, z);
        const float* bz[2] = {a.nbias > 0 ? b0 + att_base(a, 4, z) : b0, a.nbias > 1 ? b1 + att_base(a, 5, z) : b1};
        __syncthreads(); // the previous tile's readers of Qs are done
        for (int e = t; e < AT_BR * DH / 4; e += AT_THREADS) {
            int r = e / (DH / 4), c = (e % (DH / 4)) * 4;
            st4(&Qs[r][c], i0 + r < a.nq ? ld4(qz + (i0 + r) * a.st[0][2] + c) : zero4);
        }
        float m[4], l[4], o[4][4 * G];
        #pragma unroll
        for (int ii = 0; ii < 4; ii++) {
            m[ii] = -ZINF;
            l[ii] = 0.0f;
            #pragma unroll
            for (int c = 0; c < 4 * G; c++) o[ii][c] = 0.0f;
        }
        for (long long j0 = 0; j0 < a.nk; j0 += AT_BC) {
            __syncthreads(); // Ks, Vs and Ps of the previous key tile are no longer read
            for (int e = t; e < AT_BC * DH / 4; e += AT_THREADS) {
                int r = e / (DH / 4), c = (e % (DH / 4)) * 4;
                bool ok = j0 + r < a.nk;
                st4(&Ks[r][c], ok ? ld4(kz + (j0 + r) * a.st[1][2] + c) : zero4);
                st4(&Vs[r][c], ok ? ld4(vz + (j0 + r) * a.st[2][2] + c) : zero4);
            }
            __syncthreads();
            float s[4][4];
            #pragma unroll
            for (int ii = 0; ii < 4; ii++) {
                #pragma unroll
                for (int jj = 0; jj < 4; jj++) s[ii][jj] = 0.0f;
            }
            #pragma unroll
            for (int d = 0; d < DH; d += 4) {
                float4 qa[4], kb[4];
                #pragma unroll
                for (int ii = 0; ii < 4; ii++) qa[ii] = ld4(&Qs[ty * 4 + ii][d]);
                #pragma unroll
                for (int jj = 0; jj < 4; jj++) kb[jj] = ld4(&Ks[tx + 8 * jj][d]);
                #pragma unroll
                for (int ii = 0; ii < 4; ii++) {
                    #pragma unroll
                    for (int jj = 0; jj < 4; jj++)
                        s[ii][jj] += qa[ii].x * kb[jj].x + qa[ii].y * kb[jj].y + qa[ii].z * kb[jj].z + qa[ii].w * kb[jj].w;
                }
            }
            #pragma unroll
            for (int ii = 0; ii < 4; ii++) {
                long long i = i0 + ty * 4 + ii;
                float mx = -ZINF;
                #pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    long long j = j0 + tx + 8 * jj;
                    float x = -ZINF;
                    if (j < a.nk) x = i < a.nq ? att_score(a, bz, i, j, s[ii][jj]) : s[ii][jj] * a.scale;
                    s[ii][jj] = x;
                    mx = fmaxf(mx, x);
                }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
                float mn = fmaxf(m[ii], mx);
                float corr = 1.0f;
                if (mn == -ZINF) { // every key so far is masked: nothing to add yet
                    #pragma unroll
                    for (int jj = 0; jj < 4; jj++) s[ii][jj] = 0.0f;
                } else {
                    corr = expf(m[ii] - mn);
                    #pragma unroll
                    for (int jj = 0; jj < 4; jj++) s[ii][jj] = expf(s[ii][jj] - mn);
                }
                m[ii] = mn;
                l[ii] = l[ii] * corr + s[ii][0] + s[ii][1] + s[ii][2] + s[ii][3];
                #pragma unroll
                for (int c = 0; c < 4 * G; c++) o[ii][c] *= corr;
                #pragma unroll
                for (int jj = 0; jj < 4; jj++) Ps[ty * 4 + ii][tx + 8 * jj] = s[ii][jj];
            }
            __syncthreads();
            #pragma unroll
            for (int j = 0; j < AT_BC; j += 4) {
                float4 pa[4];
                #pragma unroll
                for (int ii = 0; ii < 4; ii++) pa[ii] = ld4(&Ps[ty * 4 + ii][j]);
                #pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    #pragma unroll
                    for (int g = 0; g < G; g++) {
                        float4 vb = ld4(&Vs[j + jj][32 * g + 4 * tx]);
                        #pragma unroll
                        for (int ii = 0; ii < 4; ii++) {
                            float p = jj == 0 ? pa[ii].x : jj == 1 ? pa[ii].y : jj == 2 ? pa[ii].z : pa[ii].w;
                            o[ii][4 * g + 0] += p * vb.x;
                            o[ii][4 * g + 1] += p * vb.y;
                            o[ii][4 * g + 2] += p * vb.z;
                            o[ii][4 * g + 3] += p * vb.w;
                        }
                    }
                }
            }
        }
        float* yz = y + att_base(a, 3, z);
        #pragma unroll
        for (int ii = 0; ii < 4; ii++) {
            float sum = l[ii];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            float inv = 1.0f / sum;
            long long i = i0 + ty * 4 + ii;
            if (i < a.nq) {
                #pragma unroll
                for (int g = 0; g < G; g++)
                    st4(yz + i * a.st[3][2] + 32 * g + 4 * tx,
                        f4(o[ii][4 * g] * inv, o[ii][4 * g + 1] * inv, o[ii][4 * g + 2] * inv, o[ii][4 * g + 3] * inv));
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(AT_THREADS) zoo_attention_t32(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, AttDesc a) {
    attention_tiled<32>(y, q, k, v, b0, b1, a);
}

extern "C" __global__ void __launch_bounds__(AT_THREADS) zoo_attention_t64(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, AttDesc a) {
    attention_tiled<64>(y, q, k, v, b0, b1, a);
}

// bf16 on the tensor cores (Options.Precision "bf16": the inputs of every matrix product
// rounded to bf16, products accumulated in fp32). The same online softmax as above, with
// both products as mma.sync.m16n8k16 bf16 → fp32: a block of 8 warps owns 128 query rows (16
// per warp) and walks the keys in tiles of 64. Q, K and V are rounded to bf16 (to nearest,
// ties to even) as they are staged in shared memory, V transposed so that its B fragments
// are whole words; the scores stay fp32 in registers, and the probabilities are rounded to
// bf16 where they become the A operand of P·V, in the registers that held the scores (the
// accumulator layout of two adjacent 8-key tiles is the A layout of one 16-key step). The
// row sums are of the fp32 probabilities. A bias that does not depend on the query row (a
// key-padding mask) is staged per key tile in shared memory, with -inf past the last key;
// other biases take the general path per score. Needs dh = DH (32 or 64) and every stride
// of q, k, v and y except the column's even.
#define AB_BR 128
#define AB_BC 64
#define AB_THREADS 256

// mma_bf16: d (16×8 fp32) += a (16×16 bf16, row) · b (16×8 bf16, col), per warp.
__device__ __forceinline__ void mma_bf16(float* d, const unsigned* a, unsigned b0, unsigned b1) {
#ifdef ZOO_EMULATE
    zoo_mma_bf16(d, a, b0, b1);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <int DH>
__device__ __forceinline__ void attention_bf16(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, const AttDesc& a) {
    // Rows padded by 8 bf16 (4 words), so that the 8 rows a fragment load touches fall in
    // different banks: Q and K as [row][DH], V as [DH][key].
    const int W = DH / 2 + 4, WV = AB_BC / 2 + 4; // 32-bit words per row
    __shared__ unsigned Qs[AB_BR * (DH / 2 + 4)], Ks[AB_BC * (DH / 2 + 4)], Vt[DH * (AB_BC / 2 + 4)];
    __shared__ float Bs[AB_BC];
    unsigned short* Vth = reinterpret_cast<unsigned short*>(Vt);
    const int t = threadIdx.x, warp = t >> 5, lane = t & 31, g = lane >> 2, tg = lane & 3;
    const long long qtiles = (a.nq + AB_BR - 1) / AB_BR;
    const bool rowfree = a.nbias == 0 || (a.nbias == 1 && a.st[4][2] == 0);
    for (long long blk = blockIdx.x; blk < a.bh * qtiles; blk += gridDim.x) {
        const long long z = blk / qtiles, i0 = (blk % qtiles) * AB_BR;
        const float* qz = q + att_base(a, 0, z);
        const float* kz = k + att_base(a, 1, z);
        const float* vz = v + att_base(a, 2, z);
        const float* bz[2] = {a.nbias > 0 ? b0 + att_base(a, 4, z) : b0, a.nbias > 1 ? b1 + att_base(a, 5, z) : b1};
        __syncthreads(); // the previous block's readers of Qs are done
        for (int e = t; e < AB_BR * DH / 2; e += AB_THREADS) {
            int r = e / (DH / 2), c = e % (DH / 2);
            float2 x = f2(0.0f, 0.0f);
            if (i0 + r < a.nq) x = *(const float2*)(qz + (i0 + r) * a.st[0][2] + 2 * c);
            Qs[r * W + c] = bf2(x.x, x.y);
        }
        __syncthreads();
        // This warp's rows of Q as A fragments, for the whole block.
        const int m0 = warp * 16;
        unsigned qa[DH / 16][4];
#pragma unroll
        for (int kk = 0; kk < DH / 16; kk++) {
            qa[kk][0] = Qs[(m0 + g) * W + 8 * kk + tg];
            qa[kk][1] = Qs[(m0 + g + 8) * W + 8 * kk + tg];
            qa[kk][2] = Qs[(m0 + g) * W + 8 * kk + 4 + tg];
            qa[kk][3] = Qs[(m0 + g + 8) * W + 8 * kk + 4 + tg];
        }
        float m[2] = {-ZINF, -ZINF}, l[2] = {0.0f, 0.0f};
        float o[DH / 8][4];
#pragma unroll
        for (int dt = 0; dt < DH / 8; dt++) {
#pragma unroll
            for (int i = 0; i < 4; i++) o[dt][i] = 0.0f;
        }
        for (long long j0 = 0; j0 < a.nk; j0 += AB_BC) {
            __syncthreads(); // Ks, Vt and Bs of the previous key tile are no longer read
            for (int e = t; e < AB_BC * DH / 2; e += AB_THREADS) {
                int r = e / (DH / 2), c = e % (DH / 2);
                float2 x = f2(0.0f, 0.0f);
                if (j0 + r < a.nk) x = *(const float2*)(kz + (j0 + r) * a.st[1][2] + 2 * c);
                Ks[r * W + c] = bf2(x.x, x.y);
            }
            for (int e = t; e < AB_BC * DH / 2; e += AB_THREADS) {
                // Adjacent threads take adjacent keys, so the transposed 16-bit stores are
                // adjacent too.
                int key = e % AB_BC, c = e / AB_BC;
                float2 x = f2(0.0f, 0.0f);
                if (j0 + key < a.nk) x = *(const float2*)(vz + (j0 + key) * a.st[2][2] + 2 * c);
                unsigned p = bf2(x.x, x.y);
                Vth[(2 * c) * 2 * WV + key] = (unsigned short)(p & 0xffffu);
                Vth[(2 * c + 1) * 2 * WV + key] = (unsigned short)(p >> 16);
            }
            if (rowfree && t < AB_BC) {
                long long j = j0 + t;
                Bs[t] = j < a.nk ? (a.nbias ? bz[0][j * a.st[4][3]] : 0.0f) : -ZINF;
            }
            __syncthreads();
            // S = Q·Kᵀ for 8 tiles of 8 keys: key nt*8 + g is the B column of lane g.
            float s[AB_BC / 8][4];
#pragma unroll
            for (int nt = 0; nt < AB_BC / 8; nt++) {
#pragma unroll
                for (int i = 0; i < 4; i++) s[nt][i] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < DH / 16; kk++)
                    mma_bf16(s[nt], qa[kk], Ks[(nt * 8 + g) * W + 8 * kk + tg], Ks[(nt * 8 + g) * W + 8 * kk + 4 + tg]);
            }
            // Scale and biases (-inf past the last key).
            if (rowfree) {
#pragma unroll
                for (int nt = 0; nt < AB_BC / 8; nt++) {
                    float2 bc = *(const float2*)&Bs[nt * 8 + 2 * tg];
                    s[nt][0] = s[nt][0] * a.scale + bc.x;
                    s[nt][1] = s[nt][1] * a.scale + bc.y;
                    s[nt][2] = s[nt][2] * a.scale + bc.x;
                    s[nt][3] = s[nt][3] * a.scale + bc.y;
                }
            } else {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    long long i = i0 + m0 + g + 8 * h;
#pragma unroll
                    for (int nt = 0; nt < AB_BC / 8; nt++) {
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            long long j = j0 + nt * 8 + 2 * tg + c;
                            float x = -ZINF;
                            if (j < a.nk) x = i < a.nq ? att_score(a, bz, i, j, s[nt][2 * h + c]) : s[nt][2 * h + c] * a.scale;
                            s[nt][2 * h + c] = x;
                        }
                    }
                }
            }
            // The online softmax per row (h = 0: row g, h = 1: row g + 8; the 4 lanes of a
            // group hold a row between them).
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float mx = -ZINF;
#pragma unroll
                for (int nt = 0; nt < AB_BC / 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mn = fmaxf(m[h], mx);
                float corr = 1.0f, sum = 0.0f;
                if (mn == -ZINF) { // every key so far is masked: nothing to add yet
#pragma unroll
                    for (int nt = 0; nt < AB_BC / 8; nt++) s[nt][2 * h] = s[nt][2 * h + 1] = 0.0f;
                } else {
                    corr = __expf(m[h] - mn);
#pragma unroll
                    for (int nt = 0; nt < AB_BC / 8; nt++) {
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            float p = __expf(s[nt][2 * h + c] - mn);
                            s[nt][2 * h + c] = p;
                            sum += p;
                        }
                    }
                }
                m[h] = mn;
                l[h] = l[h] * corr + sum;
#pragma unroll
                for (int dt = 0; dt < DH / 8; dt++) {
                    o[dt][2 * h] *= corr;
                    o[dt][2 * h + 1] *= corr;
                }
            }
            // O += P·V, 16 keys per step: P's A fragment is the scores of key tiles 2kk, 2kk+1;
            // V's B fragment is column dt*8 + g of Vᵀ's rows at keys 16kk + 2tg (+1, +8, +9).
#pragma unroll
            for (int kk = 0; kk < AB_BC / 16; kk++) {
                unsigned pa[4] = {bf2(s[2 * kk][0], s[2 * kk][1]), bf2(s[2 * kk][2], s[2 * kk][3]),
                                  bf2(s[2 * kk + 1][0], s[2 * kk + 1][1]), bf2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
                for (int dt = 0; dt < DH / 8; dt++)
                    mma_bf16(o[dt], pa, Vt[(dt * 8 + g) * WV + 8 * kk + tg], Vt[(dt * 8 + g) * WV + 8 * kk + 4 + tg]);
            }
        }
        float* yz = y + att_base(a, 3, z);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float sum = l[h];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            float inv = 1.0f / sum;
            long long i = i0 + m0 + g + 8 * h;
            if (i < a.nq) {
#pragma unroll
                for (int dt = 0; dt < DH / 8; dt++)
                    *(float2*)(yz + i * a.st[3][2] + dt * 8 + 2 * tg) = f2(o[dt][2 * h] * inv, o[dt][2 * h + 1] * inv);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(AB_THREADS, 2) zoo_attention_bf16_d32(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, AttDesc a) {
    attention_bf16<32>(y, q, k, v, b0, b1, a);
}

extern "C" __global__ void __launch_bounds__(AB_THREADS, 2) zoo_attention_bf16_d64(float* y, const float* q, const float* k, const float* v, const float* b0, const float* b1, AttDesc a) {
    attention_bf16<64>(y, q, k, v, b0, b1, a);
}
