// Reductions across the 32 lanes of a warp: every lane gets the result. Shared by the attention
// (rung 4) and teaching FlashAttention (rung 5) kernels. Included by .cu files only.
#pragma once

namespace kl::cuda {

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

}  // namespace kl::cuda
