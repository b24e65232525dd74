#include "kernels/backend.h"

#include "kernels/errors.h"

#ifdef KL_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace kl {

const char* backend_name(Backend b) { return b == Backend::Cuda ? "cuda" : "cpu"; }

bool cuda_compiled() {
#ifdef KL_HAS_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count(std::string* why_none) {
#ifdef KL_HAS_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    if (why_none) *why_none = std::string("no CUDA device (") + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0 && why_none) *why_none = "no CUDA device";
  return n;
#else
  if (why_none) *why_none = "built without CUDA";
  return 0;
#endif
}

BackendChoice choose_backend(const std::string& requested) {
  if (requested != "auto" && requested != "cuda" && requested != "cpu")
    throw InputError("--backend " + requested + ": must be one of auto|cuda|cpu");
  BackendChoice c;
  if (requested == "cpu") {
    c.backend = Backend::Cpu;
    c.reason = "CPU backend (asked for)";
    return c;
  }
  std::string why;
  if (cuda_device_count(&why) > 0) {
    c.backend = Backend::Cuda;
    c.reason = "CUDA backend: " + device_info(Backend::Cuda).name;
    return c;
  }
  if (requested == "cuda") throw InputError("--backend cuda: " + why + "; use --backend cpu or auto");
  c.backend = Backend::Cpu;
  c.reason = why + ": CPU backend";
  return c;
}

DeviceInfo device_info(Backend b) {
  DeviceInfo d;
  if (b == Backend::Cpu) {
    d.name = "CPU backend (limits assumed: NVIDIA H200)";
    d.assumed = true;
    return d;
  }
#ifdef KL_HAS_CUDA
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError("cudaGetDeviceProperties failed");
  }
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.smem_per_block = int64_t(p.sharedMemPerBlock);
  d.smem_per_block_optin = int64_t(p.sharedMemPerBlockOptin);
  d.smem_per_sm = int64_t(p.sharedMemPerMultiprocessor);
  d.l2_bytes = p.l2CacheSize;
  d.global_mem_bytes = int64_t(p.totalGlobalMem);
  int mem_clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
  if (mem_clock_khz > 0 && bus_bits > 0) d.peak_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8) / 1e9;
  return d;
#else
  throw RuntimeError("built without CUDA");
#endif
}

}  // namespace kl
