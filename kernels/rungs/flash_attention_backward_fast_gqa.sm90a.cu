// Rung 6, fast variant, Hopper path: the wgmma main kernels for grouped-query attention (k, v with H_kv < H
// heads; flash_attention_backward_fast.h's design, the kGqa flag of the body in
// flash_attention_backward_fast_sm90.cuh). A translation unit of their own, so that the plain kernels'
// (flash_attention_backward_fast_plain.sm90a.cu) compile as before and the two build in parallel.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a build (the kernels here are real), else 0.
__global__ void bwd_gqa_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

void launch_wgmma_main_gqa(const FastBackwardParams& p, bool atomic_dq, cudaStream_t stream) {
  // run_fast chose the wgmma path where the plain kernels' sm_90a code runs; this file's must run too.
  static const bool loaded = flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_gqa_sm90a_probe",
                                                                                bwd_gqa_sm90a_probe);
  if (!loaded)
    throw RuntimeError("flash-attention-backward: the grouped-query wgmma kernels' sm_90a code did not load here");
  const bool half = p.dtype == FastDtype::Fp16;
  if (p.d == 64)
    half ? launch_main_kernel<__half, 64, true>(p, atomic_dq, stream)
         : launch_main_kernel<__nv_bfloat16, 64, true>(p, atomic_dq, stream);
  else
    half ? launch_main_kernel<__half, 128, true>(p, atomic_dq, stream)
         : launch_main_kernel<__nv_bfloat16, 128, true>(p, atomic_dq, stream);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
