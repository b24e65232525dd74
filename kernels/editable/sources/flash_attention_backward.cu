// Rung 6: the backward pass of attention, FlashAttention-2's way (its Algorithm 2), tile by tile.
// For out = softmax(S) V with S = Q K^T * scale and P = softmax(S), the chain rule gives
//     dV = P^T dO     dP = dO V^T     D_i = rowsum(dO_i * O_i) = rowsum(P_i * dP_i)
//     dS = P * (dP - D)     dQ = scale * dS K     dK = scale * dS^T Q
// The forward saved one number per query row, L = m + log l, so P is recomputed here as exp(S - L),
// tile by tile, instead of being kept as an Lq x Lk matrix. D is computed before this kernel runs.
//
// Kernel: backward_teaching(q, k, v, lse, drow, dout, dq, dk, dv, tile_state, p_tile, ds_tile, dk_partial,
// dv_partial, dq_contrib, lq, lk, d, group, scale, causal, BLOCK_M, BLOCK_N, c_bh, c_kblock, c_qblock),
// launched as (ceil(Lk / BLOCK_N), B*Hkv) programs (CUDA blocks) of 128 threads, with
// (4 BLOCK_N d + 2 BLOCK_M d + 2 BLOCK_M BLOCK_N + 2 BLOCK_M) * 4 bytes of dynamic shared memory.
//   q, dout        [B*H, Lq, d] the queries and the gradient of the output (H query heads)
//   k, v           [B*Hkv, Lk, d] the keys and values (Hkv kv heads; Hkv = H: multi-head attention)
//   lse, drow      [B*H, Lq] the forward's L = m + log l (-inf: the row sees no key) and D
//   dq             [B*H, Lq, d] zeroed by the host; every program adds its part with atomic_add
//   dk, dv         [B*Hkv, Lk, d] written once, by the program that owns the keys
//   lq, lk, d      the lengths and the head dimension (16, 32, 64 or 128)
//   group          H / Hkv, query heads per kv head (grouped-query attention; 1: each head its own K, V).
//                  Query head h reads kv head h / group; since H = group * Hkv, the same division maps a
//                  (batch, head) index: bh = b * H + h reads kv (batch, head) bh / group = b * Hkv + h / group,
//                  and kv (batch, head) kv is read by query (batch, head)s kv * group .. kv * group + group - 1
//   scale, causal  the softmax scale; 1: query i sees keys j <= i + (Lk - Lq) (bottom-right aligned)
//   BLOCK_M        query rows per query tile (the inner loop); BLOCK_N keys per K/V tile (one program)
// The trace the views draw (each may be absent):
//   tile_state     [B*H, k_blocks, q_blocks]: per query head, 1 where program kb computed query tile qb,
//                  2 where the causal mask let it skip the tile (no row of it sees a key of the program's tile)
//   p_tile, ds_tile        [q_blocks, BLOCK_M, BLOCK_N]: P and dS of query head c_bh in program c_kblock (of
//                          c_bh's kv head) at each of c_bh's steps
//   dk_partial, dv_partial [q_blocks, BLOCK_N, d]: that program's dK_j and dV_j after each of those steps
//                          (with group > 1 they include what the group's query heads before c_bh added)
//   dq_contrib     [k_blocks, BLOCK_M, d]: what each program added to dQ of query tile (c_bh, c_qblock)
//
// Program (kb, kv) keeps K_j, V_j of kv head kv and its running dK_j, dV_j in shared memory and walks, for
// each query head bh of the group that reads kv head kv, the query tiles i that can see its keys:
//   load Q_i, dO_i, L_i, D_i
//   per cell: S = Q K^T * scale, P = exp(S - L), dP = dO V^T, dS = P * (dP - D)   (masked cells: 0)
//   dV_j += P^T dO_i,  dK_j += scale * dS^T Q_i
//   dQ_i += scale * dS K_j      (every program adds into the same rows of dQ: atomics)
// On the GPU the programs' atomic adds into dQ land in any order, so dQ's last bits can change from run
// to run; on the CPU the programs run one after the other, in order, so dQ is the same every run.
//
// Grouped-query attention: dK_j and dV_j of a kv head are sums over the group's query heads, so one
// program per K/V tile of a kv head loops over those heads and keeps adding into the same dK_j, dV_j in
// shared memory: they are summed in a fixed order, written once, deterministic, with no atomics and no
// extra memory. (A program per query head would need atomics on dK and dV, or a [B*H, Lk, d] scratch and a
// second kernel to sum it; both cost more and the first makes dK and dV change from run to run.) The
// price: H / Hkv times fewer, longer programs than a grid per query head.
#include "kl.cuh"

// The number of keys query i sees: all Lk, or (causal, bottom-right aligned) min(Lk, i + Lk - Lq + 1).
__device__ int64_t visible_keys(int64_t i, int64_t lq, int64_t lk, int causal) {
  if (!causal) return lk;
  const int64_t n = i + (lk - lq) + 1;
  return n < 0 ? 0 : (n > lk ? lk : n);
}

// The first query tile with a row that sees a key of K/V tile kb (later rows see at least as many keys).
__device__ int64_t first_q_tile(int64_t kb, int bm, int bn, int64_t lq, int64_t lk, int causal) {
  const int64_t q_blocks = (lq + bm - 1) / bm;
  if (!causal) return 0;
  for (int64_t qb = 0; qb < q_blocks; ++qb) {
    const int64_t q_last = (qb + 1) * bm < lq ? (qb + 1) * bm - 1 : lq - 1;
    if (visible_keys(q_last, lq, lk, 1) > kb * bn) return qb;
  }
  return q_blocks;
}

// P recomputed from the saved log-sum-exp; a masked score or a row that saw nothing gives 0.
__device__ float recomputed_prob(float s, float lse) {
  return (s == -INFINITY || lse == -INFINITY) ? 0.0f : expf(s - lse);
}

__global__ void backward_teaching(kl::Tensor<float> q, kl::Tensor<float> k, kl::Tensor<float> v,
                                  kl::Tensor<float> lse, kl::Tensor<float> drow, kl::Tensor<float> dout,
                                  kl::Tensor<float> dq, kl::Tensor<float> dk, kl::Tensor<float> dv,
                                  kl::Tensor<uint8_t> tile_state, kl::Tensor<float> p_tile,
                                  kl::Tensor<float> ds_tile, kl::Tensor<float> dk_partial,
                                  kl::Tensor<float> dv_partial, kl::Tensor<float> dq_contrib, int64_t lq,
                                  int64_t lk, int d, int64_t group, float scale, int causal, int BLOCK_M,
                                  int BLOCK_N, int64_t c_bh, int64_t c_kblock, int64_t c_qblock) {
  const int bm = BLOCK_M, bn = BLOCK_N;
  extern __shared__ float smem[];
  float* Ks = smem;          // [bn, d]  K_j
  float* Vs = Ks + bn * d;   // [bn, d]  V_j
  float* dKs = Vs + bn * d;  // [bn, d]  dK_j so far
  float* dVs = dKs + bn * d; // [bn, d]  dV_j so far
  float* Qs = dVs + bn * d;  // [bm, d]  Q_i
  float* dOs = Qs + bm * d;  // [bm, d]  dO_i
  float* P = dOs + bm * d;   // [bm, bn]
  float* dS = P + bm * bn;   // [bm, bn]
  float* Ls = dS + bm * bn;  // [bm]     L_i
  float* Ds = Ls + bm;       // [bm]     D_i

  const int64_t kv = blockIdx.y, kb = blockIdx.x, k0 = kb * bn;  // kv: this program's (batch, kv head)
  const int64_t k_blocks = gridDim.x, q_blocks = (lq + bm - 1) / bm;
  const int tid = threadIdx.x, threads = blockDim.x;

  // K_j and V_j into shared memory (keys past Lk: 0), dK_j = dV_j = 0.
  for (int idx = tid; idx < bn * d; idx += threads) {
    const int64_t j = k0 + idx / d;
    Ks[idx] = k.load((kv * lk + j) * d + idx % d, j < lk, 0.0f);
    Vs[idx] = v.load((kv * lk + j) * d + idx % d, j < lk, 0.0f);
    dKs[idx] = 0.0f;
    dVs[idx] = 0.0f;
  }
  __syncthreads();

  // The first query tile a row of which sees a key of this tile: the same for every query head.
  const int64_t first = first_q_tile(kb, bm, bn, lq, lk, causal);

  // Each query head of the group in turn, adding into the same dK_j, dV_j.
  for (int64_t bh = kv * group; bh < (kv + 1) * group; ++bh) {
    const bool traced = bh == c_bh && kb == c_kblock;  // the program and query head whose steps the views show
    // Query tiles no row of which sees a key of this tile: skipped, recorded as such, nothing added
    // (the traced dK_j and dV_j carry what the group's earlier query heads added: 0 for the first).
    for (int64_t qb = 0; qb < first; ++qb) {
      if (tid == 0) tile_state.store((bh * k_blocks + kb) * q_blocks + qb, 2);
      if (traced) {
        for (int c = tid; c < bm * bn; c += threads) {
          p_tile.store(qb * bm * bn + c, 0.0f);
          ds_tile.store(qb * bm * bn + c, 0.0f);
        }
        for (int c = tid; c < bn * d; c += threads) {
          dk_partial.store(qb * bn * d + c, dKs[c]);
          dv_partial.store(qb * bn * d + c, dVs[c]);
        }
      }
      if (bh == c_bh && qb == c_qblock)
        for (int c = tid; c < bm * d; c += threads) dq_contrib.store(kb * bm * d + c, 0.0f);
    }

    for (int64_t qb = first; qb < q_blocks; ++qb) {
      const int64_t q0 = qb * bm;
      // Q_i, dO_i, L_i, D_i (rows past Lq: 0, and L = -inf so their P is 0)
      for (int idx = tid; idx < bm * d; idx += threads) {
        const int64_t i = q0 + idx / d;
        Qs[idx] = q.load((bh * lq + i) * d + idx % d, i < lq, 0.0f);
        dOs[idx] = dout.load((bh * lq + i) * d + idx % d, i < lq, 0.0f);
      }
      for (int r = tid; r < bm; r += threads) {
        Ls[r] = lse.load(bh * lq + q0 + r, q0 + r < lq, -INFINITY);
        Ds[r] = drow.load(bh * lq + q0 + r, q0 + r < lq, 0.0f);
      }
      __syncthreads();

      // Per cell: P = exp(S - L), dS = P * (dP - D); masked cells and rows past Lq: 0.
      for (int idx = tid; idx < bm * bn; idx += threads) {
        const int r = idx / bn, jj = idx % bn;
        const int64_t i = q0 + r;
        const int64_t n_vis = i < lq ? visible_keys(i, lq, lk, causal) : 0;
        float p = 0.0f, ds = 0.0f;
        if (k0 + jj < n_vis) {
          float s = 0.0f, dp = 0.0f;
          for (int c = 0; c < d; ++c) {
            const int cc = (c + jj) & (d - 1);  // rotated so neighbouring keys read different banks
            s = fmaf(Qs[r * d + cc], Ks[jj * d + cc], s);
            dp = fmaf(dOs[r * d + cc], Vs[jj * d + cc], dp);
          }
          p = recomputed_prob(s * scale, Ls[r]);
          ds = p * (dp - Ds[r]);
        }
        P[idx] = p;
        dS[idx] = ds;
      }
      __syncthreads();

      // dV_j += P^T dO_i, dK_j += scale * dS^T Q_i
      for (int idx = tid; idx < bn * d; idx += threads) {
        const int jj = idx / d, c = idx % d;
        float acc_v = 0.0f, acc_k = 0.0f;
        for (int r = 0; r < bm; ++r) {
          acc_v = fmaf(P[r * bn + jj], dOs[r * d + c], acc_v);
          acc_k = fmaf(dS[r * bn + jj], Qs[r * d + c], acc_k);
        }
        dVs[idx] += acc_v;
        dKs[idx] += scale * acc_k;
      }

      // dQ_i += scale * dS K_j: every program adds into the same rows, hence atomic_add
      for (int idx = tid; idx < bm * d; idx += threads) {
        const int r = idx / d, c = idx % d;
        float acc = 0.0f;
        for (int jj = 0; jj < bn; ++jj) acc = fmaf(dS[r * bn + jj], Ks[jj * d + c], acc);
        const float add = scale * acc;
        if (q0 + r < lq) dq.atomic_add((bh * lq + q0 + r) * d + c, add);
        if (bh == c_bh && qb == c_qblock) dq_contrib.store(kb * bm * d + idx, add);
      }
      __syncthreads();

      // The trace of this step: its state; the traced program's P, dS, dK_j and dV_j.
      if (tid == 0) tile_state.store((bh * k_blocks + kb) * q_blocks + qb, 1);
      if (traced) {
        for (int c = tid; c < bm * bn; c += threads) {
          p_tile.store(qb * bm * bn + c, P[c]);
          ds_tile.store(qb * bm * bn + c, dS[c]);
        }
        for (int c = tid; c < bn * d; c += threads) {
          dk_partial.store(qb * bn * d + c, dKs[c]);
          dv_partial.store(qb * bn * d + c, dVs[c]);
        }
      }
      __syncthreads();  // the next query tile's loads overwrite Q, dO, P, dS only after this
    }
  }

  // dK_j and dV_j, once (keys past Lk: not stored)
  for (int idx = tid; idx < bn * d; idx += threads) {
    const int64_t j = k0 + idx / d;
    dk.store((kv * lk + j) * d + idx % d, dKs[idx], j < lk);
    dv.store((kv * lk + j) * d + idx % d, dVs[idx], j < lk);
  }
}
