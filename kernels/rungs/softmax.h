// Rung 3: fused row softmax, the BLOCK_SIZE = 1024 truncation bug beside its fix, and the online form.
// x is [rows, n_cols] float32, C order; one program per row (pid = row), its offsets = the row's columns
// (BLOCK_SIZE counts elements, not threads: a Triton program of BLOCK_SIZE elements runs on num_warps x 32
// threads, each holding several elements; BLOCK_SIZE is a power of two because tl.arange needs one):
//   m = max_j x[j];   e_j = exp(x[j] - m);   out[j] = e_j / sum_j e_j        (numerically stable)
// Versions:
//   reference   float64 on the host, the ground truth.
//   traced      (buggy, fixed and online, CPU and CUDA, whenever a trace or an edited source is given) the
//               editable source kernels/editable/sources/softmax.cu: softmax_traced, Triton's program, one
//               program per row, BLOCK_SIZE its parameter (the host passes 1024 for buggy,
//               next_power_of_2(n_cols) for fixed), tl.max and tl.sum as shared-memory tree reductions with
//               __syncthreads; softmax_online_traced, the online form below chunk by chunk, recording (m, l)
//               after every chunk of the trace row. What the views draw. An edited copy runs instead when
//               one is given (kernels/editable/launch.h). Without a trace the fast forms below run (CPU:
//               the same programs as plain loops).
//   buggy       BLOCK_SIZE fixed at 1024, the mistake to be shown: the program loads
//               cols = arange(1024) masked by cols < n_cols, so for n_cols > 1024 it normalises over
//               the first 1024 columns only and never stores columns >= 1024 (they stay NaN-poisoned).
//   fixed       BLOCK_SIZE = next_power_of_2(n_cols): the whole row in one program, one read, one write. The
//               traced kernel holds it in float v[64] per thread, indexed at run time: local memory (ptxas
//               gives it a 256-byte stack frame at sm_90), not registers; at the widest row it runs 512
//               threads (16 warps) x 64 values.
//               The widest row it takes is this build's choice, not the chip's: fixed_max_cols() =
//               max_threads_per_block x kMaxRowRegsPerThread (1024 threads x 32 row values = 32768
//               columns); the chip has 65,536 registers per SM and per block and up to 255 per thread
//               (kernels/studies/softmax_study.h). Past it `fixed` is refused with an InputError naming the
//               limit and `online`; Triton would compile the larger BLOCK_SIZE and spill to local memory.
//               CUDA: a warp (or sub-warp) per row up to 1024 columns, a block per row beyond,
//               16-byte loads and stores where n_cols % 4 == 0.
//   online      any width: the row in chunks with a running max and running sum (Milakov & Gimelshein
//               2018, the idea FlashAttention is built on):
//                 m_new = max(m_old, rowmax(chunk))
//                 l_new = l_old * exp(m_old - m_new) + rowsum(exp(chunk - m_new))
//               then a second pass writes exp(x - m) / l (two reads, one write). The traced form goes chunk
//               by chunk for the whole program (chunk = `chunk` columns) and records (m, l) after every
//               chunk for one chosen row; the fast CUDA form keeps a running (m, l) per thread and merges
//               them once at the end (same rule).
//   three_pass  unfused, for the Measure view: a max kernel (rowmax to memory), an exp-sum kernel
//               (exp(x - m) to `out`, rowsum to memory), a normalise kernel (reads `out` back):
//               20 bytes per element instead of 8.
// Edge cases, every version: -inf entries give exactly 0; a row that is all -inf has nothing to attend to
// and comes back all 0 (FlashAttention's rule, not NaN); |x| ~ 1e4 is fine (the max is subtracted);
// +inf or NaN inputs give NaN rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/backend.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/registry.h"

namespace kl::softmax {

enum class Variant { Buggy, Fixed, Online, ThreePass };
const char* variant_name(Variant v);              // "buggy", "fixed", "online", "three_pass"
Variant parse_variant(const std::string& name);   // InputError for anything else

constexpr int kBuggyBlock = 1024;
constexpr int kMaxRowRegsPerThread = 32;           // the widest row / max_threads_per_block (this build's choice; the
                                                   // traced kernel runs that row as 512 threads x 64 values)
constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;
constexpr int kMinChunk = 32, kMaxChunk = 4096, kDefaultChunk = 1024;

// The widest row this build's `fixed` takes in one pass on device `d`: max_threads_per_block * 32.
int64_t fixed_max_cols(const DeviceInfo& d);
// BLOCK_SIZE (elements per program, not threads) the variant launches with for n_cols: 1024 for buggy,
// next_power_of_2(n_cols) for fixed, the chunk for online and three_pass.
int64_t block_size(Variant v, int64_t n_cols, int chunk = kDefaultChunk);

// float64 ground truth (a row of all -inf gives 0).
void reference(const float* x, double* out, int64_t rows, int64_t n_cols);

// What the traced runs record, where the backend runs. The views draw these; they never recompute them.
struct SoftmaxTraceView {
  int32_t* writer = nullptr;        // [rows * n_cols] row (= pid) that stored the element; -1 = never
  uint32_t* write_count = nullptr;  // [rows * n_cols] stores received
  // online only, for row `trace_row`, one entry per chunk k (columns [k*chunk, (k+1)*chunk)):
  float* chunk_max = nullptr;       // [n_chunks] rowmax of chunk k alone
  float* running_max = nullptr;     // [n_chunks] m after chunk k
  float* running_sum = nullptr;     // [n_chunks] l after chunk k (relative to m after chunk k)
  int64_t rows = 0, n_cols = 0, trace_row = 0, n_chunks = 0;
  int chunk = kDefaultChunk;
};
struct SoftmaxTrace {
  Buffer<int32_t> writer;
  Buffer<uint32_t> write_count;
  Buffer<float> chunk_max, running_max, running_sum;
  int64_t rows = 0, n_cols = 0, trace_row = 0, n_chunks = 0;
  int chunk = kDefaultChunk;

  // Poisons the trace for a launch: writers -1, counts 0, chunk records NaN.
  void reset(Backend b, int64_t rows_, int64_t n_cols_, int64_t trace_row_ = 0, int chunk_ = kDefaultChunk);
  SoftmaxTraceView view();
};

// Runs variant `v`; pointers live where `b` runs. `trace` may be null (the fast kernels run); when given
// it must have been reset() for (rows, n_cols, chunk) on the same backend. `scratch` (may be null) is
// 2 * rows floats for three_pass's row max and row sum; allocated here when null. `src` (buggy, fixed and
// online): an edited copy of the editable source run instead of the shipped one, traced or not
// (CompileError when it does not compile). Returns the edited kernel's first misbehaviour (kind None when
// clean; the shipped kernel misbehaving is a RuntimeError).
// Throws InputError for rows or n_cols < 1, rows * n_cols > kMaxElements, a chunk that is not a power
// of two in [32, 4096], `fixed` past fixed_max_cols(), and a source for three_pass.
editable::Fault run(Backend b, Variant v, const float* x, float* out, int64_t rows, int64_t n_cols,
                    SoftmaxTraceView* trace = nullptr, int chunk = kDefaultChunk, float* scratch = nullptr,
                    const editable::Source* src = nullptr);

// For the views (no GL here): the (value, state) cell pairs a heatmap draws (kernels/runtime/cell_state.h:
// kCellNormal written, kCellUnwritten never written), written where `b` runs, so on the CUDA backend `cells` can be a mapped GL
// buffer and nothing goes through the host.
//   output_cells: rows [row0, row0 + n_rows) of `out`, value = out, state from the recorded writer.
//   value_cells:  `count` values as (value, kCellNormal) pairs (e.g. one row of x).
void output_cells(Backend b, const float* out, const int32_t* writer, int64_t n_cols, int64_t row0, int64_t n_rows,
                  float* cells);
void value_cells(Backend b, const float* values, int64_t count, float* cells);

// `bench softmax`: fixed, online and three_pass against copy bandwidth at rows = 4096 and
// n_cols in {1024, ..., 32768} (quick: 64 rows, n_cols 1024 and 4096).
std::vector<bench::Row> bench_rows(Backend b, bool quick);

KernelEntry entry();

// The parameters of this rung's kernels, one spec each (name, range, default, help): the registry
// (`run`, `list`), the panel and the study all take them from here.
namespace param {
ParamSpec chunk();
}  // namespace param

namespace detail {
void check_shape(Backend b, Variant v, int64_t rows, int64_t n_cols, int chunk);
// The launch of the editable kernel for buggy or fixed: one program per row of min(BLOCK_SIZE, 32 * num_warps)
// threads, num_warps as Triton's tutorial picks it (4; 8 from BLOCK_SIZE 2048; 16 from 4096).
// online: softmax_online_traced with chunk `chunk`, its trace records those of t (absent when t is null).
editable::Launch traced_launch(Variant v, const float* x, float* out, int64_t rows, int64_t n_cols,
                               SoftmaxTraceView* t, int chunk = kDefaultChunk);
#ifdef KL_HAS_CUDA
void run_cuda(Variant v, const float* x, float* out, int64_t rows, int64_t n_cols, SoftmaxTraceView* trace,
              int chunk, float* scratch);
void output_cells_cuda(const float* out, const int32_t* writer, int64_t n_cols, int64_t row0, int64_t n_rows,
                       float* cells);
void value_cells_cuda(const float* values, int64_t count, float* cells);
#endif
}  // namespace detail

}  // namespace kl::softmax
