// Rung 6, CUDA side. The naive backward: seven elementwise steps, one thread per cell, the per-cell
// functions of flash_attention_backward.h (the CPU backend calls the same ones in loops). The teaching
// backward: one block (128 threads) = one program = one K/V tile of BLOCK_N keys of one (batch, head);
// K_j, V_j, dK_j, dV_j live in shared memory while the program walks the query tiles i that see tile j:
//   load Q_i, dO_i, L_i, D_i -> per cell: S = Q K^T * scale, P = exp(S - L), dP = dO V^T, dS = P (dP - D)
//   -> dV_j += P^T dO_i, dK_j += scale dS^T Q_i -> dQ_i += scale dS K_j (fp32 atomicAdd in global memory).
// Plain loops, no tensor cores: this variant is for reading and tracing.
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/flash_attention_backward.h"

namespace kl::flash_attention_backward::detail {

namespace {

constexpr int kCellThreads = 256;

dim3 cells_grid(int64_t n) { return dim3(unsigned((n + kCellThreads - 1) / kCellThreads)); }

template <void (*F)(const NaiveArgs&, int64_t)>
__global__ void naive_step(NaiveArgs a, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) F(a, i);
}

template <void (*F)(const NaiveArgs&, int64_t)>
void step(const char* name, const NaiveArgs& a, int64_t n) {
  cuda::launch(name, naive_step<F>, cells_grid(n), dim3(kCellThreads), 0, 0, a, n);
}

__global__ void rowsum_kernel(const float* dout, const float* o, float* drow, int64_t rows, int d) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int c = 0; c < d; ++c) acc = fmaf(dout[r * d + c], o[r * d + c], acc);
  drow[r] = acc;
}

__global__ void lse_kernel(const float* m_after, const float* l_after, float* lse, int64_t rows, int64_t steps) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float m = m_after[r * steps + steps - 1], l = l_after[r * steps + steps - 1];
  lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
}

struct Ptrs {
  const float *q, *k, *v, *lse, *drow, *dout;
  float *dq, *dk, *dv;
};

// The trace of one (kb, qb) step: its state; the chosen program's P, dS, dK, dV; the chosen query
// tile's dQ contribution (dq_add: this thread's cells, written by the caller).
__device__ void record_tiles(const BackwardTraceView& t, int64_t bh, int64_t kb, int64_t qb, bool computed,
                             const float* P, const float* dS, const float* dKs, const float* dVs) {
  const int bm = t.block_m, bn = t.block_n, d = t.d, tid = threadIdx.x;
  if (tid == 0) t.tile_state[(bh * t.k_blocks + kb) * t.q_blocks + qb] = computed ? kTileComputed : kTileSkipped;
  if (bh != t.c_bh || kb != t.c_kblock) return;
  for (int c = tid; c < bm * bn; c += blockDim.x) {
    t.p_tile[qb * bm * bn + c] = computed ? P[c] : 0.0f;
    t.ds_tile[qb * bm * bn + c] = computed ? dS[c] : 0.0f;
  }
  for (int c = tid; c < bn * d; c += blockDim.x) {
    t.dk_partial[qb * bn * d + c] = dKs[c];
    t.dv_partial[qb * bn * d + c] = dVs[c];
  }
}

template <int D>
__global__ void backward_teaching(Ptrs g, int64_t lq, int64_t lk, float scale, bool causal, int bm, int bn,
                                  BackwardTraceView t, bool record) {
  extern __shared__ float4 smem4[];
  float* Ks = reinterpret_cast<float*>(smem4);
  float* Vs = Ks + bn * D;
  float* dKs = Vs + bn * D;
  float* dVs = dKs + bn * D;
  float* Qs = dVs + bn * D;
  float* dOs = Qs + bm * D;
  float* P = dOs + bm * D;
  float* dS = P + bm * bn;
  float* Ls = dS + bm * bn;
  float* Ds = Ls + bm;

  const int64_t bh = blockIdx.y, kb = blockIdx.x, k0 = kb * bn;
  const int tid = threadIdx.x;
  const int64_t q_blocks = (lq + bm - 1) / bm;
  const bool chosen_q_bh = record && bh == t.c_bh;

  for (int idx = tid; idx < bn * D; idx += blockDim.x) {
    const int64_t j = k0 + idx / D;
    Ks[idx] = j < lk ? g.k[(bh * lk + j) * D + idx % D] : 0.0f;
    Vs[idx] = j < lk ? g.v[(bh * lk + j) * D + idx % D] : 0.0f;
    dKs[idx] = 0.0f;
    dVs[idx] = 0.0f;
  }
  __syncthreads();
  const int64_t first = first_q_tile(kb, bm, bn, lq, lk, causal);
  if (record)
    for (int64_t qb = 0; qb < first; ++qb) {  // skipped by the causal mask: nothing added
      record_tiles(t, bh, kb, qb, false, P, dS, dKs, dVs);
      if (chosen_q_bh && qb == t.c_qblock)
        for (int c = tid; c < bm * D; c += blockDim.x) t.dq_contrib[kb * bm * D + c] = 0.0f;
    }

  for (int64_t qb = first; qb < q_blocks; ++qb) {
    const int64_t q0 = qb * bm;
    for (int idx = tid; idx < bm * D; idx += blockDim.x) {
      const int64_t row = bh * lq + q0 + idx / D;
      const bool in = q0 + idx / D < lq;
      Qs[idx] = in ? g.q[row * D + idx % D] : 0.0f;
      dOs[idx] = in ? g.dout[row * D + idx % D] : 0.0f;
    }
    for (int r = tid; r < bm; r += blockDim.x) {
      const bool in = q0 + r < lq;
      Ls[r] = in ? g.lse[bh * lq + q0 + r] : -INFINITY;
      Ds[r] = in ? g.drow[bh * lq + q0 + r] : 0.0f;
    }
    __syncthreads();
    // per cell: P = exp(S - L), dS = P (dP - D); masked cells and rows past Lq: 0
    for (int idx = tid; idx < bm * bn; idx += blockDim.x) {
      const int r = idx / bn, jj = idx % bn;
      const int64_t i = q0 + r;
      const int64_t n_vis = i < lq ? attention::visible_keys(i, lq, lk, causal) : 0;
      float p = 0.0f, ds = 0.0f;
      if (k0 + jj < n_vis) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll 16
        for (int c = 0; c < D; ++c) {
          const int cc = (c + jj) & (D - 1);  // rotated so neighbouring keys hit different banks
          s = fmaf(Qs[r * D + cc], Ks[jj * D + cc], s);
          dp = fmaf(dOs[r * D + cc], Vs[jj * D + cc], dp);
        }
        p = recomputed_prob(s * scale, Ls[r]);
        ds = p * (dp - Ds[r]);
      }
      P[idx] = p;
      dS[idx] = ds;
    }
    __syncthreads();
    // dV_j += P^T dO_i, dK_j += scale dS^T Q_i
    for (int idx = tid; idx < bn * D; idx += blockDim.x) {
      const int jj = idx / D, c = idx % D;
      float acc_v = 0.0f, acc_k = 0.0f;
      for (int r = 0; r < bm; ++r) {
        acc_v = fmaf(P[r * bn + jj], dOs[r * D + c], acc_v);
        acc_k = fmaf(dS[r * bn + jj], Qs[r * D + c], acc_k);
      }
      dVs[idx] += acc_v;
      dKs[idx] += scale * acc_k;
    }
    // dQ_i += scale dS K_j: every program adds into the same rows, hence atomics
    for (int idx = tid; idx < bm * D; idx += blockDim.x) {
      const int r = idx / D, c = idx % D;
      float acc = 0.0f;
      for (int jj = 0; jj < bn; ++jj) acc = fmaf(dS[r * bn + jj], Ks[jj * D + c], acc);
      const float add = scale * acc;
      if (q0 + r < lq) atomicAdd(&g.dq[(bh * lq + q0 + r) * D + c], add);
      if (chosen_q_bh && qb == t.c_qblock) t.dq_contrib[kb * bm * D + idx] = add;
    }
    __syncthreads();
    if (record) record_tiles(t, bh, kb, qb, true, P, dS, dKs, dVs);
    __syncthreads();  // the next query tile's loads overwrite Q, dO, P, dS only after this
  }
  for (int idx = tid; idx < bn * D; idx += blockDim.x) {
    const int64_t j = k0 + idx / D;
    if (j < lk) {
      g.dk[(bh * lk + j) * D + idx % D] = dKs[idx];
      g.dv[(bh * lk + j) * D + idx % D] = dVs[idx];
    }
  }
}

template <int D>
void launch_d(const Ptrs& g, const Shape& s, float scale, bool causal, int bm, int bn, BackwardTraceView* t) {
  const dim3 grid(unsigned((s.lk + bn - 1) / bn), unsigned(s.bh()));
  const BackwardTraceView tv = t ? *t : BackwardTraceView{};
  cuda::launch("flash_backward_teaching", backward_teaching<D>, grid, dim3(kThreads),
               size_t(smem_bytes(bm, bn, D)), 0, g, s.lq, s.lk, scale, causal, bm, bn, tv, t != nullptr);
}

}  // namespace

void naive_cuda(const NaiveArgs& a) {
  const int64_t rows = a.bh * a.lq, cells = rows * a.lk;
  step<naive_scores>("naive_scores", a, cells);
  step<naive_softmax_row>("naive_softmax_row", a, rows);
  step<naive_dp>("naive_dp", a, cells);
  step<naive_rowsum>("naive_rowsum", a, rows);
  step<naive_ds>("naive_ds", a, cells);
  step<naive_dkdv>("naive_dkdv", a, a.bh * a.lk * a.d);
  step<naive_dq>("naive_dq", a, rows * a.d);
}

void rowsum_cuda(const float* dout, const float* o, float* drow, int64_t rows, int d) {
  cuda::launch("backward_rowsum", rowsum_kernel, cells_grid(rows), dim3(kCellThreads), 0, 0, dout, o, drow, rows, d);
}

void lse_from_trace_cuda(const float* m_after, const float* l_after, float* lse, int64_t rows, int64_t steps) {
  cuda::launch("backward_lse", lse_kernel, cells_grid(rows), dim3(kCellThreads), 0, 0, m_after, l_after, lse, rows,
               steps);
}

void teaching_cuda(const float* q, const float* k, const float* v, const float* lse, const float* drow,
                   const float* dout, float* dq, float* dk, float* dv, const Shape& s, float scale, bool causal,
                   int bm, int bn, BackwardTraceView* t) {
  const Ptrs g{q, k, v, lse, drow, dout, dq, dk, dv};
  switch (s.d) {
    case 16: return launch_d<16>(g, s, scale, causal, bm, bn, t);
    case 32: return launch_d<32>(g, s, scale, causal, bm, bn, t);
    case 64: return launch_d<64>(g, s, scale, causal, bm, bn, t);
    case 128: return launch_d<128>(g, s, scale, causal, bm, bn, t);
    default: throw InputError(out_of_range_message("d", std::to_string(s.d), "one of 16, 32, 64, 128"));
  }
}

}  // namespace kl::flash_attention_backward::detail
