// Rung 1½'s study (issue 31): what the transpose panel concludes, with no GL. The three kernels of
// kernels/editable/sources/transpose.cu (or the edited copy the app holds) run traced over the same matrix,
// every program's loads and stores logged (kernels/runtime/trace.h: AccessLog), and the logs turned into
// what a warp costs (kernels/runtime/warp_access.h): sectors per request of in's loads and out's stores,
// the tile's bank-conflict degree, for every program summed and for the chosen program and warp the views
// draw. On the CUDA backend the measured GB/s of the fast build against a device-to-device copy (`bench
// transpose`'s rows, measured once per process); on the CPU backend the recorded H200 figures where
// docs/perf/h200.json has them (its "memory" section's rows named "transpose naive", ...), else a sentence
// saying that GB/s need a GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/measure/bench.h"
#include "kernels/measure/peers.h"
#include "kernels/rungs/transpose.h"
#include "kernels/runtime/warp_access.h"
#include "kernels/studies/study.h"

namespace kl::study::transpose_study {

constexpr int64_t kMaxSide = 256;  // the panel's matrix (8 x 8 tiles): every program's accesses are logged

// rows, cols, variant (the kernel the views draw), program, warp.
std::vector<ParamSpec> params();

// One kernel, every program of the launch.
struct KernelCosts {
  transpose::Variant variant = transpose::Variant::Naive;
  editable::Fault fault;          // an edited kernel's first misbehaviour (kind None when clean)
  std::string fault_line;         // "edited kernel: ..." or empty
  int64_t mismatched = 0;         // elements of out that differ from the reference (bit for bit)
  int64_t never_written = 0;      // elements no program stored
  Check matches;                  // "matches reference: yes, bit for bit" / "no, ..."
  bool uses_tile = false;         // tiled and padded: the tile's log has requests
  bool overflow = false;          // a log ran out of room (an edited kernel with more accesses)
  warp_access::Totals loads, stores;            // global: in's loads, out's stores
  warp_access::Totals tile_stores, tile_loads;  // shared: the tile
  warp_access::Totals chosen_loads, chosen_stores, chosen_tile_stores, chosen_tile_loads;  // the chosen program
  // The chosen program's chosen warp: its requests in order (in's loads, out's stores, the tile's).
  std::vector<warp_access::Request> warp_loads, warp_stores, warp_tile;
  std::string line;               // "naive: in's loads 4 sectors a request (ideal 4), out's stores 32; no tile"
};

// The speed of one kernel: measured here (CUDA) or recorded on an H200 (docs/perf/h200.json).
struct Speed {
  bool known = false;
  double gbs = 0, of_copy = 0;
};

struct TransposeResult {
  Backend backend = Backend::Cpu;
  int64_t rows = 0, cols = 0, grid_x = 0, grid_y = 0, programs = 0;
  transpose::Variant shown = transpose::Variant::Tiled;  // the kernel the warp views draw
  int64_t program = 0, program_x = 0, program_y = 0;     // the chosen program and its tile (bx, by)
  int warp = 0;
  bool edited = false;
  std::string source_file;        // "transpose.cu" or the edited file
  std::string source_line;        // "kernel: strided_read.cu (edited)"; empty for the shipped source
  KernelCosts kernels[3];         // naive, tiled, padded
  const KernelCosts& of(transpose::Variant v) const { return kernels[int(v)]; }

  std::string notice;             // the one line (drawn after "Notice: ") the panel always shows
  std::string grid_line;          // the launch and the chosen program's tile
  std::string warp_line;          // which lanes the warp views draw
  // Speed: measured on this GPU, or recorded on an H200, or neither.
  bool measured = false, recorded = false;
  Speed speed[3];
  double copy_gbs = 0;            // the copy measured in the same run (measured only)
  std::string speed_source;       // "measured here at 8192 x 8192: ..." / "recorded on NVIDIA H200, ..."
  std::string speed_line;         // the CPU backend's sentence, or what the figures show
  std::string speed_title;        // the chart's: "GB/s measured here, 8192 x 8192 floats" / "GB/s recorded on NVIDIA H200"
};

// Throws InputError for settings out of range (program or warp past the launch's). `src`: an edited copy of
// the transpose source run instead of the shipped kernels (CompileError when it does not compile); without
// the argument, the one the app holds for the rung (editable::edited("transpose")), else the shipped one.
TransposeResult run(Backend b, const ParamValues& settings, const editable::Source* src);
TransposeResult run(Backend b, const ParamValues& settings);
Report report(const TransposeResult& r);
Entry entry();

// The CPU backend's speed: the sentence that GB/s need a GPU, and the figures `rec` holds for the transposes
// (its "memory" section's rows named "transpose naive", "transpose tiled", "transpose padded": the first
// column's "of copy" ratio and GB/s), if any. run() passes the embedded docs/perf/h200.json.
void apply_recorded(TransposeResult& r, const peers::Recorded& rec);

// The GPU figures `bench transpose` measures (fast naive, tiled, padded and the copy), measured once per
// process on the CUDA backend (empty on the CPU backend).
const std::vector<bench::Row>& measured_rows(Backend b);

// "4", "18.5": a per-request figure as the sentences print it.
std::string per_request_text(double v);

// The sentences under the warp views, from one request's cost; `what` names the request:
//   "the first load of in: 32 lanes, 4 sectors of 32 B in 1 line: 128 B used of 128 B moved"
//   "the first load of the tile: 32 lanes, 32 words in bank 0: 32 passes, a 32-way bank conflict"
std::string global_caption(const warp_access::Request& r, const std::string& what);
std::string shared_caption(const warp_access::Request& r, const std::string& what);

}  // namespace kl::study::transpose_study
