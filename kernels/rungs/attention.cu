// Rung 4, CUDA side. One block = one program = kBlockQ queries of one (batch, head).
//   1. The whole block copies ALL of K and V of its (batch, head), and its kBlockQ query rows, into
//      shared memory (float4 loads). This is the wall: (2 * Lk * d + kBlockQ * d) * 4 bytes must fit in
//      one block (smem_bytes() in attention.h).
//   2. Warp w takes queries w, w + kWarps. Lane L scores keys j0 + L (a full dot product over d read
//      from shared memory, columns rotated by the lane so the 32 lanes hit 32 banks), pass 1 takes the
//      row max, pass 2 forms p = exp(s - max), the row sum l and o = sum p v (lane L owns output
//      columns L, L + 32, ...; p is broadcast with a shuffle), then out = o / l.
//   3. Optionally pass 3 writes the scores S and the weights P = p / l for the views.
// The `unfused` variant (standard attention) is two more kernels here, around rung 3's softmax:
//   attention_scores  one 16 x 16 block per 16 x 16 tile of S: the tile's 16 query rows and 16 key rows
//                     in shared memory, one score per thread, written to global memory (masked -inf).
//   attention_pv      one 16 x 16 block per 16 x 16 tile of O = P V, a tiled matrix product over keys.
#include <cfloat>

#include "kernels/runtime/cell_state.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/warp_reduce.cuh"

namespace kl::attention::detail {

using cuda::warp_max;
using cuda::warp_sum;

template <int D>
__device__ __forceinline__ float score(const float* Qr, const float* Kj, int lane, float scale) {
  float acc = 0.0f;
#pragma unroll 16
  for (int c = 0; c < D; ++c) {
    const int cc = (c + lane) & (D - 1);  // rotation: lanes with different keys read different banks
    acc = fmaf(Qr[cc], Kj[cc], acc);
  }
  // __fmul_rn is never contracted into an FMA with what follows (s - m): every pass that recomputes a
  // score gets the same float, so the weights written for the views sum to exactly what l summed.
  return __fmul_rn(acc, scale);
}

template <int D>
__global__ void attention_smem(const float* __restrict__ q, const float* __restrict__ k,
                               const float* __restrict__ v, float* __restrict__ out, int64_t lq, int64_t lk,
                               float scale, bool causal, float* scores, float* weights, int channels) {
  extern __shared__ float4 smem4[];
  float* Ks = reinterpret_cast<float*>(smem4);
  float* Vs = Ks + lk * D;
  float* Qs = Vs + lk * D;
  const int64_t bh = blockIdx.y;
  const int64_t q0 = int64_t(blockIdx.x) * kBlockQ;

  // 1. The wall: all of K and V (and this block's queries) into shared memory.
  const float4* k4 = reinterpret_cast<const float4*>(k + bh * lk * D);
  const float4* v4 = reinterpret_cast<const float4*>(v + bh * lk * D);
  float4* Ks4 = reinterpret_cast<float4*>(Ks);
  float4* Vs4 = reinterpret_cast<float4*>(Vs);
  for (int64_t idx = threadIdx.x; idx < lk * D / 4; idx += blockDim.x) {
    Ks4[idx] = k4[idx];
    Vs4[idx] = v4[idx];
  }
  for (int idx = threadIdx.x; idx < kBlockQ * D; idx += blockDim.x) {
    const int64_t i = q0 + idx / D;
    Qs[idx] = i < lq ? q[(bh * lq + i) * D + idx % D] : 0.0f;
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int PER = (D + 31) / 32;  // output columns per lane
  for (int r = warp; r < kBlockQ; r += kWarps) {
    const int64_t i = q0 + r;
    if (i >= lq) break;  // uniform across the warp
    const int64_t n = visible_keys(i, lq, lk, causal);
    const float* Qr = Qs + r * D;

    // pass 1: m = max_j s_j
    float m = -INFINITY;
    for (int64_t j = lane; j < n; j += 32) m = fmaxf(m, score<D>(Qr, Ks + j * D, lane, scale));
    m = warp_max(m);

    // pass 2: p_j = exp(s_j - m), l = sum p_j, o = sum p_j v_j
    float l = 0.0f, o[PER];
#pragma unroll
    for (int u = 0; u < PER; ++u) o[u] = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += 32) {
      const int64_t j = j0 + lane;
      const float p = j < n ? expf(score<D>(Qr, Ks + j * D, lane, scale) - m) : 0.0f;
      l += p;
      const int cnt = int(n - j0 < 32 ? n - j0 : 32);
      for (int t = 0; t < cnt; ++t) {
        const float pt = __shfl_sync(0xffffffffu, p, t);
        const float* Vj = Vs + (j0 + t) * D;
#pragma unroll
        for (int u = 0; u < PER; ++u)
          if (lane + 32 * u < D) o[u] = fmaf(pt, Vj[lane + 32 * u], o[u]);
      }
    }
    l = warp_sum(l);
    float* orow = out + (bh * lq + i) * D;
#pragma unroll
    for (int u = 0; u < PER; ++u)
      if (lane + 32 * u < D) orow[lane + 32 * u] = n > 0 ? o[u] / l : 0.0f;  // nothing seen: 0

    // pass 3 (views): S and P over the whole row, masked cells marked
    if (scores || weights) {
      const int64_t base = (bh * lq + i) * lk;
      for (int64_t j = lane; j < lk; j += 32) {
        const bool vis = j < n;
        const float sc = vis ? score<D>(Qr, Ks + j * D, lane, scale) : -INFINITY;
        const float p = vis ? expf(sc - m) / l : 0.0f;
        const int64_t cell = (base + j) * channels;
        if (scores) scores[cell] = sc;
        if (weights) weights[cell] = p;
        if (channels >= 2) {
          if (scores) scores[cell + 1] = cell_value(vis ? kCellNormal : kCellMasked);
          if (weights) weights[cell + 1] = cell_value(vis ? kCellNormal : kCellMasked);
        }
      }
    }
  }
}

template <int D>
static void launch_d(const float* q, const float* k, const float* v, float* out, const Shape& s, float scale,
                     bool causal, const Extras& x) {
  const dim3 grid(unsigned((s.lq + kBlockQ - 1) / kBlockQ), unsigned(s.bh()));
  cuda::launch("attention_smem", attention_smem<D>, grid, dim3(kWarps * 32), size_t(smem_bytes(s.lk, D)), 0,
               q, k, v, out, s.lq, s.lk, scale, causal, x.scores, x.weights, x.channels);
}

template <int D>
__global__ void attention_scores(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ S,
                                 int64_t lq, int64_t lk, float scale, bool causal) {
  constexpr int T = kUnfusedTile;
  __shared__ float Qs[T][D];
  __shared__ float Ks[T][D + 1];  // padded: the 16 threads of a row read 16 different keys
  const int64_t bh = blockIdx.z, i0 = int64_t(blockIdx.y) * T, j0 = int64_t(blockIdx.x) * T;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * T + tx;
  for (int idx = tid; idx < T * D; idx += T * T) {
    const int r = idx / D, c = idx % D;
    Qs[r][c] = i0 + r < lq ? q[(bh * lq + i0 + r) * D + c] : 0.0f;
    Ks[r][c] = j0 + r < lk ? k[(bh * lk + j0 + r) * D + c] : 0.0f;
  }
  __syncthreads();
  const int64_t i = i0 + ty, j = j0 + tx;
  if (i >= lq || j >= lk) return;
  float acc = 0.0f;
#pragma unroll 16
  for (int c = 0; c < D; ++c) acc = fmaf(Qs[ty][c], Ks[tx][c], acc);
  S[(bh * lq + i) * lk + j] = j < visible_keys(i, lq, lk, causal) ? __fmul_rn(acc, scale) : -INFINITY;
}

__global__ void attention_pv(const float* __restrict__ P, const float* __restrict__ v, float* __restrict__ out,
                             int64_t lq, int64_t lk, int d) {
  constexpr int T = kUnfusedTile;
  __shared__ float Ps[T][T + 1];
  __shared__ float Vs[T][T + 1];
  const int64_t bh = blockIdx.z, i0 = int64_t(blockIdx.y) * T;
  const int c0 = blockIdx.x * T, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = i0 + ty;
  const int c = c0 + tx;  // d is a multiple of 16: always inside
  float acc = 0.0f;
  for (int64_t j0 = 0; j0 < lk; j0 += T) {
    Ps[ty][tx] = i < lq && j0 + tx < lk ? P[(bh * lq + i) * lk + j0 + tx] : 0.0f;
    Vs[ty][tx] = j0 + ty < lk ? v[(bh * lk + j0 + ty) * d + c] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < T; ++t) acc = fmaf(Ps[ty][t], Vs[t][tx], acc);
    __syncthreads();
  }
  if (i < lq) out[(bh * lq + i) * d + c] = acc;
}

template <int D>
static void scores_d(const float* q, const float* k, float* S, const Shape& s, float scale, bool causal) {
  const dim3 grid(unsigned((s.lk + kUnfusedTile - 1) / kUnfusedTile), unsigned((s.lq + kUnfusedTile - 1) / kUnfusedTile),
                  unsigned(s.bh()));
  cuda::launch("attention_scores", attention_scores<D>, grid, dim3(kUnfusedTile, kUnfusedTile), 0, 0, q, k, S, s.lq,
               s.lk, scale, causal);
}

void scores_cuda(const float* q, const float* k, float* S, const Shape& s, float scale, bool causal) {
  switch (s.d) {
    case 16: return scores_d<16>(q, k, S, s, scale, causal);
    case 32: return scores_d<32>(q, k, S, s, scale, causal);
    case 64: return scores_d<64>(q, k, S, s, scale, causal);
    case 128: return scores_d<128>(q, k, S, s, scale, causal);
    default: throw InputError(out_of_range_message("d", std::to_string(s.d), "one of 16, 32, 64, 128"));
  }
}

void pv_cuda(const float* p, const float* v, float* out, const Shape& s) {
  const dim3 grid(unsigned(s.d / kUnfusedTile), unsigned((s.lq + kUnfusedTile - 1) / kUnfusedTile), unsigned(s.bh()));
  cuda::launch("attention_pv", attention_pv, grid, dim3(kUnfusedTile, kUnfusedTile), 0, 0, p, v, out, s.lq, s.lk,
               s.d);
}

void run_cuda(const float* q, const float* k, const float* v, float* out, const Shape& s, float scale,
              bool causal, const Extras& x) {
  switch (s.d) {
    case 16: return launch_d<16>(q, k, v, out, s, scale, causal, x);
    case 32: return launch_d<32>(q, k, v, out, s, scale, causal, x);
    case 64: return launch_d<64>(q, k, v, out, s, scale, causal, x);
    case 128: return launch_d<128>(q, k, v, out, s, scale, causal, x);
    default: throw InputError(out_of_range_message("d", std::to_string(s.d), "one of 16, 32, 64, 128"));
  }
}

}  // namespace kl::attention::detail
