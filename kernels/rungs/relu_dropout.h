// Rung 2: fused ReLU + dropout, and why a random kernel is tested by its distribution.
//   out[i] = keep(i) ? max(x[i], 0) * scale : 0,   keep(i) = u(seed, i) >= p,   scale = fl(1 / (1 - p))
// with u(seed, i) from Philox-4x32-10 keyed by (seed, element index) (kernels/rungs/philox.h): the mask is a
// function of (seed, i) alone, so the CPU and CUDA backends and every BLOCK_SIZE give the same mask, bit
// for bit, and the fast kernel never stores it. Program `pid` covers elements pid*BLOCK_SIZE +
// arange(BLOCK_SIZE) (BLOCK_SIZE a multiple of 4, so a Philox group of 4 never straddles two programs).
// Versions:
//   reference  plain loop on the host, float64 scale: out = float(relu(x) / (1 - p)); the ground truth.
//   fused      one load, relu, drop, scale, one store. CUDA: 16-byte plain loads and stores, 32-bit
//              indices, one Philox call per 4 consecutive elements (its 4 words are their 4 uniforms), up to
//              4 groups in flight per thread. CPU: the same grid, program by program. What `bench` times.
//   traced     (CPU and CUDA) the editable source kernels/editable/sources/relu_dropout.cu: the same math
//              element by element, one Philox call per element (word i % 4 of group i / 4, so the same
//              bits; the source carries its own Philox-4x32-10); records the keep mask and the ElementTrace
//              (writer, offsets) for the views. An edited copy of it runs instead when one is given
//              (kernels/editable/launch.h).
// The mask is not Triton's tl.rand mask: tl.rand(seed, i) takes word 0 of Philox at counter i.
//   unfused    a ReLU kernel writing relu(x) to memory, then a dropout kernel reading it back: 16 bytes
//              per element instead of 8. Same bits as fused; the Measure view shows what fusion saves.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/backend.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/registry.h"
#include "kernels/runtime/trace.h"

namespace kl::relu_dropout {

constexpr int kMinBlock = 32;
constexpr int kMaxBlock = 4096;
constexpr int64_t kMaxRunN = (int64_t(1) << 31) - 1;
constexpr int64_t kMaxSeed = 4294967295ll;  // seeds are 64-bit keys inside; the controls take 32 bits

// Keep-mask bytes as the traced kernels record them.
enum : uint8_t { kDropped = 0, kKept = 1, kKeepNotRun = 0xFF };

// Throws InputError unless 0 <= p < 1 ("p=1: ... allowed [0, 1)").
void check_p(double p);
// The survivors' factor 1/(1-p) rounded once to float32 on the host; every kernel multiplies by it.
float keep_scale(double p);

// Host ground truth; `keep` (may be null) gets kKept/kDropped per element.
void reference(const float* x, float* out, uint8_t* keep, int64_t n, double p, uint64_t seed);

// The traced version's records: the elementwise trace and the keep mask, owned where the backend runs.
struct DropoutTraceView {
  ElementTraceView elements;
  uint8_t* keep = nullptr;  // [n]: kKept / kDropped; kKeepNotRun where nobody ran
};
struct DropoutTrace {
  ElementTrace elements;
  Buffer<uint8_t> keep;
  void reset(Backend b, int64_t n, int block_size) {
    elements.reset(b, n, block_size);
    keep.resize(b, size_t(n));
    keep.fill_bytes(0xFF);
  }
  DropoutTraceView view() { return {elements.view(), keep.data()}; }
};

// All pointers live where `b` runs. Each throws InputError for n outside [1, kMaxRunN], p outside
// [0, 1), or a block size that is not a power of two in [32, 4096].
void run_fused(Backend b, const float* x, float* out, int64_t n, double p, uint64_t seed, int block_size);
// `trace` may be null; when given it must have been reset() for (n, block_size) on the same backend.
// `src`: an edited copy of the editable source run instead of the shipped one (CompileError when it does
// not compile). Returns the edited kernel's first misbehaviour (kind None when clean); the shipped kernel
// misbehaving is a RuntimeError.
editable::Fault run_traced(Backend b, const float* x, float* out, int64_t n, double p, uint64_t seed,
                           int block_size, DropoutTraceView* trace, const editable::Source* src = nullptr);
// `tmp` holds relu(x) between the two kernels ([n] floats).
void run_unfused(Backend b, const float* x, float* tmp, float* out, int64_t n, double p, uint64_t seed,
                 int block_size);

// For the views (no GL here), computed where `b` runs so only a few numbers come back to the host.
//   summarize:  drop counts from the recorded mask, and a histogram of out/x over the survivors with
//               x > 0 (`bins` bins over [ratio_lo, ratio_hi); below/above counted apart): one spike at
//               1/(1-p) when the kernel is right.
//   mask_cells: the mask as a width x height raster of (value, state) heatmap cells, one element per
//               cell in row-major order: value 1 kept, 0 dropped; state kCellUnwritten where nobody ran, kCellMasked
//               for the cells past n. On the CUDA backend `cells` can be a mapped GL buffer.
struct Summary {
  int64_t kept = 0, dropped = 0, not_run = 0;
  int64_t survivors = 0;            // kept with x > 0: the elements the ratio histogram counts
  std::vector<uint32_t> ratio_hist;
  int64_t ratio_below = 0, ratio_above = 0;
  double ratio_lo = 0, ratio_hi = 0;
};
Summary summarize(Backend b, const float* x, const float* out, const uint8_t* keep, int64_t n, double ratio_lo,
                  double ratio_hi, int bins);
void mask_cells(Backend b, const uint8_t* keep, int64_t n, int width, int height, float* cells);

// `bench relu-dropout`: fused vs copy bandwidth (8 bytes per element) and fused vs unfused, at 2^26
// elements (quick: 2^20).
std::vector<bench::Row> bench_rows(Backend b, bool quick);

KernelEntry entry();

// The parameters of this rung's kernels, one spec each (name, range, default, help): the registry
// (`run`, `list`), the panel and the study all take them from here.
namespace param {
ParamSpec p();
ParamSpec seed();
ParamSpec block_size();
}  // namespace param

namespace detail {
void check_args(int64_t n, double p, int block_size);
// The launch of the editable kernel: grid ceil(n / block_size), min(block_size, 1024) threads.
editable::Launch traced_launch(const float* x, float* out, int64_t n, double p, uint64_t seed, int block_size,
                               DropoutTraceView* t);
#ifdef KL_HAS_CUDA
// mode: 0 fused, 1 relu only (x -> out), 2 dropout only (x is already relu'd)
void run_cuda_elementwise(int mode, const float* x, float* out, int64_t n, uint32_t threshold, float scale,
                          uint64_t seed, int block_size);
// counts: [bins + 5]: histogram, then below, above, kept, dropped, survivors (device memory)
void summarize_cuda(const float* x, const float* out, const uint8_t* keep, int64_t n, float lo, float hi, int bins,
                    unsigned long long* counts);
void mask_cells_cuda(const uint8_t* keep, int64_t n, int64_t cells_count, float* cells);
#endif
}  // namespace detail

}  // namespace kl::relu_dropout
