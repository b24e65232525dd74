// Philox on the CUDA backend: the same header function compiled by nvcc (tests compare its bits).
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/philox.h"

namespace kl::philox {

__global__ void philox_batch(const U32x4* ctr, const U32x2* key, U32x4* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = philox4x32_10(ctr[i], key[i]);
}

void run_batch_cuda(const U32x4* ctr, const U32x2* key, U32x4* out, int64_t n) {
  const int threads = 256;
  cuda::launch("philox_batch", philox_batch, dim3(unsigned((n + threads - 1) / threads)), dim3(threads), 0, 0,
               ctr, key, out, n);
}

}  // namespace kl::philox
