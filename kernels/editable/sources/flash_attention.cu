// Rung 5: FlashAttention's forward pass (FlashAttention-2, Algorithm 1), the `teaching` variant:
// out = softmax(Q K^T * scale) V without ever holding all of K and V on chip.
//
// Kernel: flash_teaching, launched as a grid of (ceil(Lq / BLOCK_M), batch * heads) programs (CUDA
// blocks) of 128 threads. Program (qb, bh) owns query rows qb * BLOCK_M .. of (batch, head) bh and streams
// K and V through shared memory in tiles of BLOCK_N keys. Per query row it keeps a running max m, a
// running sum l and a partial output O, and for every K/V tile j:
//     S      = Q_i K_j^T * scale                 (keys the row may not see: -inf)
//     m_new  = max(m_old, rowmax(S))
//     alpha  = exp(m_old - m_new)                 what the old terms must shrink by: they were summed
//                                                 as exp(s - m_old) and now have to be exp(s - m_new)
//     P      = exp(S - m_new)
//     l_new  = alpha * l_old + rowsum(P)
//     O_new  = alpha * O_old + P V_j
// and at the end out = O / l (0 where l = 0: a row that sees no key). Shared memory is fixed by the
// tile, not by Lk: Q [BLOCK_M, d], K and V [BLOCK_N, d], S/P [BLOCK_M, BLOCK_N], O [BLOCK_M, d] and
// m, l, alpha [BLOCK_M], all float.
//
// Parameters:
//   q, out        [batch * heads, Lq, d]
//   k, v          [batch * kv_heads, Lk, d]; grouped-query attention: query head h reads kv head
//                 h / group, group = heads / kv_heads (1: multi-head attention)
//   trace_*       what the panel draws, stored by the kernel like any output (a trace the host did not
//                 ask for is absent: its stores are dropped). Row r = bh * Lq + i, step = K/V tile:
//     trace_m_before, trace_m_after, trace_alpha, trace_l_before, trace_l_after, trace_rowsum
//                 [batch * heads * Lq, steps]: m and l before and after the step, its alpha, rowsum(P)
//     trace_tile_state  [batch * heads * q_blocks, steps]: 1 computed, 2 skipped (causal)
//     trace_s, trace_p, trace_o  for the one chosen program (chosen_bh, chosen_qblock) only, per step:
//                 S [steps, BLOCK_M, BLOCK_N], P [steps, BLOCK_M, BLOCK_N], O (not yet / l) [steps, BLOCK_M, d]
//   Lq, Lk, d     queries, keys, head dimension (16 .. 256)
//   heads, group  query heads per batch, and query heads per kv head
//   scale         the scores' factor (1 / sqrt(d) unless given)
//   causal        1: row i sees keys j < i + (Lk - Lq) + 1, the mask aligned bottom-right (the last query
//                 sees the last key), as rung 4, FlashAttention 2.1+ and PyTorch's causal_lower_right;
//                 PyTorch's is_causal=True aligns it top-left (the gallery's causal_top_left)
//   BLOCK_M, BLOCK_N  query rows per program, keys per K/V tile (powers of two in [16, 128])
//   chosen_bh, chosen_qblock  the program whose S, P and O the trace keeps (chosen_qblock -1: none)
#include "kl.cuh"

// How many keys query row i sees: all of them, or with the causal mask those up to its diagonal, aligned
// bottom-right.
__device__ int64_t visible_keys(int64_t i, int64_t Lq, int64_t Lk, int causal) {
  if (!causal) return Lk;
  const int64_t n = i + (Lk - Lq) + 1;
  return n < 0 ? 0 : (n > Lk ? Lk : n);
}

// The K/V tiles program qb computes: those its last row sees (the last row sees the most keys). With the
// causal mask the tiles past it are skipped, never loaded.
__device__ int64_t tiles_to_run(int64_t qb, int BLOCK_M, int BLOCK_N, int64_t Lq, int64_t Lk, int causal) {
  const int64_t last_row = (qb + 1) * BLOCK_M < Lq ? (qb + 1) * BLOCK_M - 1 : Lq - 1;
  return (visible_keys(last_row, Lq, Lk, causal) + BLOCK_N - 1) / BLOCK_N;
}

__global__ void flash_teaching(kl::Tensor<float> q, kl::Tensor<float> k, kl::Tensor<float> v,
                               kl::Tensor<float> out, kl::Tensor<float> trace_m_before,
                               kl::Tensor<float> trace_m_after, kl::Tensor<float> trace_alpha,
                               kl::Tensor<float> trace_l_before, kl::Tensor<float> trace_l_after,
                               kl::Tensor<float> trace_rowsum, kl::Tensor<uint8_t> trace_tile_state,
                               kl::Tensor<float> trace_s, kl::Tensor<float> trace_p, kl::Tensor<float> trace_o,
                               int64_t Lq, int64_t Lk, int d, int64_t heads, int64_t group, float scale,
                               int causal, int BLOCK_M, int BLOCK_N, int64_t chosen_bh, int64_t chosen_qblock) {
  extern __shared__ float smem[];
  float* Qs = smem;                      // [BLOCK_M, d]        this program's queries
  float* Ks = Qs + BLOCK_M * d;          // [BLOCK_N, d]        the K tile
  float* Vs = Ks + BLOCK_N * d;          // [BLOCK_N, d]        the V tile
  float* S = Vs + BLOCK_N * d;           // [BLOCK_M, BLOCK_N]  the scores, then P in their place
  float* O = S + BLOCK_M * BLOCK_N;      // [BLOCK_M, d]        the running output, not yet divided by l
  float* m = O + BLOCK_M * d;            // [BLOCK_M]           the running max of each row
  float* l = m + BLOCK_M;                // [BLOCK_M]           the running sum of each row
  float* alpha = l + BLOCK_M;            // [BLOCK_M]           this step's rescale of each row

  const int64_t qb = blockIdx.x, bh = blockIdx.y, q_blocks = gridDim.x;
  const int64_t kv = (bh / heads) * (heads / group) + (bh % heads) / group;  // this head's K and V
  const int64_t q0 = qb * BLOCK_M;
  const int rows = Lq - q0 < BLOCK_M ? int(Lq - q0) : BLOCK_M;  // the last program may have fewer
  const int tid = threadIdx.x, threads = blockDim.x;
  const int64_t steps = (Lk + BLOCK_N - 1) / BLOCK_N;
  const int64_t n_run = tiles_to_run(qb, BLOCK_M, BLOCK_N, Lq, Lk, causal);
  const bool chosen = bh == chosen_bh && qb == chosen_qblock;

  // Q into shared memory (rows past Lq: 0); O = 0, m = -inf, l = 0.
  for (int idx = tid; idx < BLOCK_M * d; idx += threads) {
    const int r = idx / d;
    Qs[idx] = q.load((bh * Lq + q0 + r) * d + idx % d, r < rows, 0.0f);
    O[idx] = 0.0f;
  }
  for (int r = tid; r < BLOCK_M; r += threads) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  __syncthreads();

  for (int64_t step = 0; step < n_run; ++step) {
    const int64_t k0 = step * BLOCK_N;  // the tile's first key
    // 1. The K and V tile into shared memory (keys past Lk: 0).
    for (int idx = tid; idx < BLOCK_N * d; idx += threads) {
      const int64_t j = k0 + idx / d;
      Ks[idx] = k.load((kv * Lk + j) * d + idx % d, j < Lk, 0.0f);
      Vs[idx] = v.load((kv * Lk + j) * d + idx % d, j < Lk, 0.0f);
    }
    __syncthreads();

    // 2. S = Q K^T * scale, one thread per (row, key); a key the row may not see scores -inf.
    for (int idx = tid; idx < BLOCK_M * BLOCK_N; idx += threads) {
      const int r = idx / BLOCK_N, jj = idx % BLOCK_N;
      float s = -INFINITY;
      if (r < rows && k0 + jj < visible_keys(q0 + r, Lq, Lk, causal)) {
        float dot = 0.0f;
        for (int i = 0; i < d; ++i) {
          const int c = (i + jj) & (d - 1);  // (i + jj) % d: neighbouring keys start at different columns, so
                                             // their threads read different shared-memory banks
          dot += Qs[r * d + c] * Ks[jj * d + c];
        }
        s = dot * scale;
      }
      S[idx] = s;
      if (chosen) trace_s.store(step * BLOCK_M * BLOCK_N + idx, s);
    }
    __syncthreads();

    // 3. The online softmax, one thread per row: the new max, alpha, P = exp(S - m_new), the new sum.
    for (int r = tid; r < BLOCK_M; r += threads) {
      float* P = S + r * BLOCK_N;  // the row's scores, overwritten by P
      if (r >= rows) {             // rows past Lq add nothing
        for (int jj = 0; jj < BLOCK_N; ++jj) P[jj] = 0.0f;
        continue;
      }
      float tile_max = -INFINITY;
      for (int jj = 0; jj < BLOCK_N; ++jj) tile_max = fmaxf(tile_max, P[jj]);
      const float m_old = m[r], l_old = l[r];
      const float m_new = fmaxf(m_old, tile_max);
      // A row that has seen no key yet keeps alpha = 1 (exp(-inf - -inf) would be NaN); at its first
      // tile m_old = -inf and alpha = exp(-inf) = 0: l and O held nothing.
      const float a = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
      float rowsum = 0.0f;
      for (int jj = 0; jj < BLOCK_N; ++jj) {
        P[jj] = P[jj] == -INFINITY ? 0.0f : expf(P[jj] - m_new);  // a masked key: 0
        rowsum += P[jj];
      }
      const float l_new = a * l_old + rowsum;
      m[r] = m_new;
      l[r] = l_new;
      alpha[r] = a;
      const int64_t at = (bh * Lq + q0 + r) * steps + step;
      trace_m_before.store(at, m_old);
      trace_m_after.store(at, m_new);
      trace_alpha.store(at, a);
      trace_l_before.store(at, l_old);
      trace_l_after.store(at, l_new);
      trace_rowsum.store(at, rowsum);
    }
    __syncthreads();

    // 4. O = alpha * O + P V, one thread per (row, column).
    for (int idx = tid; idx < rows * d; idx += threads) {
      const int r = idx / d, c = idx % d;
      float acc = alpha[r] * O[idx];
      for (int jj = 0; jj < BLOCK_N; ++jj) acc += S[r * BLOCK_N + jj] * Vs[jj * d + c];
      O[idx] = acc;
    }
    __syncthreads();

    // The chosen program's P and O after this step. (The next step's loads write only Ks and Vs, and
    // S after a barrier: reading S and O here is safe.)
    if (chosen) {
      for (int idx = tid; idx < BLOCK_M * BLOCK_N; idx += threads) trace_p.store(step * BLOCK_M * BLOCK_N + idx, S[idx]);
      for (int idx = tid; idx < BLOCK_M * d; idx += threads) trace_o.store(step * BLOCK_M * d + idx, O[idx]);
    }
    if (tid == 0) trace_tile_state.store((bh * q_blocks + qb) * steps + step, 1);  // computed
  }

  // Tiles the causal mask skipped: the state carries forward (alpha 1, rowsum 0), the trace says so.
  for (int64_t step = n_run; step < steps; ++step) {
    for (int r = tid; r < rows; r += threads) {
      const int64_t at = (bh * Lq + q0 + r) * steps + step;
      trace_m_before.store(at, m[r]);
      trace_m_after.store(at, m[r]);
      trace_alpha.store(at, 1.0f);
      trace_l_before.store(at, l[r]);
      trace_l_after.store(at, l[r]);
      trace_rowsum.store(at, 0.0f);
    }
    if (chosen) {
      for (int idx = tid; idx < BLOCK_M * BLOCK_N; idx += threads) {
        trace_s.store(step * BLOCK_M * BLOCK_N + idx, -INFINITY);
        trace_p.store(step * BLOCK_M * BLOCK_N + idx, 0.0f);
      }
      for (int idx = tid; idx < BLOCK_M * d; idx += threads) trace_o.store(step * BLOCK_M * d + idx, O[idx]);
    }
    if (tid == 0) trace_tile_state.store((bh * q_blocks + qb) * steps + step, 2);  // skipped
  }

  // out = O / l; a row that saw no key (l = 0) gives 0.
  for (int idx = tid; idx < rows * d; idx += threads) {
    const int r = idx / d;
    out.store((bh * Lq + q0 + r) * d + idx % d, l[r] > 0.0f ? O[idx] / l[r] : 0.0f);
  }
}
