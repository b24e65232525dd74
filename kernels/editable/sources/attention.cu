// Rung 4: scaled dot-product attention, out = softmax(Q K^T * scale) V, with ALL of K and V in shared
// memory: the kernel the write-up wrote, and the wall it runs into.
//
// Kernel: attention_smem(q, k, v, out, scores, weights, lq, lk, d, scale, causal, channels), launched as
// (ceil(Lq / 16), B*H) programs (CUDA blocks) of 256 threads (8 warps), with (2 Lk d + 16 d) * 4 bytes of
// dynamic shared memory: all of K and V of one (batch, head), and the program's 16 query rows. Past the
// device's per-block limit the rung refuses the launch (the wall; rung 5 streams K and V in tiles).
//   q             [B*H, Lq, d] the queries
//   k, v          [B*H, Lk, d] the keys and values
//   out           [B*H, Lq, d] the output; its trace records which program stored each element
//   scores        [B*H, Lq, Lk] cells of `channels` floats: S = Q K^T * scale in the first (-inf where the
//                 causal mask hides the key), and with channels >= 2 the cell's state in the second (0 a
//                 key the query sees, 1 a masked one); what the views draw. May be absent.
//   weights       the same cells for P = softmax(S) (0 where masked; a row that sees no key is all 0)
//   lq, lk, d     the lengths and the head dimension (16, 32, 64 or 128)
//   scale         the softmax scale (the rung passes 1/sqrt(d) unless told otherwise)
//   causal        1: query i sees keys j <= i + (Lk - Lq) (bottom-right aligned); 0: every key
//
// Program (qb, bh) copies K and V of its (batch, head) and queries qb*16 .. qb*16+15 into shared memory,
// then warp w takes queries w and w + 8. Lane L scores keys L, L + 32, ... (a dot product over d read
// from shared memory, its columns rotated by the lane so the 32 lanes read 32 different banks):
//   pass 1  m = max_j s_j                        (the row max, so exp never overflows)
//   pass 2  p_j = exp(s_j - m), l = sum_j p_j, o = sum_j p_j v_j   (lane L owns output columns L, L+32, ...;
//           each p_j reaches every lane by a shuffle), then out = o / l
//   pass 3  (when the views want them) S and P = p / l for the whole row, masked cells marked
#include "kl.cuh"

constexpr int kBlockQ = 16;  // queries per program
constexpr int kWarps = 8;    // warps per program; warp w takes queries w, w + kWarps

__device__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The number of keys query i sees: all Lk, or (causal, bottom-right aligned) min(Lk, i + Lk - Lq + 1).
__device__ int64_t visible_keys(int64_t i, int64_t lq, int64_t lk, int causal) {
  if (!causal) return lk;
  const int64_t n = i + (lk - lq) + 1;
  return n < 0 ? 0 : (n > lk ? lk : n);
}

// s = (Q_r . K_j) * scale over d columns, rotated by the lane (d is a power of two).
__device__ float score(const float* Qr, const float* Kj, int d, int lane, float scale) {
  float acc = 0.0f;
  for (int c = 0; c < d; ++c) {
    const int cc = (c + lane) & (d - 1);
    acc = fmaf(Qr[cc], Kj[cc], acc);
  }
  // __fmul_rn is never fused with the subtraction that follows, so every pass that recomputes a score
  // gets the same float, and the weights written for the views sum to what l summed.
  return __fmul_rn(acc, scale);
}

__global__ void attention_smem(kl::Tensor<float> q, kl::Tensor<float> k, kl::Tensor<float> v,
                               kl::Tensor<float> out, kl::Tensor<float> scores, kl::Tensor<float> weights,
                               int64_t lq, int64_t lk, int d, float scale, int causal, int channels) {
  extern __shared__ float smem[];
  float* Ks = smem;         // [lk, d]
  float* Vs = Ks + lk * d;  // [lk, d]
  float* Qs = Vs + lk * d;  // [kBlockQ, d]
  const int64_t bh = blockIdx.y;
  const int64_t q0 = int64_t(blockIdx.x) * kBlockQ;

  // 1. The wall: all of K and V of this (batch, head), and this program's queries, into shared memory.
  for (int64_t idx = threadIdx.x; idx < lk * d; idx += blockDim.x) {
    Ks[idx] = k.load(bh * lk * d + idx);
    Vs[idx] = v.load(bh * lk * d + idx);
  }
  for (int idx = threadIdx.x; idx < kBlockQ * d; idx += blockDim.x) {
    const int64_t i = q0 + idx / d;
    Qs[idx] = q.load((bh * lq + i) * d + idx % d, i < lq, 0.0f);
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < kBlockQ; r += kWarps) {
    const int64_t i = q0 + r;
    if (i >= lq) break;  // the same for every lane of the warp
    const int64_t n = visible_keys(i, lq, lk, causal);
    const float* Qr = Qs + r * d;

    // pass 1: m = max_j s_j
    float m = -INFINITY;
    for (int64_t j = lane; j < n; j += 32) m = fmaxf(m, score(Qr, Ks + j * d, d, lane, scale));
    m = warp_max(m);

    // pass 2: p_j = exp(s_j - m), l = sum p_j, o = sum p_j v_j
    float l = 0.0f, o[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // lane's columns lane + 32 u, d <= 128
    for (int64_t j0 = 0; j0 < n; j0 += 32) {
      const int64_t j = j0 + lane;
      const float p = j < n ? expf(score(Qr, Ks + j * d, d, lane, scale) - m) : 0.0f;
      l += p;
      const int cnt = int(n - j0 < 32 ? n - j0 : 32);
      for (int t = 0; t < cnt; ++t) {
        const float pt = __shfl_sync(0xffffffffu, p, t);  // key j0 + t's weight, from lane t
        const float* Vj = Vs + (j0 + t) * d;
        for (int u = 0; u < 4; ++u)
          if (lane + 32 * u < d) o[u] = fmaf(pt, Vj[lane + 32 * u], o[u]);
      }
    }
    l = warp_sum(l);
    for (int u = 0; u < 4; ++u)
      if (lane + 32 * u < d) out.store((bh * lq + i) * d + lane + 32 * u, n > 0 ? o[u] / l : 0.0f);  // nothing seen: 0

    // pass 3 (views): S and P over the whole row, masked cells marked
    if (scores.present() || weights.present()) {
      const int64_t base = (bh * lq + i) * lk;
      for (int64_t j = lane; j < lk; j += 32) {
        const bool vis = j < n;
        const float sc = vis ? score(Qr, Ks + j * d, d, lane, scale) : -INFINITY;
        const float p = vis ? expf(sc - m) / l : 0.0f;
        const int64_t cell = (base + j) * channels;
        scores.store(cell, sc);
        weights.store(cell, p);
        if (channels >= 2) {
          scores.store(cell + 1, vis ? 0.0f : 1.0f);  // the cell's state: 0 normal, 1 masked
          weights.store(cell + 1, vis ? 0.0f : 1.0f);
        }
      }
    }
  }
}
