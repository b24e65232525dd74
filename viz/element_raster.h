// Turns an elementwise kernel's recorded trace (kernels/runtime/trace.h) into the cells of a 2-D raster that
// a Heatmap colours: channel 0 = the pid that stored the cell's first element (or, for a masked
// lane, the pid whose lane it was), channel 1 = the cell's state (viz/heatmap.h CellState).
// One cell covers `lanes_per_cell` consecutive lanes of the launch grid (a power of two, so cells
// never straddle programs); the level of detail grows with n so the raster stays readable.
// Nothing here recomputes what the kernel did: it reads the trace. A "lane" here is one (pid, offset)
// slot of the launch grid, as the trace's lane_state counts them (an element, or a masked offset past
// n), not a CUDA lane (one of a warp's 32 threads).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/trace.h"

namespace kl::viz {

struct ElementRaster {
  int64_t lanes = 0;           // grid * block_size
  int64_t lanes_per_cell = 1;  // power of two, <= block_size
  int64_t lanes_per_row = 1;   // power of two
  int cols = 1, rows = 1;
  int block_size = 1;
  // Thin grid lines on program boundaries: every `grid_cols` cells, or every `grid_rows` rows.
  int grid_cols = 0, grid_rows = 0;
  std::string layout;  // "one program per row", "a row holds 4 programs", "a program spans 8 rows"
};

// Chooses the level of detail for a launch: at most max_cols x max_rows cells, roughly 4:1.
ElementRaster plan_element_raster(int64_t grid, int block_size, int max_cols = 512, int max_rows = 256);

// Writes rows*cols*2 floats (row-major) from the trace; the trace and `out` live where `b` runs.
void raster_element_trace(Backend b, const ElementTraceView& t, const ElementRaster& r, float* out);

// One program's lanes at lane resolution (block_size x 1 cells), for the tail-program strip.
void raster_program_lanes(Backend b, const ElementTraceView& t, int64_t pid, float* out);

#ifdef KL_HAS_CUDA
namespace detail {
void raster_element_trace_cuda(const ElementTraceView& t, const ElementRaster& r, float* out);
void raster_program_lanes_cuda(const ElementTraceView& t, int64_t pid, float* out);
}  // namespace detail
#endif

// The cell rule, shared by the CPU loop and the CUDA kernel.
#if defined(__CUDACC__)
#define KL_HD __host__ __device__
#else
#define KL_HD
#endif

// Channel 0 is the pid that stored the cell's first written element (the cell's own pid where nothing
// was written); when a cell covers several programs, that is the first of them.
KL_HD inline void element_cell(const ElementTraceView& t, int64_t first_lane, int64_t lanes, float* cell) {
  const int64_t pid = first_lane / t.block_size;
  int64_t masked = 0, active = 0;
  bool unwritten = false;
  int32_t writer = -1;
  for (int64_t l = first_lane; l < first_lane + lanes && l < t.grid * t.block_size; ++l) {
    const uint8_t s = t.lane_state[l];
    if (s == kLaneMasked) {
      ++masked;
    } else if (s == kLaneActive) {
      ++active;
      const int32_t w = l < t.n ? t.writer[l] : -1;  // element index == lane index for 1-D launches
      if (w < 0 || (l < t.n && t.write_count[l] != 1)) unwritten = true;
      else if (writer < 0) writer = w;
    } else {
      unwritten = true;  // the program never ran
    }
  }
  cell[0] = float(writer >= 0 ? writer : pid);
  cell[1] = cell_value(unwritten ? kCellUnwritten : (masked > active ? kCellMasked : kCellNormal));
}

}  // namespace kl::viz
