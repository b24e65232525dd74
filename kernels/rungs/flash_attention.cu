// Rung 5, CUDA side: the views' composition of the chosen block's weights from the recorded trace.
// The teaching kernel itself is the editable source kernels/editable/sources/flash_attention.cu (nvcc
// builds it into this library; kernels/rungs/flash_attention.cpp launches it on both backends).
#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/flash_attention.h"

namespace kl::flash_attention::detail {

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

}  // namespace kl::flash_attention::detail
