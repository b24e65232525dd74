// The scores step of attention_weights on the CUDA backend: S = Q K^T * scale, one block per 64 x 64 tile.
#include "kernels/rungs/attention_weights.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::attention_weights::detail {

// 256 threads as 16 x 16; thread (ty, tx) computes rows ty + 16 a and columns tx + 16 b (a, b < 4), so
// a warp's stores are two runs of 16 consecutive floats. Rows padded by one float: no bank conflicts
// when the 16 threads of a row read 16 different key rows at the same column.
__global__ void attention_scores(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ s,
                                 int64_t L, float scale, int64_t shift) {
  __shared__ float qs[kTile][kHeadDim + 1];
  __shared__ float ks[kTile][kHeadDim + 1];
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  for (int idx = threadIdx.x; idx < kTile * kHeadDim; idx += blockDim.x) {
    const int r = idx / kHeadDim, c = idx % kHeadDim;
    const int64_t qi = r0 + r, kj = c0 + r;
    qs[r][c] = qi < L ? q[((qi + shift) % L) * kHeadDim + c] : 0.0f;
    ks[r][c] = kj < L ? k[kj * kHeadDim + c] : 0.0f;
  }
  __syncthreads();
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float acc[4][4] = {};
#pragma unroll 8
  for (int c = 0; c < kHeadDim; ++c) {
    float a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = qs[ty + 16 * i][c], b[i] = ks[tx + 16 * i][c];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = r0 + ty + 16 * i;
    if (row >= L) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t col = c0 + tx + 16 * j;
      if (col < L) s[row * L + col] = acc[i][j] * scale;
    }
  }
}

void scores_cuda(const float* q, const float* k, float* scores, int64_t L, float scale, int64_t shift) {
  const unsigned tiles = unsigned((L + kTile - 1) / kTile);
  cuda::launch("attention_scores", attention_scores, dim3(tiles, tiles), dim3(256), 0, 0, q, k, scores, L, scale,
               shift);
}

}  // namespace kl::attention_weights::detail
