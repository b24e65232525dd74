// Rung 6, fast variant, Hopper path: the deterministic mode's kernel with its dQ adds in turn, plain heads at d = 64
// and 128, bf16 and fp16 (the kernel and its design in kernels/rungs/flash_attention_backward_fast_ordered_sm90.cuh;
// where it runs: fast_backward_ordered_dq).
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "kernels/rungs/flash_attention_backward_fast_ordered_sm90.cuh"
#include "kernels/runtime/backend.h"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

namespace {
// The turn counters, [B * H][M][2] int32, zeroed on `stream` before each launch; one buffer for the process, grown
// as shapes need (cudaFree waits for the device). The caller holds counters_mutex() from here to the launch, so
// each launch's zeroing and kernel follow each other on the stream (run_fast's, the legacy default stream, which
// runs them in that order across host threads: the Measure worker's bench and a panel's run).
std::mutex& counters_mutex() {
  static std::mutex mutex;
  return mutex;
}
int* turn_counters(int64_t count, cudaStream_t stream) {
  static int* buf = nullptr;
  static int64_t cap = 0;
  if (count > cap) {
    if (buf) KL_CUDA_CHECK(cudaFree(buf));
    buf = nullptr;
    cap = 0;
    KL_CUDA_CHECK(cudaMalloc(&buf, size_t(count) * sizeof(int)));
    cap = count;
  }
  KL_CUDA_CHECK(cudaMemsetAsync(buf, 0, size_t(count) * sizeof(int), stream));
  return buf;
}

template <class T, int D>
void launch_ordered_typed(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream) {
  using Tr = FastBackwardTraitsSm90<D>;
  const bool m80 = D == 128 && c.m80;  // 80 query rows a step (fast_backward_steps80)
  const std::string name = std::string("flash_bwd_ordered_") + (D == 64 ? "d64" : "d128") + (m80 ? "_m80" : "") +
                           (std::is_same<T, __half>::value ? "_fp16" : "_bf16");
  const int rows = m80 ? FastBackwardTraitsSm90<128>::kBlockM80 : Tr::kBlockMTma;
  const int M = ceil_div(p.Lq, rows);
  const std::lock_guard<std::mutex> lock(counters_mutex());
  int* turns = turn_counters(int64_t(p.B) * p.H * M * 2, stream);
  const OrderedDq order = ordered_dq_plan(p.Lq, p.Lk, rows, Tr::kBlockN, p.causal, device_info(Backend::Cuda).sm_count);
  // Each query tile's first in turn stores its dQ, so the preprocess left the accumulator as it was: only the rows
  // no CTA reaches (ordered_dq_unreached_rows) are zeroed here.
  const int unreached = ordered_dq_unreached_rows(p.Lq, p.Lk, rows, Tr::kBlockN, p.causal);
  if (unreached > 0)
    KL_CUDA_CHECK(cudaMemset2DAsync(p.dq_accum, size_t(p.Lq) * D * sizeof(float), 0,
                                    size_t(unreached) * D * sizeof(float), size_t(p.B) * p.H, stream));
  dim3 grid = main_grid<D>(p);  // (N, H, B); gangs: (N, gangs), at most one a head
  if (order.gang) grid.y = unsigned(std::min(order.gang, p.B * p.H)), grid.z = 1;
  if constexpr (D == 128)
    if (m80) {
      cuda::launch(name.c_str(), flash_bwd_ordered_kernel<T, D, true>, grid, dim3(kOrderedThreads),
                   main_smem<D>(MainKind::Tma, true), stream, c.dq, c.q, c.dout, p, turns, order);
      return;
    }
  cuda::launch(name.c_str(), flash_bwd_ordered_kernel<T, D>, grid, dim3(kOrderedThreads), main_smem<D>(MainKind::Tma),
               stream, c.dq, c.q, c.dout, p, turns, order);
}
}  // namespace

void launch_ordered_main(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream) {
  const bool half = p.dtype == FastDtype::Fp16;
  if (p.d == 64)
    half ? launch_ordered_typed<__half, 64>(p, c, stream) : launch_ordered_typed<__nv_bfloat16, 64>(p, c, stream);
  else
    half ? launch_ordered_typed<__half, 128>(p, c, stream) : launch_ordered_typed<__nv_bfloat16, 128>(p, c, stream);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
