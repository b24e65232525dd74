// Rung 6, fast variant, Hopper path: the warp-role main kernel (candidate, KL_BWD_WS=1; the kernel and its design
// in kernels/rungs/flash_attention_backward_fast_ws_sm90.cuh), plain heads at d = 64 and 128, bf16 and fp16, with
// its dQ adds as they come or (the deterministic mode) in turn.
#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/rungs/flash_attention_backward_fast_ws_sm90.cuh"
#include "kernels/runtime/backend.h"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

namespace {
// The turn counters of the ordered adds, [B * H][M][2] int32, zeroed before each launch (grown as needed, kept
// for the process).
int* turn_counters(int64_t count, cudaStream_t stream) {
  static int* buf = nullptr;
  static int64_t cap = 0;
  if (count > cap) {
    if (buf) KL_CUDA_CHECK(cudaFree(buf));
    buf = nullptr;
    KL_CUDA_CHECK(cudaMalloc(&buf, size_t(count) * sizeof(int)));
    cap = count;
  }
  KL_CUDA_CHECK(cudaMemsetAsync(buf, 0, size_t(count) * sizeof(int), stream));
  return buf;
}

template <class T, int D>
void launch_ws_typed(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream) {
  using Tr = FastBackwardTraitsSm90<D>;
  const bool ordered = fast_backward_ws_ordered(p);
  const std::string name = std::string("flash_bwd_ws_") + (ordered ? "ordered_" : "") + (D == 64 ? "d64" : "d128") +
                           (std::is_same<T, __half>::value ? "_fp16" : "_bf16");
  const dim3 grid = main_grid<D>(p), block(kWsThreads);
  const size_t smem = main_smem<D>(MainKind::Tma);
  if (!ordered) {
    cuda::launch(name.c_str(), flash_bwd_ws_kernel<T, D, false>, grid, block, smem, stream, c.dq, c.q, c.dout, p,
                 static_cast<int*>(nullptr), OrderedDq{});
    return;
  }
  const int M = ceil_div(p.Lq, Tr::kBlockMTma);
  int* turns = turn_counters(int64_t(p.B) * p.H * M * 2, stream);
  OrderedDq order =
      ordered_dq_plan(p.Lq, p.Lk, Tr::kBlockMTma, Tr::kBlockN, p.causal, device_info(Backend::Cuda).sm_count);
  static const int flags = [] {  // experiment switches (the plan's `flags`; 4: ascending turns, no rotation)
    const char* e = std::getenv("KL_BWD_WS_FLAGS");
    return e ? std::atoi(e) : 0;
  }();
  order.flags = flags & 3;
  if ((flags & 4) && !p.causal) order = OrderedDq{OrderedDqMode::Ascending, 0, 0, flags & 3};
  cuda::launch(name.c_str(), flash_bwd_ws_kernel<T, D, true>, grid, block, smem, stream, c.dq, c.q, c.dout, p, turns,
               order);
}
}  // namespace

void launch_ws_main(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream) {
  const bool half = p.dtype == FastDtype::Fp16;
  if (p.d == 64)
    half ? launch_ws_typed<__half, 64>(p, c, stream) : launch_ws_typed<__nv_bfloat16, 64>(p, c, stream);
  else
    half ? launch_ws_typed<__half, 128>(p, c, stream) : launch_ws_typed<__nv_bfloat16, 128>(p, c, stream);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
