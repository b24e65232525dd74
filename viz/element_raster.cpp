#include "viz/element_raster.h"

#include "kernels/runtime/errors.h"

namespace kl::viz {

ElementRaster plan_element_raster(int64_t grid, int block_size, int max_cols, int max_rows) {
  ElementRaster r;
  r.block_size = block_size;
  r.lanes = grid * block_size;
  int64_t k = 1;
  while ((r.lanes + k - 1) / k > int64_t(max_cols) * max_rows && k < block_size) k *= 2;
  r.lanes_per_cell = k;
  const int64_t cells = (r.lanes + k - 1) / k;
  // Columns: a power of two near sqrt(4 * cells), so the raster is about 4:1 wide.
  int64_t cols = 1;
  while (cols * cols < 4 * cells && cols < max_cols) cols *= 2;
  if (cols > cells) cols = cells < 1 ? 1 : cells;
  // Prefer whole programs per row when a program fits in a row.
  const int64_t cells_per_program = block_size / k;
  if (cells_per_program <= max_cols && cols < cells_per_program && grid > 1) cols = cells_per_program;
  r.cols = int(cols);
  r.lanes_per_row = cols * k;
  r.rows = int((cells + cols - 1) / cols);
  while (r.rows > max_rows) {  // very wide launches with k capped at block_size
    r.lanes_per_cell *= 2;
    r.rows = int((r.lanes / r.lanes_per_cell + cols - 1) / cols);
    r.lanes_per_row = cols * r.lanes_per_cell;
  }
  if (r.lanes_per_cell > block_size) {
    r.grid_cols = 0;
    r.grid_rows = 0;
    r.layout = "a cell holds " + std::to_string(r.lanes_per_cell / block_size) +
               " programs, coloured by the first one's pid";
  } else if (r.lanes_per_row > block_size) {
    r.grid_cols = int(block_size / r.lanes_per_cell);  // several programs side by side in a row
    r.grid_rows = 1;
    r.layout = "a row holds " + std::to_string(r.lanes_per_row / block_size) + " programs";
  } else if (r.lanes_per_row == block_size) {
    r.grid_rows = 1;
    r.layout = "one program per row";
  } else {
    r.grid_rows = int(block_size / r.lanes_per_row);
    r.layout = "a program spans " + std::to_string(r.grid_rows) + " rows";
  }
  return r;
}

void raster_element_trace(Backend b, const ElementTraceView& t, const ElementRaster& r, float* out) {
  if (b == Backend::Cuda) {
#ifdef KL_HAS_CUDA
    return detail::raster_element_trace_cuda(t, r, out);
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  const int64_t cells = int64_t(r.cols) * r.rows;
  for (int64_t c = 0; c < cells; ++c) {
    const int64_t first = c * r.lanes_per_cell;
    if (first >= r.lanes) {
      out[2 * c] = -1.0f;
      out[2 * c + 1] = cell_value(kCellOutside);  // past the launch: background
      continue;
    }
    element_cell(t, first, r.lanes_per_cell, out + 2 * c);
  }
}

void raster_program_lanes(Backend b, const ElementTraceView& t, int64_t pid, float* out) {
  if (b == Backend::Cuda) {
#ifdef KL_HAS_CUDA
    return detail::raster_program_lanes_cuda(t, pid, out);
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  for (int lane = 0; lane < t.block_size; ++lane) element_cell(t, pid * t.block_size + lane, 1, out + 2 * lane);
}

}  // namespace kl::viz
