// The shipped CUDA build of an editable source, launched through the one checked launch path, its fault
// record reset before and read back after.
#include "kernels/editable/launch_detail.h"
#include "kernels/editable/shipped_table.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::editable::detail {

Fault run_shipped_cuda(const shipped::CudaModule& m, const char* file, const Launch& l, void** args) {
  const shipped::CudaKernel* k = m.kernels;
  for (; k->name; ++k)
    if (l.kernel == k->name) break;
  if (!k->name) throw RuntimeError("shipped " + std::string(file) + " has no kernel " + l.kernel);
  if (std::string e = check_params(k->params, l); !e.empty()) throw RuntimeError("shipped " + std::string(file) + ": " + e);
  m.reset_fault();
  cuda::launch_packed(l.kernel.c_str(), k->func, dim3(l.grid.x, l.grid.y, l.grid.z),
                      dim3(l.block.x, l.block.y, l.block.z), l.shared_bytes, 0, args);
  KL_CUDA_CHECK(cudaStreamSynchronize(0));
  FaultRecord r{};
  m.read_fault(&r);
  return fault_from(r, l);
}

}  // namespace kl::editable::detail
