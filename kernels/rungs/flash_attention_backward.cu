// Rung 6, CUDA side. The naive backward: seven elementwise steps, one thread per cell, the per-cell
// functions of flash_attention_backward.h (the CPU backend calls the same ones in loops). For the
// teaching backward, the two small kernels around it: D = rowsum(dO ∘ O) per row, and L = m + log l from
// rung 5's trace. (The teaching kernel itself, backward_teaching, is the editable source
// kernels/editable/sources/flash_attention_backward.cu, launched through editable::launch.)
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

}  // namespace

void naive_cuda(const NaiveArgs& a) {
  const int64_t rows = a.bh * a.lq, cells = rows * a.lk;
  step<naive_scores>("naive_scores", a, cells);
  step<naive_softmax_row>("naive_softmax_row", a, rows);
  step<naive_dp>("naive_dp", a, cells);
  step<naive_rowsum>("naive_rowsum", a, rows);
  step<naive_ds>("naive_ds", a, cells);
  step<naive_dkdv>("naive_dkdv", a, a.bh / a.group * a.lk * a.d);  // one cell per kv (batch, head) element
  step<naive_dq>("naive_dq", a, rows * a.d);
}

void rowsum_cuda(const float* dout, const float* o, float* drow, int64_t rows, int d) {
  cuda::launch("backward_rowsum", rowsum_kernel, cells_grid(rows), dim3(kCellThreads), 0, 0, dout, o, drow, rows, d);
}

void lse_from_trace_cuda(const float* m_after, const float* l_after, float* lse, int64_t rows, int64_t steps) {
  cuda::launch("backward_lse", lse_kernel, cells_grid(rows), dim3(kCellThreads), 0, 0, m_after, l_after, lse, rows,
               steps);
}

}  // namespace kl::flash_attention_backward::detail
