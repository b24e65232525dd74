// Rung 3, CUDA side. One program per row. exp(x) is computed as exp2((x - m) * log2(e)) (MUFU.EX2, a few
// ulp), after the row max is subtracted, so every argument is <= 0 and -inf maps to exactly 0.
//   buggy       a 1024-thread block per row, one column per thread: columns >= 1024 are never touched.
//   fixed       softmax_fixed<BLOCK, TPR, RPC>: TPR threads per row, RPC rows per block, each thread
//               holding BLOCK/TPR row values in registers (a warp or sub-warp per row up to BLOCK 1024,
//               a block per row above); 16-byte loads and stores when n_cols % 4 == 0.
//   online      fast: a block per row, every thread a running (m, l) over its columns, merged once.
// (The traced forms of buggy, fixed and online are the editable source kernels/editable/sources/softmax.cu.)
//   three_pass  rowmax kernel, exp-sum kernel, normalise kernel; intermediates in memory.
#include <cfloat>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/runtime/params.h"
#include "kernels/rungs/softmax.h"

namespace kl::softmax::detail {

constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float fexp(float v) { return exp2f(v * kLog2e); }
__device__ __forceinline__ float neg_inf() { return -INFINITY; }

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the TPR consecutive threads of a row (TPR a power of two); every one of them gets the
// result. Up to 32: shuffles only. Above: shuffles, then the warps' partials through shared memory.
template <int TPR, class Op>
__device__ __forceinline__ float group_reduce(float v, Op op, float* red) {
  constexpr int W = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int off = W / 2; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  if constexpr (TPR > 32) {
    constexpr int NW = TPR / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = red[lane % NW];
#pragma unroll
    for (int off = NW / 2; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    __syncthreads();  // red[] is reused by the next reduction
  }
  return v;
}

// The same for a whole block of blockDim.x threads (a power of two, >= 32), known at run time.
template <class Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float* red) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int nw = blockDim.x / 32;
  if (nw == 1) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = red[lane % nw];
  for (int off = nw / 2; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();
  return v;
}

__device__ __forceinline__ void record(int32_t* writer, uint32_t* count, int64_t row, int64_t idx) {
  if (writer) {
    writer[idx] = int32_t(row);
    atomicAdd(&count[idx], 1u);
  }
}

// Four consecutive columns c0..c0+3 of a row, -inf past n_cols; one 16-byte load when `vec`. Plain loads and
// stores, no evict-first hints: `online` reads each row twice, and a row that is already in the L2 (written
// by the kernel before, or the app's next frame) should stay there. On the H200, 4096 x 1024 timed on one
// buffer pair ran at 0.76 of copy with __ldcs/__stcs and 0.96 without; timed cold, or at 65536 rows, the
// two were equal (docs/perf-log.md).
__device__ __forceinline__ void load4(const float* xr, int c0, int n_cols, bool vec, float a[4]) {
  if (vec) {
    if (c0 < n_cols) {
      const float4 q = *reinterpret_cast<const float4*>(xr + c0);
      a[0] = q.x, a[1] = q.y, a[2] = q.z, a[3] = q.w;
    } else {
      a[0] = a[1] = a[2] = a[3] = neg_inf();
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = c0 + k < n_cols ? xr[c0 + k] : neg_inf();
}
__device__ __forceinline__ void store4(float* orow, int c0, int n_cols, bool vec, const float a[4]) {
  if (vec) {
    if (c0 < n_cols) *reinterpret_cast<float4*>(orow + c0) = make_float4(a[0], a[1], a[2], a[3]);
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if (c0 + k < n_cols) orow[c0 + k] = a[k];
}

// ---- buggy: BLOCK_SIZE = 1024, whatever n_cols is --------------------------------------------------------
__global__ void __launch_bounds__(1024) softmax_buggy(const float* __restrict__ x, float* __restrict__ out,
                                                      int n_cols, int32_t* writer, uint32_t* count) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int c = threadIdx.x;  // cols = arange(BLOCK_SIZE), BLOCK_SIZE = 1024
  const bool mask = c < n_cols;
  const float v = mask ? x[row * n_cols + c] : neg_inf();
  const float m = group_reduce<1024>(v, MaxOp{}, red);
  const float m_safe = m == neg_inf() ? 0.0f : m;
  const float e = fexp(v - m_safe);
  const float s = group_reduce<1024>(e, SumOp{}, red);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  if (mask) {
    out[row * n_cols + c] = e * inv;
    record(writer, count, row, row * n_cols + c);
  }
}

// ---- fixed: the whole row in registers ---------------------------------------------------------------------
template <int BLOCK, int TPR, int RPC>
__global__ void __launch_bounds__(TPR* RPC) softmax_fixed(const float* __restrict__ x, float* __restrict__ out,
                                                          int64_t rows, int n_cols, bool vec, int32_t* writer,
                                                          uint32_t* count) {
  static_assert(RPC == 1 || TPR <= 32, "several rows per block only with a warp or less per row");
  constexpr int E = BLOCK >= TPR ? BLOCK / TPR : 1;  // row values per thread
  constexpr int VEC = E >= 4 ? 4 : 1;
  constexpr int NV = E / VEC;
  __shared__ float red[32];
  const int t = threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * RPC + threadIdx.x / TPR;
  const bool row_ok = row < rows;  // the last block's spare rows still take part in the shuffles
  const float* xr = x + (row_ok ? row : 0) * int64_t(n_cols);
  float v[E];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int c0 = (j * TPR + t) * VEC;
    if constexpr (VEC == 4) {
      float a[4];
      if (row_ok) load4(xr, c0, n_cols, vec, a);
      else a[0] = a[1] = a[2] = a[3] = neg_inf();
#pragma unroll
      for (int k = 0; k < 4; ++k) v[j * 4 + k] = a[k];
    } else {
      v[j] = (row_ok && c0 < n_cols) ? xr[c0] : neg_inf();
    }
  }
  float m = v[0];
#pragma unroll
  for (int i = 1; i < E; ++i) m = fmaxf(m, v[i]);
  m = group_reduce<TPR>(m, MaxOp{}, red);                 // m = rowmax(x)
  const float m_safe = m == neg_inf() ? 0.0f : m;          // a row of all -inf: every e is 0, out is 0
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < E; ++i) s += (v[i] = fexp(v[i] - m_safe));
  s = group_reduce<TPR>(s, SumOp{}, red);                  // s = rowsum(exp(x - m))
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  if (!row_ok) return;
  float* orow = out + row * int64_t(n_cols);
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int c0 = (j * TPR + t) * VEC;
    if constexpr (VEC == 4) {
      const float a[4] = {v[j * 4] * inv, v[j * 4 + 1] * inv, v[j * 4 + 2] * inv, v[j * 4 + 3] * inv};
      store4(orow, c0, n_cols, vec, a);
      if (writer)
        for (int k = 0; k < 4; ++k)
          if (c0 + k < n_cols) record(writer, count, row, row * n_cols + c0 + k);
    } else if (c0 < n_cols) {
      orow[c0] = v[j] * inv;
      record(writer, count, row, row * n_cols + c0);
    }
  }
}

template <int BLOCK, int TPR, int RPC>
static void launch_fixed(const float* x, float* out, int64_t rows, int n_cols, bool vec, int32_t* w, uint32_t* c) {
  const int64_t grid = (rows + RPC - 1) / RPC;
  cuda::launch("softmax_fixed", softmax_fixed<BLOCK, TPR, RPC>, dim3(unsigned(grid)), dim3(TPR * RPC), 0, 0, x, out,
               rows, n_cols, vec, w, c);
}

static void run_fixed(const float* x, float* out, int64_t rows, int n_cols, bool vec, int32_t* w, uint32_t* c) {
  switch (next_power_of_2(n_cols)) {
    case 1: return launch_fixed<1, 1, 128>(x, out, rows, n_cols, vec, w, c);
    case 2: return launch_fixed<2, 2, 64>(x, out, rows, n_cols, vec, w, c);
    case 4: return launch_fixed<4, 4, 32>(x, out, rows, n_cols, vec, w, c);
    case 8: return launch_fixed<8, 8, 16>(x, out, rows, n_cols, vec, w, c);
    case 16: return launch_fixed<16, 16, 8>(x, out, rows, n_cols, vec, w, c);
    case 32: return launch_fixed<32, 32, 4>(x, out, rows, n_cols, vec, w, c);
    case 64: return launch_fixed<64, 32, 4>(x, out, rows, n_cols, vec, w, c);
    case 128: return launch_fixed<128, 32, 4>(x, out, rows, n_cols, vec, w, c);
    case 256: return launch_fixed<256, 32, 4>(x, out, rows, n_cols, vec, w, c);
    case 512: return launch_fixed<512, 32, 4>(x, out, rows, n_cols, vec, w, c);
    case 1024: return launch_fixed<1024, 32, 4>(x, out, rows, n_cols, vec, w, c);
    case 2048: return launch_fixed<2048, 128, 1>(x, out, rows, n_cols, vec, w, c);
    case 4096: return launch_fixed<4096, 256, 1>(x, out, rows, n_cols, vec, w, c);
    case 8192: return launch_fixed<8192, 512, 1>(x, out, rows, n_cols, vec, w, c);
    case 16384: return launch_fixed<16384, 512, 1>(x, out, rows, n_cols, vec, w, c);
    case 32768: return launch_fixed<32768, 1024, 1>(x, out, rows, n_cols, vec, w, c);
    default:
      throw InputError("softmax fixed: n_cols=" + std::to_string(n_cols) +
                       " is past the 32768 columns this build's fixed kernel holds; use --variant online");
  }
}

// ---- online -------------------------------------------------------------------------------------------------
// Fast: each thread a running (m, l) over its columns (4 at a time, U groups in flight), merged once:
//   M = max_t m_t,   L = sum_t l_t * exp(m_t - M)
template <int THREADS>
__global__ void __launch_bounds__(THREADS) softmax_online_fast(const float* __restrict__ x, float* __restrict__ out,
                                                               int n_cols, bool vec) {
  constexpr int U = 4;
  constexpr int STEP = THREADS * 4;
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * int64_t(n_cols);
  float* orow = out + row * int64_t(n_cols);
  const int t = threadIdx.x;
  float m = neg_inf(), l = 0.0f;
  for (int base = 0; base < n_cols; base += STEP * U) {
    float a[U][4];
#pragma unroll
    for (int u = 0; u < U; ++u) load4(xr, base + u * STEP + t * 4, n_cols, vec, a[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float cm = fmaxf(fmaxf(a[u][0], a[u][1]), fmaxf(a[u][2], a[u][3]));
      const float m_new = fmaxf(m, cm);                    // m_new = max(m_old, rowmax(chunk))
      if (m_new != neg_inf()) {                            // (nothing but -inf so far: l stays 0)
        l = l * fexp(m - m_new) + (fexp(a[u][0] - m_new) + fexp(a[u][1] - m_new)) +
            (fexp(a[u][2] - m_new) + fexp(a[u][3] - m_new));
        m = m_new;
      }
    }
  }
  const float M = block_reduce(m, MaxOp{}, red);
  const float L = block_reduce(m == neg_inf() ? 0.0f : l * fexp(m - M), SumOp{}, red);
  const float m_safe = M == neg_inf() ? 0.0f : M;
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  for (int base = 0; base < n_cols; base += STEP * U) {
    float a[U][4];
#pragma unroll
    for (int u = 0; u < U; ++u) load4(xr, base + u * STEP + t * 4, n_cols, vec, a[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < 4; ++k) a[u][k] = fexp(a[u][k] - m_safe) * inv;
      store4(orow, base + u * STEP + t * 4, n_cols, vec, a[u]);
    }
  }
}

// ---- three_pass: three kernels, intermediates in memory ---------------------------------------------------
constexpr int kTP = 256;
__global__ void __launch_bounds__(kTP) three_pass_max(const float* __restrict__ x, float* rowmax, int n_cols) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float m = neg_inf();
  for (int c = threadIdx.x; c < n_cols; c += kTP) m = fmaxf(m, x[row * n_cols + c]);
  m = group_reduce<kTP>(m, MaxOp{}, red);
  if (threadIdx.x == 0) rowmax[row] = m;
}
__global__ void __launch_bounds__(kTP) three_pass_exp_sum(const float* __restrict__ x, const float* rowmax,
                                                          float* __restrict__ e, float* rowsum, int n_cols) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float m = rowmax[row];
  const float m_safe = m == neg_inf() ? 0.0f : m;
  float s = 0.0f;
  for (int c = threadIdx.x; c < n_cols; c += kTP) {
    const float v = fexp(x[row * n_cols + c] - m_safe);
    e[row * n_cols + c] = v;
    s += v;
  }
  s = group_reduce<kTP>(s, SumOp{}, red);
  if (threadIdx.x == 0) rowsum[row] = s;
}
__global__ void __launch_bounds__(kTP) three_pass_normalize(float* __restrict__ out, const float* rowsum, int n_cols,
                                                            int32_t* writer, uint32_t* count) {
  const int64_t row = blockIdx.x;
  const float s = rowsum[row];
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  for (int c = threadIdx.x; c < n_cols; c += kTP) {
    out[row * n_cols + c] *= inv;
    record(writer, count, row, row * n_cols + c);
  }
}

void run_cuda(Variant v, const float* x, float* out, int64_t rows, int64_t n_cols64, SoftmaxTraceView* trace,
              int chunk, float* scratch) {
  const int n_cols = int(n_cols64);
  int32_t* w = trace ? trace->writer : nullptr;
  uint32_t* c = trace ? trace->write_count : nullptr;
  const bool vec = n_cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const dim3 grid{unsigned(rows)};
  switch (v) {
    case Variant::Buggy:
      cuda::launch("softmax_buggy", softmax_buggy, grid, dim3(1024), 0, 0, x, out, n_cols, w, c);
      return;
    case Variant::Fixed: return run_fixed(x, out, rows, n_cols, vec, w, c);
    case Variant::Online:
      if (n_cols >= 16384) {  // (traced: kernels/editable/sources/softmax.cu, launched by softmax.cpp)
        cuda::launch("softmax_online<1024>", softmax_online_fast<1024>, grid, dim3(1024), 0, 0, x, out, n_cols, vec);
      } else if (n_cols >= 4096) {
        cuda::launch("softmax_online<512>", softmax_online_fast<512>, grid, dim3(512), 0, 0, x, out, n_cols, vec);
      } else if (n_cols >= 1024) {
        cuda::launch("softmax_online<256>", softmax_online_fast<256>, grid, dim3(256), 0, 0, x, out, n_cols, vec);
      } else {
        cuda::launch("softmax_online<32>", softmax_online_fast<32>, grid, dim3(32), 0, 0, x, out, n_cols, vec);
      }
      return;
    case Variant::ThreePass: {
      float* rowmax = scratch;
      float* rowsum = scratch + rows;
      cuda::launch("three_pass_max", three_pass_max, grid, dim3(kTP), 0, 0, x, rowmax, n_cols);
      cuda::launch("three_pass_exp_sum", three_pass_exp_sum, grid, dim3(kTP), 0, 0, x, rowmax, out, rowsum, n_cols);
      cuda::launch("three_pass_normalize", three_pass_normalize, grid, dim3(kTP), 0, 0, out, rowsum, n_cols, w, c);
      return;
    }
  }
}

// ---- cells for the views ------------------------------------------------------------------------------------
__global__ void output_cells_kernel(const float* out, const int32_t* writer, int64_t first, int64_t count,
                                    float* cells) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  cells[2 * i] = out[first + i];
  cells[2 * i + 1] = cell_value(writer[first + i] < 0 ? kCellUnwritten : kCellNormal);
}
__global__ void value_cells_kernel(const float* values, int64_t count, float* cells) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  cells[2 * i] = values[i];
  cells[2 * i + 1] = cell_value(kCellNormal);
}
void output_cells_cuda(const float* out, const int32_t* writer, int64_t n_cols, int64_t row0, int64_t n_rows,
                       float* cells) {
  const int64_t count = n_rows * n_cols;
  if (count <= 0) return;
  cuda::launch("softmax_output_cells", output_cells_kernel, dim3(unsigned((count + 255) / 256)), dim3(256), 0, 0,
               out, writer, row0 * n_cols, count, cells);
}
void value_cells_cuda(const float* values, int64_t count, float* cells) {
  if (count <= 0) return;
  cuda::launch("softmax_value_cells", value_cells_kernel, dim3(unsigned((count + 255) / 256)), dim3(256), 0, 0,
               values, count, cells);
}

}  // namespace kl::softmax::detail
