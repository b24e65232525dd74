// The raster of an elementwise trace, computed on the GPU straight into a mapped GL buffer.
#include "kernels/runtime/cuda_launch.cuh"
#include "viz/element_raster.h"

namespace kl::viz::detail {

__global__ void element_raster_kernel(ElementTraceView t, int64_t lanes, int64_t lanes_per_cell, int64_t cells,
                                      float* out) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cells) return;
  const int64_t first = c * lanes_per_cell;
  if (first >= lanes) {
    out[2 * c] = -1.0f;
    out[2 * c + 1] = cell_value(kCellOutside);  // past the launch: background
    return;
  }
  element_cell(t, first, lanes_per_cell, out + 2 * c);
}

__global__ void program_lanes_kernel(ElementTraceView t, int64_t pid, float* out) {
  for (int lane = threadIdx.x; lane < t.block_size; lane += blockDim.x)
    element_cell(t, pid * t.block_size + lane, 1, out + 2 * lane);
}

void raster_element_trace_cuda(const ElementTraceView& t, const ElementRaster& r, float* out) {
  const int64_t cells = int64_t(r.cols) * r.rows;
  const int threads = 256;
  cuda::launch("element_raster", element_raster_kernel, dim3(unsigned((cells + threads - 1) / threads)),
               dim3(threads), 0, 0, t, r.lanes, r.lanes_per_cell, cells, out);
}

void raster_program_lanes_cuda(const ElementTraceView& t, int64_t pid, float* out) {
  cuda::launch("program_lanes", program_lanes_kernel, dim3(1), dim3(256), 0, 0, t, pid, out);
}

}  // namespace kl::viz::detail
