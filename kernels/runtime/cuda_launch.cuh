// The one way a kernel is launched and a CUDA call is made in this project (included by .cu files only).
//   KL_CUDA_CHECK(expr)  throws kl::RuntimeError naming the expression, file, line and CUDA's message.
//   kl::cuda::launch(...) checks the launch shape against the device's limits (an InputError that
//                         names the limit), raises the dynamic shared-memory limit when a kernel asks
//                         for more than 48 KiB, launches, and checks the launch; with KL_SYNC_LAUNCHES=1
//                         in the environment it also synchronises so asynchronous faults name their kernel;
//                         KL_INJECT_FAULT=launch:N makes the Nth launch fail (kernels/runtime/fault.h).
//   kl::cuda::launch_packed(...) the same for a kernel known by address with packed arguments (editable
//                         kernels); check_shape/check_shared are the checks both share, and the driver-API
//                         launch of an edited kernel (kernels/editable/cuda_run.cu) uses them too.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/fault.h"

namespace kl::cuda {

inline void check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear non-sticky errors so the app can carry on
  throw RuntimeError(std::string("CUDA error: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) +
                     ") in " + expr + " at " + file + ":" + std::to_string(line));
}

#define KL_CUDA_CHECK(expr) ::kl::cuda::check((expr), #expr, __FILE__, __LINE__)

inline bool sync_launches() {
  static const bool on = [] {
    const char* v = std::getenv("KL_SYNC_LAUNCHES");
    return v && v[0] == '1';
  }();
  return on;
}

// The launch shape against the device's limits: an InputError that names the kernel and the limit.
inline void check_shape(const char* name, dim3 grid, dim3 block) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024)
    throw InputError(std::string(name) + ": " + std::to_string(threads) +
                     " threads per block is out of range: allowed [1, 1024]");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
      uint64_t(grid.x) > 2147483647ull)
    throw InputError(std::string(name) + ": grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) +
                     ", " + std::to_string(grid.z) + ") is out of range: x in [1, 2^31-1], y and z in [1, 65535]");
}

// The device's opt-in shared memory per block, checked against `smem_bytes` (an InputError past it).
inline void check_shared(const char* name, size_t smem_bytes) {
  int dev = 0, optin = 0;
  KL_CUDA_CHECK(cudaGetDevice(&dev));
  KL_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (smem_bytes > size_t(optin))
    throw InputError(std::string(name) + ": needs " + std::to_string(smem_bytes) +
                     " bytes of shared memory per block; this device allows " + std::to_string(optin));
}

inline void check_launched(const char* name, cudaStream_t stream) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    check(e, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
  if (sync_launches()) check(cudaStreamSynchronize(stream), name, __FILE__, __LINE__);
}

template <class... KernelArgs, class... Args>
void launch(const char* name, void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes,
            cudaStream_t stream, Args&&... args) {
  fault::at_launch(name);
  check_shape(name, grid, block);
  if (smem_bytes > 48 * 1024) {
    check_shared(name, smem_bytes);
    KL_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes)));
  }
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  check_launched(name, stream);
}

// The same for a kernel known by its address, its arguments packed (args[i] points at parameter i), as
// editable kernels are launched (kernels/editable/cuda_run.cu).
inline void launch_packed(const char* name, const void* kernel, dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, void** args) {
  fault::at_launch(name);
  check_shape(name, grid, block);
  if (smem_bytes > 48 * 1024) {
    check_shared(name, smem_bytes);
    KL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes)));
  }
  KL_CUDA_CHECK(cudaLaunchKernel(kernel, grid, block, args, smem_bytes, stream));
  check_launched(name, stream);
}

}  // namespace kl::cuda
