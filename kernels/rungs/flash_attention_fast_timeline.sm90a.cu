// Rung 5, fast variant: the instrumented build of the bulk-tensor-copy wgmma kernels (issue 30, the timeline
// "Inside the fast kernel"). The same kernel bodies as flash_attention_fast_plain.sm90a.cu's (the header
// flash_attention_fast_sm90.cuh), instantiated with the LaneRecorder (sm90_device.cuh): the first thread of
// each consumer warpgroup and the producer's issuing lane stamp clock64 at every phase boundary into the trace
// buffer, for the CTAs the trace names (kernels/measure/timeline_trace.h). Only bf16, d = 64 and 128: what the
// recordings need, and half the compile time of every dtype and head dim.
#include "kernels/rungs/flash_attention_fast_sm90.cuh"

namespace kl::flash_attention {
namespace sm90_detail {

// 1 when the driver loaded this file's sm_90a build (the instrumented kernels are real), else 0.
__global__ void timeline_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

namespace {

bool traced_kernels_loaded() {
  static const bool loaded = fast_wgmma_kernels_loaded() &&
                             sm90a_probe_reads_one("flash_fwd_timeline_sm90a_probe", timeline_sm90a_probe);
  return loaded;
}

bool traced_path(FastPath path) {
  return path == FastPath::Wgmma || path == FastPath::WgmmaLate || fast_path_persistent(path);
}

// InputError unless the instrumented build has `path`'s kernel for p and it can run here.
void check_traced(const FastParams& p, FastPath path) {
  if (!traced_path(path)) {
    std::string allowed;
    for (FastPath named : kNamedWgmmaPaths)
      if (traced_path(named)) allowed += (allowed.empty() ? "" : ", ") + std::string(fast_path_name(named));
    throw InputError(out_of_range_message("path", fast_path_name(path), allowed + " (the instrumented kernels)"));
  }
  if (p.d != 64 && p.d != 128)
    throw InputError(out_of_range_message("d", std::to_string(p.d), "{64, 128} (the instrumented kernels)"));
  if (p.dtype != FastDtype::Bf16)
    throw InputError(out_of_range_message("dtype", "fp16", "bf16 (the instrumented kernels)"));
  if (!traced_kernels_loaded())
    throw InputError("the instrumented fast kernels need an H100/H200 (compute capability 9.0) with the sm_90a "
                     "build loaded; this device or build is not one");
}

// f(Tr{}) for the TMA kernel's traits of a non-persistent traced path at d = 64 or 128.
template <class F>
auto with_tma_traced_traits(FastPath path, int d, F&& f) {
  const bool late = path == FastPath::WgmmaLate;
  if (d == 64) return late ? f(FastTraitsSm90TmaOpt<64, 1, true>{}) : f(FastTraitsSm90Tma<64>{});
  return late ? f(FastTraitsSm90TmaOpt<128, 1, true>{}) : f(FastTraitsSm90Tma<128>{});
}

}  // namespace
}  // namespace sm90_detail

FastTracedShape fast_traced_shape(const FastParams& p, FastPath path) {
  using namespace sm90_detail;
  validate(p);
  check_traced(p, path);
  FastTracedShape s;
  s.persistent = fast_path_persistent(path);
  auto fill = [&](auto tr) {
    using Tr = decltype(tr);
    s.block_m = Tr::kBlockM, s.block_n = Tr::kBlockN, s.lanes = Tr::kNWarps / 4 + 1;
    if (s.persistent) {
      s.ctas = int(persistent_grid<Tr>(p));
      s.launch = persistent_launch_name<Tr>(false) + "_traced";
    } else {
      const dim3 g = tma_grid<Tr>(p);
      s.ctas = int(g.x * g.y * g.z);
      s.launch = tma_launch_name<Tr>(false) + "_traced";
    }
    return 0;
  };
  if (s.persistent)
    with_persistent_traits(path, p.d, fill);
  else
    with_tma_traced_traits(path, p.d, fill);
  return s;
}

void run_fast_traced(const FastParams& p, FastPath path, const timeline::TraceArgs& trace) {
  using namespace sm90_detail;
  validate(p);
  check_traced(p, path);
  bool launched = false;
  if (fast_path_persistent(path)) {
    launched = with_persistent_traits(path, p.d, [&](auto tr) -> bool {
      using Tr = decltype(tr);
      if constexpr (Tr::kHeadDim == 256) {
        throw RuntimeError("run_fast_traced: no instrumented kernel for these tiles");  // check_traced refused them
      } else {
        return launch_persistent<Tr, true>(p, &trace);
      }
    });
  } else {
    launched = with_tma_traced_traits(path, p.d, [&](auto tr) { return launch_tma<decltype(tr), true>(p, &trace); });
  }
  if (!launched)
    throw InputError(std::string("the instrumented ") + fast_path_name(path) +
                     " kernel needs bulk-tensor-copy maps for these strides; the driver refused them");
}

}  // namespace kl::flash_attention
