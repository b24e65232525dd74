// Rung 6, fast variant, Hopper path: the deterministic mode's wgmma-tma kernels, whose dQ adds into each query
// tile arrive in one fixed order (flash_attention_backward_fast.h's ordered_dq; the kOrdered flag of the body in
// flash_attention_backward_fast_sm90.cuh). A translation unit of their own, so that the plain kernels
// (flash_attention_backward_fast_plain.sm90a.cu) compile as before and the two build in parallel.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a build (the kernels here are real), else 0.
__global__ void bwd_ordered_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

}  // namespace sm90_bwd

void launch_wgmma_main_ordered(const FastBackwardParams& p) {
  // run_fast chose the wgmma path where the plain kernels' sm_90a code runs; this file's must run too.
  static const bool loaded = flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_ordered_sm90a_probe",
                                                                                sm90_bwd::bwd_ordered_sm90a_probe);
  if (!loaded)
    throw RuntimeError("flash-attention-backward: the ordered wgmma kernels' sm_90a code did not load here");
  if (!fast_backward_ordered_dq(p))
    throw RuntimeError("flash-attention-backward: the ordered dQ kernel runs the deterministic mode on wgmma-tma, "
                       "plain heads, d = 64 or 128");
  const bool half = p.dtype == FastDtype::Fp16;
  if (p.d == 64)
    half ? sm90_bwd::launch_typed_ordered<__half, 64>(p) : sm90_bwd::launch_typed_ordered<__nv_bfloat16, 64>(p);
  else
    half ? sm90_bwd::launch_typed_ordered<__half, 128>(p) : sm90_bwd::launch_typed_ordered<__nv_bfloat16, 128>(p);
}

}  // namespace kl::flash_attention_backward
