// Rung 6, fast variant, Hopper path: the wgmma main kernels at d = 128 for grouped-query attention (k, v with
// H_kv < H heads; flash_attention_backward_fast.h's design, the kGqa flag of the body in
// flash_attention_backward_fast_sm90.cuh; d = 64's are in flash_attention_backward_fast_d64.sm90a.cu). A
// translation unit of their own, so that the plain kernels' (flash_attention_backward_fast_plain.sm90a.cu) compile
// as before and the files build in parallel.
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
  p.dtype == FastDtype::Fp16 ? launch_main_kernel<__half, 128, true>(p, atomic_dq, stream)
                             : launch_main_kernel<__nv_bfloat16, 128, true>(p, atomic_dq, stream);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
