// Rung 5, CUDA side: the teaching variant. One block (128 threads) = one program = BLOCK_M query rows of
// one (batch, head); it streams K/V tiles of BLOCK_N keys through shared memory:
//   load K_j, V_j  ->  S = Q K_j^T * scale (masked -inf)  ->  per row (one warp per row):
//   m_new = max(m_old, rowmax(S)), alpha = rescale(...), P = exp(S - m_new), l = alpha l + rowsum(P)
//   ->  O = alpha O + P V_j.   At the end out = O / l (0 where l = 0).
// Shared memory: Q [BM, d], K and V [BN, d], S/P [BM, BN], O [BM, d], m/l/alpha [BM] -- fixed by the
// tile, whatever Lk is. Plain loops, no tensor cores: this variant is for reading and tracing.
#include <cfloat>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/warp_reduce.cuh"
#include "kernels/rungs/flash_attention.h"

namespace kl::flash_attention::detail {

using cuda::warp_max;
using cuda::warp_sum;

__device__ __forceinline__ void record_row(const FlashTraceView& t, int64_t row, int64_t step, float m0,
                                           float m1, float alpha, float l0, float l1, float rs) {
  const int64_t c = row * t.steps + step;
  t.m_before[c] = m0;
  t.m_after[c] = m1;
  t.alpha[c] = alpha;
  t.l_before[c] = l0;
  t.l_after[c] = l1;
  t.rowsum[c] = rs;
}

template <int D>
__global__ void flash_teaching(const float* __restrict__ q, const float* __restrict__ k,
                               const float* __restrict__ v, float* __restrict__ out, int64_t lq, int64_t lk,
                               int64_t heads, int64_t group, float scale, bool causal, int bm, int bn,
                               FlashTraceView t, bool record) {
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Ks = Qs + bm * D;
  float* Vs = Ks + bn * D;
  float* S = Vs + bn * D;
  float* O = S + bm * bn;
  float* m_s = O + bm * D;
  float* l_s = m_s + bm;
  float* a_s = l_s + bm;

  const int64_t bh = blockIdx.y, qb = blockIdx.x, q0 = qb * bm;
  const int64_t kv = kv_bh_of(bh, heads, group);  // grouped-query attention: this head's K/V
  const int rows_here = int(lq - q0 < bm ? lq - q0 : bm);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, warps = blockDim.x / 32;

  for (int idx = tid; idx < bm * D; idx += blockDim.x) {
    const int r = idx / D;
    Qs[idx] = r < rows_here ? q[(bh * lq + q0 + r) * D + idx % D] : 0.0f;
    O[idx] = 0.0f;
  }
  for (int r = tid; r < bm; r += blockDim.x) {
    m_s[r] = -INFINITY;
    l_s[r] = 0.0f;
  }
  const int64_t n_tiles = (lk + bn - 1) / bn;
  const int64_t n_run = tiles_to_run(qb, bm, bn, lq, lk, causal);
  const bool chosen = record && t.o_qblock == qb && t.o_bh == bh;
  __syncthreads();

  for (int64_t step = 0; step < n_run; ++step) {
    const int64_t k0 = step * bn;
    // load the K/V tile (keys past Lk: zeros)
    for (int idx = tid; idx < bn * D; idx += blockDim.x) {
      const int64_t j = k0 + idx / D;
      Ks[idx] = j < lk ? k[(kv * lk + j) * D + idx % D] : 0.0f;
      Vs[idx] = j < lk ? v[(kv * lk + j) * D + idx % D] : 0.0f;
    }
    __syncthreads();
    // S = Q K^T * scale, masked -inf
    for (int idx = tid; idx < bm * bn; idx += blockDim.x) {
      const int r = idx / bn, jj = idx % bn;
      const int64_t n_vis = r < rows_here ? attention::visible_keys(q0 + r, lq, lk, causal) : 0;
      float acc = -INFINITY;
      if (k0 + jj < n_vis) {
        acc = 0.0f;
        const float* Qr = Qs + r * D;
        const float* Kj = Ks + jj * D;
#pragma unroll 16
        for (int c = 0; c < D; ++c) {
          const int cc = (c + jj) & (D - 1);  // rotated so neighbouring keys hit different banks
          acc = fmaf(Qr[cc], Kj[cc], acc);
        }
        acc *= scale;
      }
      S[idx] = acc;
      if (chosen) t.s_tile[step * bm * bn + idx] = acc;
    }
    __syncthreads();
    // per row (one warp each): m_new = max(m_old, rowmax(S)), alpha, P = exp(S - m_new), l
    for (int r = warp; r < bm; r += warps) {
      float* Sr = S + r * bn;
      if (r >= rows_here) {  // the tail block's unused rows contribute nothing
        for (int jj = lane; jj < bn; jj += 32) Sr[jj] = 0.0f;
        continue;
      }
      float tile_max = -INFINITY;
      for (int jj = lane; jj < bn; jj += 32) tile_max = fmaxf(tile_max, Sr[jj]);
      tile_max = warp_max(tile_max);
      const float m0 = m_s[r], l0 = l_s[r];
      float m = m0, l = l0;
      const float alpha = rescale(m, l, tile_max);
      float rs = 0.0f;
      for (int jj = lane; jj < bn; jj += 32) rs += (Sr[jj] = tile_prob(Sr[jj], m));
      rs = warp_sum(rs);
      l += rs;
      __syncwarp();  // every lane has read m_s[r] and l_s[r] before lane 0 overwrites them
      if (lane == 0) {
        m_s[r] = m;
        l_s[r] = l;
        a_s[r] = alpha;
        if (record) record_row(t, bh * lq + q0 + r, step, m0, m, alpha, l0, l, rs);
      }
    }
    __syncthreads();
    // O_new = alpha * O_old + P V
    for (int idx = tid; idx < rows_here * D; idx += blockDim.x) {
      const int r = idx / D, c = idx % D;
      const float* Pr = S + r * bn;
      float acc = a_s[r] * O[idx];
      for (int jj = 0; jj < bn; ++jj) acc = fmaf(Pr[jj], Vs[jj * D + c], acc);
      O[idx] = acc;
    }
    __syncthreads();
    if (chosen) {
      for (int idx = tid; idx < bm * bn; idx += blockDim.x) t.p_tile[step * bm * bn + idx] = S[idx];
      for (int idx = tid; idx < bm * D; idx += blockDim.x) t.o_partial[step * bm * D + idx] = O[idx];
    }
    if (record && tid == 0) t.tile_state[(bh * t.q_blocks + qb) * t.steps + step] = kTileComputed;
    // the next iteration's loads overwrite Ks/Vs/S only after this barrier
    __syncthreads();
  }
  // Tiles skipped by the causal mask: the state carries forward, the trace says so.
  if (record)
    for (int64_t step = n_run; step < n_tiles; ++step) {
      for (int r = tid; r < rows_here; r += blockDim.x)
        record_row(t, bh * lq + q0 + r, step, m_s[r], m_s[r], 1.0f, l_s[r], l_s[r], 0.0f);
      if (chosen) {
        for (int idx = tid; idx < bm * bn; idx += blockDim.x) {
          t.s_tile[step * bm * bn + idx] = -INFINITY;
          t.p_tile[step * bm * bn + idx] = 0.0f;
        }
        for (int idx = tid; idx < bm * D; idx += blockDim.x) t.o_partial[step * bm * D + idx] = O[idx];
      }
      if (tid == 0) t.tile_state[(bh * t.q_blocks + qb) * t.steps + step] = kTileSkipped;
    }
  // out = O / l; a row that saw nothing (l = 0) gives 0
  for (int idx = tid; idx < rows_here * D; idx += blockDim.x) {
    const int r = idx / D;
    const float l = l_s[r];
    out[(bh * lq + q0 + r) * D + idx % D] = l > 0.0f ? O[idx] / l : 0.0f;
  }
}

// One thread per (row, key) cell of the chosen block: P of the key's tile times every alpha since,
// over the running sum (see compose_weights in flash_attention.h).
__global__ void compose_weights_kernel(FlashTraceView t, int64_t lq, int64_t lk, int64_t step, float* dst,
                                       int channels) {
  const int64_t cell = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int bm = t.block_m, bn = t.block_n;
  if (cell >= int64_t(bm) * lk) return;
  const int r = int(cell / lk);
  const int64_t j = cell % lk, k = j / bn;
  const int64_t i = t.o_qblock * bm + r, row = t.o_bh * lq + i;
  const int64_t tile_cell = (k * bm + r) * bn + (j - k * bn);
  const bool shown = i < lq && k < step && t.s_tile[tile_cell] != -INFINITY;
  float w = 0.0f;
  if (shown) {
    const float l = t.l_after[row * t.steps + step - 1];
    float f = 1.0f;
    for (int64_t s = step - 1; s > k; --s) f *= t.alpha[row * t.steps + s];
    w = l > 0.0f ? t.p_tile[tile_cell] * f / l : 0.0f;
  }
  dst[cell * channels] = w;
  if (channels >= 2) dst[cell * channels + 1] = cell_value(shown ? kCellNormal : kCellMasked);
}

void compose_weights_cuda(const FlashTraceView& t, int64_t lq, int64_t lk, int64_t step, float* dst,
                          int channels) {
  const int64_t cells = int64_t(t.block_m) * lk;
  const int threads = 256;
  cuda::launch("compose_weights", compose_weights_kernel, dim3(unsigned((cells + threads - 1) / threads)),
               dim3(threads), 0, 0, t, lq, lk, step, dst, channels);
}

template <int D>
static void launch_d(const float* q, const float* k, const float* v, float* out, const Shape& s, float scale,
                     bool causal, int bm, int bn, FlashTraceView* t) {
  const dim3 grid(unsigned((s.lq + bm - 1) / bm), unsigned(s.bh()));
  const FlashTraceView tv = t ? *t : FlashTraceView{};
  cuda::launch("flash_teaching", flash_teaching<D>, grid, dim3(kThreads), size_t(smem_bytes(bm, bn, D)), 0, q, k,
               v, out, s.lq, s.lk, s.heads, s.group(), scale, causal, bm, bn, tv, t != nullptr);
}

void run_cuda(const float* q, const float* k, const float* v, float* out, const Shape& s, float scale,
              bool causal, int bm, int bn, FlashTraceView* t) {
  switch (s.d) {
    case 16: return launch_d<16>(q, k, v, out, s, scale, causal, bm, bn, t);
    case 32: return launch_d<32>(q, k, v, out, s, scale, causal, bm, bn, t);
    case 64: return launch_d<64>(q, k, v, out, s, scale, causal, bm, bn, t);
    case 128: return launch_d<128>(q, k, v, out, s, scale, causal, bm, bn, t);
    case 256: return launch_d<256>(q, k, v, out, s, scale, causal, bm, bn, t);
    default: throw InputError(out_of_range_message("d", std::to_string(s.d), std::string("one of ") + head_dims_text()));
  }
}

}  // namespace kl::flash_attention::detail
