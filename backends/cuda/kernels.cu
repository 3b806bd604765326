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

// offsets maps flat index i of d's iteration space to operand offsets o[0..nops).
__device__ __forceinline__ void offsets(const Desc& d, long long i, int nops, long long* o) {
    for (int k = 0; k < nops; k++) o[k] = 0;
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

// zoo_attention: fused scaled-dot-product attention with an online softmax (flash-attention
// style); never materialises the n×n score matrix. q: [bh, nq, dh], k and v: [bh, nk, dh],
// y: [bh, nq, dh], all contiguous. mask (may be null) is an additive float bias indexed
// mask[(b * mstride_b) + (h * mstride_h) + i * mstride_i + j] for batch b = z / heads and
// head h = z % heads. One warp per query row; dh <= 256 (8 values per lane).
#define ATT_MAXV 8
extern "C" __global__ void zoo_attention(float* y, const float* q, const float* k, const float* v, const float* mask,
                                         long long bh, long long heads, long long nq, long long nk, long long dh, float scale,
                                         long long msb, long long msh, long long msi) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5); row < bh * nq; row += warps) {
        long long z = row / nq, i = row % nq;
        const float* qr = q + row * dh;
        const float* kz = k + z * nk * dh;
        const float* vz = v + z * nk * dh;
        const float* mr = mask ? mask + (z / heads) * msb + (z % heads) * msh + i * msi : 0;
        float qv[ATT_MAXV], acc[ATT_MAXV];
        for (int t = 0; t < ATT_MAXV; t++) {
            long long c = lane + 32LL * t;
            qv[t] = c < dh ? qr[c] * scale : 0.0f;
            acc[t] = 0.0f;
        }
        float m = -ZINF, l = 0.0f;
        for (long long j = 0; j < nk; j++) {
            const float* kr = kz + j * dh;
            float s = 0.0f;
            for (int t = 0; t < ATT_MAXV; t++) {
                long long c = lane + 32LL * t;
                if (c < dh) s += qv[t] * kr[c];
            }
            s = warp_sum(s);
            if (mr) s += mr[j];
            if (s == -ZINF) continue;
            float mn = fmaxf(m, s);
            float corr = expf(m - mn);
            float p = expf(s - mn);
            l = l * corr + p;
            const float* vr = vz + j * dh;
            for (int t = 0; t < ATT_MAXV; t++) {
                long long c = lane + 32LL * t;
                if (c < dh) acc[t] = acc[t] * corr + p * vr[c];
            }
            m = mn;
        }
        float inv = 1.0f / l;
        float* yr = y + row * dh;
        for (int t = 0; t < ATT_MAXV; t++) {
            long long c = lane + 32LL * t;
            if (c < dh) yr[c] = acc[t] * inv;
        }
    }
}
