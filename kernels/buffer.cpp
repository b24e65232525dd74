#include "kernels/buffer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kernels/errors.h"

#ifdef KL_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace kl::mem {

std::string bytes_text(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1ull << 20));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)bytes);
  return buf;
}

#ifdef KL_HAS_CUDA
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError(std::string(what) + " failed: " + cudaGetErrorString(e));
  }
}
}  // namespace
#endif

void* alloc(Backend b, size_t bytes) {
  if (b == Backend::Cpu) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw InputError("cannot allocate " + bytes_text(bytes) + " of host memory");
    return p;
  }
#ifdef KL_HAS_CUDA
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw InputError("cannot allocate " + bytes_text(bytes) + " on the GPU: " + bytes_text(free_b) +
                     " free of " + bytes_text(total_b) + " (" + cudaGetErrorString(e) + ")");
  }
  return p;
#else
  (void)bytes;
  throw RuntimeError("built without CUDA");
#endif
}

void free(Backend b, void* p) {
  if (b == Backend::Cpu) return std::free(p);
#ifdef KL_HAS_CUDA
  cudaFree(p);  // never throws from a destructor; errors surface at the next checked call
#endif
}

void set(Backend b, void* p, int byte, size_t bytes) {
  if (b == Backend::Cpu) {
    std::memset(p, byte, bytes);
    return;
  }
#ifdef KL_HAS_CUDA
  check(cudaMemset(p, byte, bytes), "cudaMemset");
#endif
}

void to_backend(Backend b, void* dst, const void* src, size_t bytes) {
  if (b == Backend::Cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef KL_HAS_CUDA
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
#endif
}

void to_host(Backend b, void* dst, const void* src, size_t bytes) {
  if (b == Backend::Cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef KL_HAS_CUDA
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
#endif
}

void synchronize(Backend b) {
  if (b == Backend::Cpu) return;
#ifdef KL_HAS_CUDA
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
}

}  // namespace kl::mem
