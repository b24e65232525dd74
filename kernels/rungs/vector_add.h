// Rung 1: vector add, the execution model.
// A grid of programs; program `pid` covers offsets pid*BLOCK_SIZE + arange(BLOCK_SIZE), and the mask
// offsets < n switches off the tail's offsets past n. BLOCK_SIZE counts elements, not threads (the
// traced CUDA kernel runs a program as one block of min(BLOCK_SIZE, 1024) threads). Versions:
//   reference  plain loop on the host, the ground truth.
//   traced     (CPU and CUDA) the editable source kernels/editable/sources/vector_add.cu, one program per
//              launch-grid entry, offset by offset; records which program stored each element and every
//              offset's mask bit. This is what the panel draws; an edited copy of the source runs instead
//              when one is given (kernels/editable/launch.h).
//   fast       (CUDA only) float4 loads and stores, one 256-thread block per tile of 2 float4 per thread,
//              plain (not evict-first) loads and stores, no trace; what `bench` times.
#pragma once
#include <cstdint>

#include "kernels/editable/launch.h"
#include "kernels/runtime/backend.h"
#include "kernels/runtime/registry.h"
#include "kernels/runtime/trace.h"

namespace kl::vector_add {

constexpr int kMinBlock = 32;
constexpr int kMaxBlock = 4096;
constexpr int64_t kMaxN = int64_t(1) << 26;  // the panel's range; `run` takes up to kMaxRunN
constexpr int64_t kMaxRunN = (int64_t(1) << 31) - 1;

void reference(const float* x, const float* y, float* out, int64_t n);

// The traced version on either backend; pointers live where `b` runs. `trace` may be null; when given
// it must have been reset() for (n, block_size) on the same backend. Throws InputError for a block
// size outside [32, 4096] or not a power of two, or n outside [1, kMaxRunN]. `src`: an edited copy of
// the editable source run instead of the shipped one (CompileError when it does not compile); the
// returned fault is its first misbehaviour (the shipped kernel's is a RuntimeError).
editable::Fault run_traced(Backend b, const float* x, const float* y, float* out, int64_t n, int block_size,
                           ElementTraceView* trace, const editable::Source* src = nullptr);

// The fast version (CUDA backend only; on the CPU backend the traced loop is the only one).
void run_fast(Backend b, const float* x, const float* y, float* out, int64_t n);

KernelEntry entry();

// The parameters of this rung's kernels, one spec each (name, range, default, help): the registry
// (`run`, `list`), the panel and the study all take them from here.
namespace param {
ParamSpec block_size();
}  // namespace param

namespace detail {
void check_shape(int64_t n, int block_size);
// The launch of the editable kernel: grid ceil(n / block_size), min(block_size, 1024) threads.
editable::Launch traced_launch(const float* x, const float* y, float* out, int64_t n, int block_size,
                               ElementTraceView* trace);
#ifdef KL_HAS_CUDA
void run_cuda_fast(const float* x, const float* y, float* out, int64_t n);
#endif
}  // namespace detail

}  // namespace kl::vector_add
