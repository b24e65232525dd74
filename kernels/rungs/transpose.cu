// Rung 1½, CUDA side: the fast build of the three transposes, what `bench transpose` times. The same
// launch (one (32, 8) block per 32 x 32 tile), the same addresses and the same tile shapes as the editable
// source kernels/editable/sources/transpose.cu, on raw pointers: no bounds checks, no trace. The edges are
// masked as there; a full tile (every tile of an 8192 x 8192 matrix) takes the unmasked path.
#include "kernels/rungs/transpose.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::transpose::detail {

namespace {

constexpr int T = kTile, R = kBlockRows;

__global__ void __launch_bounds__(kThreads) naive_fast(const float* __restrict__ in, float* __restrict__ out,
                                                       int rows, int cols) {
  const int x = blockIdx.x * T + threadIdx.x;
  const int y0 = blockIdx.y * T + threadIdx.y;
#pragma unroll
  for (int j = 0; j < T; j += R) {
    const int y = y0 + j;
    if (x < cols && y < rows) out[int64_t(x) * rows + y] = in[int64_t(y) * cols + x];
  }
}

// PAD 0: tiled (a 32-way conflict on every tile read); PAD 1: padded (none).
template <int PAD>
__global__ void __launch_bounds__(kThreads) tile_fast(const float* __restrict__ in, float* __restrict__ out,
                                                      int rows, int cols) {
  __shared__ float tile[T][T + PAD];
  const int x0 = blockIdx.x * T, y0 = blockIdx.y * T;
  const bool full = x0 + T <= cols && y0 + T <= rows;
  {
    const int x = x0 + threadIdx.x;
    const float* src = in + int64_t(y0 + threadIdx.y) * cols + x;
    if (full) {
#pragma unroll
      for (int j = 0; j < T; j += R) tile[threadIdx.y + j][threadIdx.x] = src[int64_t(j) * cols];
    } else {
#pragma unroll
      for (int j = 0; j < T; j += R) {
        const int y = y0 + threadIdx.y + j;
        tile[threadIdx.y + j][threadIdx.x] = x < cols && y < rows ? src[int64_t(j) * cols] : 0.0f;
      }
    }
  }
  __syncthreads();
  const int x = y0 + threadIdx.x;  // out's column
  float* dst = out + int64_t(x0 + threadIdx.y) * rows + x;
  if (full) {
#pragma unroll
    for (int j = 0; j < T; j += R) dst[int64_t(j) * rows] = tile[threadIdx.x][threadIdx.y + j];
  } else {
#pragma unroll
    for (int j = 0; j < T; j += R) {
      const int y = x0 + threadIdx.y + j;  // out's row
      if (x < rows && y < cols) dst[int64_t(j) * rows] = tile[threadIdx.x][threadIdx.y + j];
    }
  }
}

}  // namespace

void run_cuda_fast(Variant v, const float* in, float* out, int64_t rows, int64_t cols) {
  const dim3 grid(unsigned(grid_x(cols)), unsigned(grid_y(rows))), block(T, R);
  const int r = int(rows), c = int(cols);
  switch (v) {
    case Variant::Naive: cuda::launch("transpose_naive (fast)", naive_fast, grid, block, 0, 0, in, out, r, c); break;
    case Variant::Tiled: cuda::launch("transpose_tiled (fast)", tile_fast<0>, grid, block, 0, 0, in, out, r, c); break;
    case Variant::Padded: cuda::launch("transpose_padded (fast)", tile_fast<1>, grid, block, 0, 0, in, out, r, c); break;
  }
}

}  // namespace kl::transpose::detail
