// Rung 6, fast variant: the instrumented build of the wgmma main kernel (issue 30, the timeline "Inside the
// fast kernel"). The same body as flash_attention_backward_fast_plain.sm90a.cu's (the header
// flash_attention_backward_fast_sm90.cuh) with the LaneRecorder: the first thread of each warpgroup stamps
// clock64 at every phase boundary of the CTAs a trace names (kernels/measure/timeline_trace.h). bf16 only.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a build (the instrumented kernels are real), else 0.
__global__ void bwd_timeline_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

namespace {

// InputError unless the instrumented main kernel can run for p here.
void check_traced(const FastBackwardParams& p) {
  validate_fast(p);
  if (p.dtype != FastDtype::Bf16)
    throw InputError(out_of_range_message("dtype", "fp16", "bf16 (the instrumented kernels)"));
  if (grouped_query(p))
    throw InputError(out_of_range_message("H_kv", std::to_string(p.H_kv),
                                          "H=" + std::to_string(p.H) +
                                              " (the instrumented kernel has no grouped-query attention)"));
  static const bool loaded = fast_backward_wgmma_available() &&
                             flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_timeline_sm90a_probe",
                                                                                 bwd_timeline_sm90a_probe);
  if (!loaded)
    throw InputError("the instrumented backward kernel needs an H100/H200 (compute capability 9.0) with the sm_90a "
                     "build loaded; this device or build is not one");
}

}  // namespace
}  // namespace sm90_bwd

FastBackwardTracedShape fast_backward_traced_shape(const FastBackwardParams& p, bool atomic_dq) {
  sm90_bwd::check_traced(p);
  using Tr = FastBackwardTraitsSm90<64>;  // the same tiles at d = 128, but wgmma-tma's query rows at d = 64
  FastBackwardTracedShape s;
  const dim3 g = p.d == 64 ? sm90_bwd::main_grid<64>(p) : sm90_bwd::main_grid<128>(p);
  s.ctas = int(g.x * g.y * g.z);
  s.lanes = Tr::kThreads / 128;
  const sm90_bwd::MainKind kind = sm90_bwd::main_kind_asked(p, atomic_dq);  // as named unless a map is refused
  const bool tma = kind == sm90_bwd::MainKind::Tma || kind == sm90_bwd::MainKind::DkDvTma;
  const bool m80 = fast_backward_steps80(p, kind == sm90_bwd::MainKind::Tma);  // d = 128: 80 query rows a step
  s.block_m = m80 ? FastBackwardTraitsSm90<128>::kBlockM80 : tma && p.d == 64 ? Tr::kBlockMTma : Tr::kBlockM;
  s.block_n = Tr::kBlockN;
  s.launch = (p.d == 64 ? sm90_bwd::main_launch_name<64>(false, kind) : sm90_bwd::main_launch_name<128>(false, kind)) +
             (m80 ? "_m80" : "") + "_traced";
  return s;
}

void launch_wgmma_main_traced(const FastBackwardParams& p, bool atomic_dq, const timeline::TraceArgs& trace) {
  sm90_bwd::check_traced(p);
  if (p.d == 64)
    sm90_bwd::launch_traced<64>(p, atomic_dq, trace);
  else
    sm90_bwd::launch_traced<128>(p, atomic_dq, trace);
}

}  // namespace kl::flash_attention_backward
