// Traces recorded from inside the kernels, on both backends, for the views to draw. The views never
// recompute what a kernel did: they read these.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"

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

// ---- access logs (issue 31): the warp's view of memory -------------------------------------------------
// An access log records, lane by lane, every load and store a kernel makes through one tensor (attached to
// its kl::Tensor argument: editable::TensorArg::access) or one kl::Shared array (passed as a kl::Tensor<
// uint32_t> parameter), for one chosen program or for every program. The layout is kl.cuh's
// (kl::detail::AccessLogHeader): a header of kAccessHeaderWords words, a record count per (slot, thread),
// then per_lane records per (slot, thread), each 64 bits (kernels/runtime/warp_access.h decodes them).
constexpr int64_t kAccessHeaderWords = 8;
constexpr int64_t kAccessEveryProgram = -1;

// What the kernel reads of the header; the rest of the log is zeroed before a launch.
struct AccessLogHeader {
  int64_t program = kAccessEveryProgram;  // the program recorded; -1: every program (slot = program id)
  int64_t slots = 0;                      // programs there is room for
  int64_t threads = 0;                    // threads per block
  int64_t per_lane = 0;                   // records per thread
  int64_t overflow = 0;                   // 1: some thread had more accesses than room
  int64_t reserved[3] = {0, 0, 0};
};
static_assert(sizeof(AccessLogHeader) == kAccessHeaderWords * 8, "kl::detail::AccessLogHeader is 8 words");

// Words a log needs for `slots` programs of `threads` threads with room for `per_lane` records each.
inline int64_t access_log_words(int64_t slots, int64_t threads, int64_t per_lane) {
  return kAccessHeaderWords + slots * threads * (1 + per_lane);
}

// A log owned where the backend runs. reset() lays it out for a launch and zeroes it.
struct AccessLog {
  Buffer<uint64_t> words;
  AccessLogHeader header;

  // program: the program recorded (>= 0), or kAccessEveryProgram with `programs` the grid's size.
  void reset(Backend b, int64_t program, int64_t programs, int64_t threads, int64_t per_lane) {
    header = AccessLogHeader{};
    header.program = program;
    header.slots = program == kAccessEveryProgram ? programs : 1;
    header.threads = threads;
    header.per_lane = per_lane;
    // kl.cuh indexes a log with 32-bit arithmetic (fewer registers where it inlines into a kernel).
    const int64_t n = access_log_words(header.slots, threads, per_lane);
    if (header.slots < 1 || threads < 1 || per_lane < 1 || n > int64_t(0x7fffffff))
      throw InputError("access log: " + std::to_string(header.slots) + " programs x " + std::to_string(threads) +
                       " threads x " + std::to_string(per_lane) + " records is out of range: allowed up to 2^31 - 1 words");
    words.resize(b, size_t(n));
    words.fill_bytes(0);
    mem::to_backend(b, words.data(), &header, sizeof header);
  }
  uint64_t* data() { return words.data(); }
  int64_t size() const { return int64_t(words.size()); }
  std::vector<uint64_t> to_host() const { return words.to_host(); }
};

}  // namespace kl
