#include "kernels/runtime/backend.h"

#include <atomic>
#include <map>
#include <mutex>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/startup_trace.h"

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
  // The process's first CUDA call loads the driver (libcuda.so.1) and initialises it (cuInit).
  static std::atomic<bool> first{true};
  startup::Step step("CUDA driver loaded and initialised (cudaGetDeviceCount)", first.exchange(false));
  cudaError_t e = cudaGetDeviceCount(&n);
  step.set("CUDA driver loaded and initialised (cudaGetDeviceCount): " +
           (e == cudaSuccess ? std::to_string(n) + (n == 1 ? " device" : " devices") : std::string(cudaGetErrorString(e))));
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
#ifdef KL_HAS_CUDA
    if (startup::enabled()) {  // traced on its own: it is created anyway, by the first call that needs it
      startup::Step step("CUDA context created (cudaFree(nullptr))");
      const cudaError_t e = cudaFree(nullptr);
      if (e != cudaSuccess) {  // said here; the first call that needs the context fails and says it too
        step.set(std::string("CUDA context creation (cudaFree(nullptr)) failed: ") + cudaGetErrorString(e));
        cudaGetLastError();
      }
    }
#endif
    return c;
  }
  if (requested == "cuda") throw InputError("--backend cuda: " + why + "; use --backend cpu or auto");
  c.backend = Backend::Cpu;
  c.reason = why + ": CPU backend";
  return c;
}

#ifdef KL_HAS_CUDA
namespace {
DeviceInfo read_device(int dev) {
  DeviceInfo d;
  cudaDeviceProp p{};
  startup::Step step("device query (cudaGetDeviceProperties)");
  if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError("cudaGetDeviceProperties failed");
  }
  d.name = p.name;
  step.set("device query (cudaGetDeviceProperties): " + d.name);
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.smem_per_block = int64_t(p.sharedMemPerBlock);
  d.smem_per_block_optin = int64_t(p.sharedMemPerBlockOptin);
  d.smem_per_sm = int64_t(p.sharedMemPerMultiprocessor);
  d.regs_per_sm = int64_t(p.regsPerMultiprocessor);
  d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
  d.l2_bytes = p.l2CacheSize;
  d.global_mem_bytes = int64_t(p.totalGlobalMem);
  int mem_clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
  if (mem_clock_khz > 0 && bus_bits > 0) d.peak_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8) / 1e9;
  return d;
}
}  // namespace
#endif

DeviceInfo device_info(Backend b) {
  if (b == Backend::Cpu) {
    DeviceInfo d;
    d.name = "CPU backend (limits assumed: NVIDIA H200)";
    d.assumed = true;
    return d;
  }
#ifdef KL_HAS_CUDA
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError("cudaGetDeviceProperties failed");
  }
  // Read once per device: panels ask every frame, and cudaGetDeviceProperties is slow.
  static std::mutex mutex;  // the Measure worker thread asks too
  static std::map<int, DeviceInfo> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(dev);
  if (it == cache.end()) it = cache.emplace(dev, read_device(dev)).first;
  return it->second;
#else
  throw RuntimeError("built without CUDA");
#endif
}

}  // namespace kl
