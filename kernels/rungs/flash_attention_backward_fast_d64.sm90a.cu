// Rung 6, fast variant, Hopper path: the wgmma main kernels at d = 64, plain and grouped-query (the body and its
// launcher in flash_attention_backward_fast_sm90.cuh). A translation unit of their own: wgmma-tma takes 128 query
// rows a step at d = 64 only, and with those kernels beside them nvcc compiled the d = 128 kernels differently
// (ptxas: 237 -> 238 and 246 -> 255 registers, the same source); apart, the d = 128 kernels of the plain and
// grouped-query files are the instructions they were before, and the three build in parallel.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a build (the kernels here are real), else 0.
__global__ void bwd_d64_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

void launch_wgmma_main_d64(const FastBackwardParams& p, bool atomic_dq, cudaStream_t stream) {
  // run_fast chose the wgmma path where the plain kernels' sm_90a code runs; this file's must run too.
  static const bool loaded = flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_d64_sm90a_probe",
                                                                                bwd_d64_sm90a_probe);
  if (!loaded)
    throw RuntimeError("flash-attention-backward: the d = 64 wgmma kernels' sm_90a code did not load here");
  const bool half = p.dtype == FastDtype::Fp16;
  if (grouped_query(p))
    half ? launch_main_kernel<__half, 64, true>(p, atomic_dq, stream)
         : launch_main_kernel<__nv_bfloat16, 64, true>(p, atomic_dq, stream);
  else
    half ? launch_main_kernel<__half, 64, false>(p, atomic_dq, stream)
         : launch_main_kernel<__nv_bfloat16, 64, false>(p, atomic_dq, stream);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
