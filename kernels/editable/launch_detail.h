// Internal to kernels/editable: argument packing, the signature check, fault read-back, the CPU and CUDA
// runs of one entry.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#define KL_CPU_ABI_ONLY
#include "kernels/editable/kl_cpu.h"
#undef KL_CPU_ABI_ONLY

namespace kl::editable {
namespace shipped {
struct CudaModule;
}
namespace detail {

constexpr size_t kMaxDynamicShared = 227 * 1024;  // kl_cpu::kDynamicShared; an H100/H200's opt-in limit

// kl::Tensor<T>'s layout (kl.cuh) and kl::detail::FaultRecord's.
struct TensorAbi {
  void* data;
  int64_t size;
  int32_t* writer;
  uint32_t* count;
  uint64_t* access;
  int32_t id;
};
static_assert(sizeof(TensorAbi) == 48, "kl::Tensor<T> is 48 bytes");
struct FaultRecord {
  int32_t kind, tensor;
  int64_t program, lane, index, size;
};
static_assert(sizeof(FaultRecord) == 40, "kl::detail::FaultRecord is 40 bytes");
struct Signature {  // kl::detail::Signature
  char text[64];
};

// The launch's arguments as the kernel takes them; ptrs[i] points at argument i.
struct Packed {
  std::vector<TensorAbi> tensors;
  std::vector<int64_t> scalars;
  std::vector<void*> ptrs;
};
Packed pack(const Launch& l);

char code_of(const Arg& a);
std::string type_of_code(char c);
std::string signature_text(const Launch& l);  // "vector_add(kl::Tensor<float> x, ..., int BLOCK_SIZE)"
// "" when the kernel's parameter codes match the launch's arguments; else the mismatch in words.
std::string check_params(const std::string& have, const Launch& l);
void check_shape(const Launch& l);  // InputError naming the kernel and the limit

Fault fault_from(const FaultRecord& r, const Launch& l);
// The CPU threads a shipped launch may spread its blocks over: KL_CPU_THREADS (an integer in [1, 256]; else
// InputError naming it), unset: the CPUs this process may run on, at most 8 (each thread of a launch whose
// blocks use barriers or shuffles holds a stack per GPU thread of the block).
int cpu_threads();
// Runs a CPU entry (threads: as kl_cpu::Launch::threads; 1 for a run-time build, whose entries run in order).
Fault run_cpu_entry(kl_cpu::EntryFn entry, const Launch& l, void** args, int threads = 1);
#ifdef KL_HAS_CUDA
Fault run_shipped_cuda(const shipped::CudaModule& m, const char* file, const Launch& l, void** args);
#endif

}  // namespace detail
}  // namespace kl::editable
