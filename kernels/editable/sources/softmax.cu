// Rung 3: fused row softmax, the write-up's BLOCK_SIZE = 1024 bug beside its fix.
//   m = max_j x[j];   e_j = exp(x[j] - m);   out[j] = e_j / sum_j e_j        (numerically stable)
//
// Kernel: softmax_traced(x, out, n_cols, BLOCK_SIZE), the Triton program
//     row = tl.program_id(0)
//     cols = tl.arange(0, BLOCK_SIZE);  mask = cols < n_cols
//     x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-inf)
//     e = tl.exp(x - tl.max(x));  out = e / tl.sum(e)
//     tl.store(out_ptr + row * n_cols + cols, out, mask=mask)
// launched as one program (CUDA block) per row of min(BLOCK_SIZE, 32 * num_warps) threads, num_warps as
// the Triton tutorial picks it (4; 8 from BLOCK_SIZE 2048; 16 from 4096); thread t holds the columns
// t, t + blockDim.x, ... of arange(BLOCK_SIZE) (at most 64 of them).
//   x, out      [rows, n_cols], row-major; out's trace records which program (= row) stored each element
//   n_cols      the row length
//   BLOCK_SIZE  elements per program, a power of two: the host passes next_power_of_2(n_cols) for `fixed`
//               and 1024 for `buggy`, the write-up's hard-coded constant: for n_cols > 1024 the program
//               then normalises over the first 1024 columns only and never stores the rest.
// tl.max and tl.sum become block reductions: every thread reduces its own columns, then the threads' partial
// results are combined as a tree in shared memory, with __syncthreads between the steps (without it, a
// thread reads a partial result its neighbour has not written yet: a race).
// A row of all -inf has nothing to attend to and comes back all 0 (FlashAttention's rule, not NaN).
//
// Kernel: softmax_online_traced(x, out, chunk_max, running_max, running_sum, n_cols, chunk, trace_row), the
// online form (Milakov & Gimelshein 2018, the idea FlashAttention is built on): one program per row walks
// it in chunks of `chunk` columns keeping only a running max m and a running sum l,
//     m_new = max(m_old, rowmax(chunk));   l_new = l_old * exp(m_old - m_new) + rowsum(exp(chunk - m_new))
// then a second pass writes exp(x - m) / l. Any width works: nothing holds the whole row. Launched as one
// program per row of min(chunk, 32 * num_warps) threads (num_warps as above, from the chunk).
//   chunk_max, running_max, running_sum   the trace of row trace_row, one entry per chunk k: rowmax of
//               chunk k alone, m after it and l after it (l relative to that m)
#include "kl.cuh"

#define MAX_PER_THREAD 64  // BLOCK_SIZE / blockDim.x: 32768 columns on 512 threads

// The block's max (is_max) or sum of v; every thread gets the result. red holds blockDim.x floats.
__device__ float block_reduce(float v, bool is_max, float* red) {
  const int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) red[t] = is_max ? fmaxf(red[t], red[t + s]) : red[t] + red[t + s];
    __syncthreads();  // step s is complete before any thread reads it in step s / 2
  }
  const float r = red[0];
  __syncthreads();  // everyone has read red[0] before the next reduction overwrites it
  return r;
}

__global__ void softmax_traced(kl::Tensor<float> x, kl::Tensor<float> out, int64_t n_cols, int BLOCK_SIZE) {
  __shared__ float red[512];
  const int64_t row = kl::program_id();
  const int per_thread = min(BLOCK_SIZE / int(blockDim.x), MAX_PER_THREAD);  // v[] holds at most 64
  // Indexed by j < per_thread, known only at run time: the compiler cannot give each v[j] a register, so v
  // lives in local memory (ptxas -v at sm_90: a 256-byte stack frame), cached in L1, not in registers.
  float v[MAX_PER_THREAD];
  float m = -INFINITY;
  for (int j = 0; j < per_thread; ++j) {
    const int64_t col = threadIdx.x + int64_t(j) * blockDim.x;  // cols = arange(BLOCK_SIZE)
    v[j] = x.load(row * n_cols + col, col < n_cols, -INFINITY);    // mask=cols < n_cols, other=-inf
    m = fmaxf(m, v[j]);
  }
  m = block_reduce(m, true, red);                   // m = tl.max(x)
  const float m_safe = m == -INFINITY ? 0.0f : m;   // a row of all -inf: every e is 0
  float s = 0.0f;
  for (int j = 0; j < per_thread; ++j) {
    v[j] = expf(v[j] - m_safe);                     // e = tl.exp(x - m); masked columns give exp(-inf) = 0
    s += v[j];
  }
  s = block_reduce(s, false, red);                  // tl.sum(e)
  for (int j = 0; j < per_thread; ++j) {
    const int64_t col = threadIdx.x + int64_t(j) * blockDim.x;
    out.store(row * n_cols + col, s > 0.0f ? v[j] / s : 0.0f, col < n_cols);  // tl.store(..., mask=mask)
  }
}

__global__ void softmax_online_traced(kl::Tensor<float> x, kl::Tensor<float> out, kl::Tensor<float> chunk_max,
                                      kl::Tensor<float> running_max, kl::Tensor<float> running_sum, int64_t n_cols,
                                      int chunk, int64_t trace_row) {
  __shared__ float red[512];
  const int64_t row = kl::program_id();
  float m = -INFINITY, l = 0.0f;
  int64_t k = 0;
  for (int64_t c0 = 0; c0 < n_cols; c0 += chunk, ++k) {
    float cmax = -INFINITY;
    for (int64_t j = threadIdx.x; j < chunk; j += blockDim.x)
      cmax = fmaxf(cmax, x.load(row * n_cols + c0 + j, c0 + j < n_cols, -INFINITY));
    cmax = block_reduce(cmax, true, red);
    const float m_new = fmaxf(m, cmax);                     // m_new = max(m_old, rowmax(chunk))
    const float m_safe = m_new == -INFINITY ? 0.0f : m_new;  // nothing but -inf so far: every e is 0
    float cs = 0.0f;
    for (int64_t j = threadIdx.x; j < chunk; j += blockDim.x)
      if (c0 + j < n_cols) cs += expf(x.load(row * n_cols + c0 + j) - m_safe);
    cs = block_reduce(cs, false, red);
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);  // rescale the old sum to the new max
    l = l * alpha + cs;                                     // l_new = l_old * exp(m_old - m_new) + rowsum
    m = m_new;
    if (row == trace_row && threadIdx.x == 0) {
      chunk_max.store(k, cmax);
      running_max.store(k, m);
      running_sum.store(k, l);
    }
  }
  const float m_safe = m == -INFINITY ? 0.0f : m;
  for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x)
    out.store(row * n_cols + c, l > 0.0f ? expf(x.load(row * n_cols + c) - m_safe) / l : 0.0f);
}
