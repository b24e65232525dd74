// The shipped build of the editable sources, as the generated files (kernels/editable/gen/) list it:
// per source its __global__ functions' CPU entries and, with CUDA, their device functions. Internal to
// kernels/editable.
#pragma once
#include <cstdint>

#define KL_CPU_ABI_ONLY
#include "kernels/editable/kl_cpu.h"
#undef KL_CPU_ABI_ONLY

namespace kl::editable::shipped {

struct CpuKernel {
  const char* name;      // the __global__ function's name; nullptr ends the list
  kl_cpu::EntryFn entry;
  const char* params;    // kl::detail::SignatureOf's text
};

struct CudaKernel {
  const char* name;  // nullptr ends the list
  const void* func;  // the nvcc-compiled kernel, for cudaLaunchKernel
  const char* params;
};
struct CudaModule {
  const CudaKernel* kernels;
  void (*reset_fault)();           // zeroes the module's fault record
  void (*read_fault)(void* out);   // copies it (kl::detail::FaultRecord's 40 bytes) to the host
};

struct Source {
  const char* rung;          // "vector-add"
  const char* file;          // "vector_add.cu"
  const char* asset;         // the embedded text's name ("editable/vector_add.cu")
  const CpuKernel* cpu;
  const CudaModule* cuda;    // nullptr without CUDA
};

const Source* sources();     // ends with rung == nullptr (generated: shipped_index.cpp)

}  // namespace kl::editable::shipped
