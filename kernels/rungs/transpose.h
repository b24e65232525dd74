// Rung 1½: the warp's view of memory, a matrix transpose (issue 31). out = in^T: in is [rows, cols]
// row-major float32, out [cols, rows], out[c][r] = in[r][c]. Nothing is computed, so the speed is all in how
// a warp's 32 lanes touch memory: coalescing (the 32-byte sectors a request needs) and shared-memory bank
// conflicts. Every version moves the matrix in TILE x TILE tiles, one program (CUDA block) of (TILE,
// BLOCK_ROWS) = (32, 8) threads per tile, each thread 4 elements 8 rows apart. Versions:
//   reference  plain loop on the host, the ground truth (a copy: bit for bit).
//   naive      lanes read along a row of in (4 sectors a request) and write down a column of out (rows *
//              4 bytes apart: 32 sectors a request once rows >= 8).
//   tiled      the tile goes through shared memory: both device-memory sides coalesced; the tile read down
//              a column puts 32 words of one bank in each request (a 32-way bank conflict).
//   padded     the tile's rows padded to 33 floats: the column's words fall in 32 banks, no conflict.
// Each version runs in two builds:
//   traced     (CPU and CUDA) the editable source kernels/editable/sources/transpose.cu (transpose_naive,
//              transpose_tiled, transpose_padded): bounds-checked accesses through the tracing API, out's
//              writer trace and, when asked, access logs of in, out and the tile (kernels/runtime/trace.h),
//              which the views turn into sectors and banks (kernels/runtime/warp_access.h). An edited copy
//              runs instead when one is given (kernels/editable/launch.h).
//   fast       (CUDA only) the same three kernels on raw pointers, the same addresses, no checks, no
//              trace: what `bench transpose` times against a device-to-device copy (kernels/rungs/
//              transpose.cu). On the CPU backend `run` takes the traced build.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/backend.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/registry.h"
#include "kernels/runtime/trace.h"

namespace kl::transpose {

enum class Variant { Naive, Tiled, Padded };
constexpr Variant kVariants[] = {Variant::Naive, Variant::Tiled, Variant::Padded};
const char* variant_name(Variant v);             // "naive", "tiled", "padded"
Variant parse_variant(const std::string& name);  // InputError for anything else
const char* kernel_name(Variant v);              // "transpose_naive", ...

constexpr int kTile = 32;       // TILE in the source
constexpr int kBlockRows = 8;   // BLOCK_ROWS
constexpr int kThreads = kTile * kBlockRows;
constexpr int kPerThread = kTile / kBlockRows;  // elements each thread moves
constexpr int64_t kMaxSide = 2097120;           // rows: 65535 programs of 32 rows (the grid's y limit)
constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;

void reference(const float* in, float* out, int64_t rows, int64_t cols);

// Programs of the launch: ceil(cols / 32) x ceil(rows / 32), program id = bx + gx * by.
int64_t grid_x(int64_t cols);
int64_t grid_y(int64_t rows);

// The traced build's records, where the backend runs. Any part may be left out (null / not reset).
struct TransposeTraceView {
  int32_t* writer = nullptr;       // [cols * rows]: the program that stored out's element; -1 never
  uint32_t* write_count = nullptr; // [cols * rows]: stores it received
  AccessLog* in = nullptr;         // access logs (issue 31): in's loads, out's stores, the tile's both
  AccessLog* out = nullptr;
  AccessLog* tile = nullptr;       // tiled and padded only
};
// Owns them: writer and counts for every element, the three logs for one program (or every program).
struct TransposeTrace {
  Buffer<int32_t> writer;
  Buffer<uint32_t> write_count;
  AccessLog in, out, tile;
  // program: the program the logs record, or kAccessEveryProgram. Room for kLogRoom records per thread
  // in each log (the shipped kernels make 4 to in and out and 8 to the tile; an edited one more is flagged
  // as overflow by the log, not lost silently).
  static constexpr int64_t kLogRoom = 16;
  void reset(Backend b, int64_t rows, int64_t cols, int64_t program);
  TransposeTraceView view();
};

// Runs version `v` of the traced build (trace or src given) or, on CUDA without either, the fast build.
// Pointers live where `b` runs. Returns an edited kernel's first misbehaviour (kind None when clean; the
// shipped kernel misbehaving is a RuntimeError). Throws InputError for rows or cols outside [1, kMaxSide]
// or more than kMaxElements elements.
editable::Fault run(Backend b, Variant v, const float* in, float* out, int64_t rows, int64_t cols,
                    TransposeTraceView* trace = nullptr, const editable::Source* src = nullptr);
// The fast build (CUDA only: InputError on the CPU backend).
void run_fast(Backend b, Variant v, const float* in, float* out, int64_t rows, int64_t cols);

// `bench transpose`: naive, tiled and padded (fast, and the traced build beside them) on an 8192 x 8192
// float matrix (quick: 1024 x 1024; the CPU backend: the traced build at 1024 x 1024, quick 256 x 256)
// against a device-to-device copy of the same bytes measured in the same run. GB/s counts the bytes a
// transpose must move: the matrix read once and written once.
std::vector<bench::Row> bench_rows(Backend b, bool quick);
constexpr int64_t kBenchSide = 8192;

KernelEntry entry();

namespace detail {
void check_shape(int64_t rows, int64_t cols);
// The launch of the editable kernel for `v`, the trace's logs attached (its writer on out).
editable::Launch traced_launch(Variant v, const float* in, float* out, int64_t rows, int64_t cols,
                               TransposeTraceView* t);
#ifdef KL_HAS_CUDA
void run_cuda_fast(Variant v, const float* in, float* out, int64_t rows, int64_t cols);
#endif
}  // namespace detail

}  // namespace kl::transpose
