// Philox on the CPU backend, and the dispatch of run_batch.
#include "kernels/rungs/philox.h"

#include "kernels/runtime/errors.h"

namespace kl::philox {

#ifdef KL_HAS_CUDA
void run_batch_cuda(const U32x4* ctr, const U32x2* key, U32x4* out, int64_t n);
#endif

void run_batch(Backend b, const U32x4* ctr, const U32x2* key, U32x4* out, int64_t n) {
  if (n <= 0) return;
  if (b == Backend::Cpu) {
    for (int64_t i = 0; i < n; ++i) out[i] = philox4x32_10(ctr[i], key[i]);
    return;
  }
#ifdef KL_HAS_CUDA
  run_batch_cuda(ctr, key, out, n);
#else
  throw RuntimeError("built without CUDA");
#endif
}

}  // namespace kl::philox
