// Rung 5, fast variant, Hopper path: the plain wgmma kernels (the ones run_fast runs and the benches time) and
// their entry points. The kernels themselves, their design and their launchers are in
// kernels/rungs/flash_attention_fast_sm90.cuh, shared with the instrumented build
// (flash_attention_fast_timeline.sm90a.cu), which is a translation unit of its own so that this one compiles
// exactly as before and the two build in parallel.
#include "kernels/rungs/flash_attention_fast_sm90.cuh"

namespace kl::flash_attention {
namespace sm90_detail {

// 1 when the driver loaded the sm_90a build of this file (the wgmma kernels are real), else 0.
__global__ void sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

}  // namespace sm90_detail

bool fast_wgmma_kernels_loaded() {
  static const bool loaded = [] {
    if (cuda_device_count() == 0) return false;  // no device: the caller reports that, not this probe
    int dev = 0, major = 0, minor = 0;
    KL_CUDA_CHECK(cudaGetDevice(&dev));
    KL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    KL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major != 9 || minor != 0) return false;  // sm_90a code runs on compute capability 9.0 only
    return sm90_detail::sm90a_probe_reads_one("flash_fwd_sm90a_probe", sm90_detail::sm90a_probe);
  }();
  return loaded;
}

bool run_fast_wgmma(const FastParams& p, bool late_rescale) {
  validate(p);
  using sm90_detail::launch_tma_for;
  const bool launched = p.d == 64    ? launch_tma_for<64>(p, late_rescale)
                        : p.d == 128 ? launch_tma_for<128>(p, late_rescale)
                                     : launch_tma_for<256>(p, late_rescale);
  if (launched) return true;
  run_fast_mma_sync(p);  // no tensor map for these strides: the kernel every GPU runs
  return false;
}

bool run_fast_wgmma_persistent(const FastParams& p, FastPath path) {
  validate(p);
  if (!fast_path_persistent(path))
    throw RuntimeError(std::string("run_fast_wgmma_persistent: not a persistent path: ") + fast_path_name(path));
  return with_persistent_traits(path, p.d, [&](auto tr) { return sm90_detail::launch_persistent<decltype(tr)>(p); });
}

}  // namespace kl::flash_attention
