// kernel_resources on the CUDA backend: what this build's nvcc gave the shipped kernel, from the runtime.
#include "kernels/editable/shipped_table.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/studies/kernel_resources.h"

namespace kl::study {

KernelResources shipped_resources_cuda(const std::string& file, const std::string& kernel) {
  for (const editable::shipped::Source* s = editable::shipped::sources(); s->rung; ++s) {
    if (file != s->file || !s->cuda) continue;
    for (const editable::shipped::CudaKernel* k = s->cuda->kernels; k->name; ++k) {
      if (kernel != k->name) continue;
      cudaFuncAttributes a{};
      KL_CUDA_CHECK(cudaFuncGetAttributes(&a, k->func));
      KernelResources r;
      r.kernel = kernel;
      r.registers = a.numRegs;
      r.stack_bytes = int64_t(a.localSizeBytes);
      r.origin = "cudaFuncGetAttributes on this device";
      return r;
    }
  }
  throw RuntimeError("shipped " + file + " has no CUDA kernel " + kernel);
}

}  // namespace kl::study
