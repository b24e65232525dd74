// Rung 6, fast variant, Hopper path: the atomic wgmma-tma kernel at d = 128 on 80 query rows a step (both masks),
// bf16 and fp16 (the kernel's body and its kM80 form in kernels/rungs/flash_attention_backward_fast_sm90.cuh; where it
// runs: fast_backward_steps80). A translation unit of its own, so the plain one compiles its kernels as before.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

void launch_m80_main(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream) {
  const bool half = p.dtype == FastDtype::Fp16;
  const std::string name = main_launch_name<128>(half, MainKind::Tma) + "_m80";
  const dim3 grid = main_grid<128>(p), block(FastBackwardTraitsSm90<128>::kThreads);
  const size_t smem = main_smem<128>(MainKind::Tma, true);
  if (half)
    cuda::launch(name.c_str(), flash_bwd_wgmma_tma_kernel<__half, 128, false, true>, grid, block, smem, stream, c.dq,
                 c.q, c.dout, p);
  else
    cuda::launch(name.c_str(), flash_bwd_wgmma_tma_kernel<__nv_bfloat16, 128, false, true>, grid, block, smem, stream,
                 c.dq, c.q, c.dout, p);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
