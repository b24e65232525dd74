// The CUDA half of kernels/bench: a one-thread kernel that keeps the GPU busy for a set time. bench::time
// enqueues it before its timed loop, so the host's launches queue up behind it and the host's own
// overhead (event records, launch calls, Python's in the torch peer scripts) never falls inside a timed
// interval: each interval holds the GPU's time for the op and nothing else.
#include <cstdint>

#include "kernels/measure/bench.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::bench::detail {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void bench_spin(uint64_t ns) {
  const uint64_t t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

void enqueue_spin(double ms) {
  if (!(ms > 0.0 && ms <= 1000.0))
    throw InputError("bench spin: ms=" + std::to_string(ms) + " is out of range: allowed (0, 1000]");
  cuda::launch("bench_spin", bench_spin, dim3(1), dim3(1), 0, 0, uint64_t(ms * 1e6));
}

}  // namespace kl::bench::detail
