// Traces recorded from inside the kernels, on both backends, for the views to draw. The views never
// recompute what a kernel did: they read these.
#pragma once
#include <cstdint>

#include "kernels/runtime/buffer.h"

namespace kl {

// Lane states in ElementTraceView::lane_state.
enum : uint8_t { kLaneMasked = 0, kLaneActive = 1, kLaneNotRun = 0xFF };

// Raw pointers into a trace where it lives (host or device), as the kernels write it.
struct ElementTraceView {
  int32_t* writer = nullptr;       // [n]: pid of the program that stored element i; -1 = never written
  uint32_t* write_count = nullptr; // [n]: how many stores element i received
  uint8_t* lane_state = nullptr;   // [grid * block_size]: kLaneActive / kLaneMasked per (pid, lane)
  int64_t n = 0;
  int64_t grid = 0;
  int block_size = 0;
};

// An elementwise kernel's trace, owned where the backend runs. reset() poisons it before a launch.
struct ElementTrace {
  Buffer<int32_t> writer;
  Buffer<uint32_t> write_count;
  Buffer<uint8_t> lane_state;
  int64_t n = 0, grid = 0;
  int block_size = 0;

  void reset(Backend b, int64_t n_elements, int block) {
    n = n_elements;
    block_size = block;
    grid = (n + block - 1) / block;
    writer.resize(b, size_t(n));
    write_count.resize(b, size_t(n));
    lane_state.resize(b, size_t(grid * block));
    writer.fill_bytes(0xFF);
    write_count.fill_bytes(0);
    lane_state.fill_bytes(0xFF);
  }
  ElementTraceView view() {
    return {writer.data(), write_count.data(), lane_state.data(), n, grid, block_size};
  }
};

}  // namespace kl
