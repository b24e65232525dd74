// Rung 6, fast variant, Hopper path: the plain wgmma main kernels at d = 128 (the ones run_fast runs; d = 64's
// and the grouped-query ones have files of their own) and the entry points. The kernel, its design and its
// launcher are in kernels/rungs/flash_attention_backward_fast_sm90.cuh, shared with the instrumented build
// (flash_attention_backward_fast_timeline.sm90a.cu), a translation unit of its own so that this one compiles as
// before.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a code (the kernel above is real), else 0.
__global__ void bwd_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

}  // namespace sm90_bwd

// Compute capability 9.0 and the forward's sm_90a code loaded (its probe), and this file's too (probed once).
bool fast_backward_wgmma_available() {
  static const bool loaded = [] {
    if (!flash_attention::fast_wgmma_kernels_loaded()) return false;
    return flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_sm90a_probe", sm90_bwd::bwd_sm90a_probe);
  }();
  return loaded;
}

void launch_wgmma_main(const FastBackwardParams& p, bool atomic_dq, cudaStream_t stream) {
  if (p.d == 256) {  // a dK/dV kernel of its own; dQ from the dQ pass in both modes (fast_backward_dq_by_pass)
    if (atomic_dq) throw RuntimeError("flash-attention-backward: no d = 256 kernel adds dQ by atomics");
    return launch_wgmma_dkdv_d256(p, stream);
  }
  if (p.d == 64) return sm90_bwd::launch_wgmma_main_d64(p, atomic_dq, stream);          // kernels of their own
  if (grouped_query(p)) return sm90_bwd::launch_wgmma_main_gqa(p, atomic_dq, stream);  // likewise
  p.dtype == FastDtype::Fp16 ? sm90_bwd::launch_main_kernel<__half, 128, false>(p, atomic_dq, stream)
                             : sm90_bwd::launch_main_kernel<__nv_bfloat16, 128, false>(p, atomic_dq, stream);
}

}  // namespace kl::flash_attention_backward
