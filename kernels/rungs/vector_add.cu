// Rung 1, CUDA side: the fast version. (The traced one is the editable source
// kernels/editable/sources/vector_add.cu, built by nvcc into this library and launched by vector_add.cpp.)
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/vector_add.h"

namespace kl::vector_add::detail {

// Memory-bound: 16-byte loads and stores, several in flight per thread, grid sized to the machine.
__global__ void vector_add_fast(const float4* __restrict__ x, const float4* __restrict__ y,
                                float4* __restrict__ out, int64_t n4) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n4; i += 4 * stride) {
    float4 a[4], b[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      a[k] = __ldcs(x + i + k * stride);
      b[k] = __ldcs(y + i + k * stride);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      __stcs(out + i + k * stride, make_float4(a[k].x + b[k].x, a[k].y + b[k].y, a[k].z + b[k].z, a[k].w + b[k].w));
  }
  for (; i < n4; i += stride) {
    float4 a = __ldcs(x + i), b = __ldcs(y + i);
    __stcs(out + i, make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w));
  }
}

__global__ void vector_add_tail(const float* x, const float* y, float* out, int64_t begin, int64_t n) {
  const int64_t i = begin + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i];
}

void run_cuda_fast(const float* x, const float* y, float* out, int64_t n) {
  int dev = 0, sms = 0;
  KL_CUDA_CHECK(cudaGetDevice(&dev));
  KL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t n4 = n / 4;
  if (n4 > 0) {
    const int threads = 256;
    int64_t blocks = (n4 + threads - 1) / threads;
    const int64_t cap = int64_t(sms) * 8;
    if (blocks > cap) blocks = cap;
    cuda::launch("vector_add_fast", vector_add_fast, dim3(unsigned(blocks)), dim3(threads), 0, 0,
                 reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(y),
                 reinterpret_cast<float4*>(out), n4);
  }
  if (n4 * 4 < n)
    cuda::launch("vector_add_tail", vector_add_tail, dim3(1), dim3(4), 0, 0, x, y, out, n4 * 4, n);
}

}  // namespace kl::vector_add::detail
