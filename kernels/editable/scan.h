// What the build needs to know of an editable source before compiling it, read from its text: its
// __global__ functions, its `extern __shared__` arrays (the CPU build defines them), whether it uses
// barriers or warp shuffles (the CPU build then runs a block's threads as fibers) or atomics (the shipped
// CPU build spreads the blocks of a source without them over several threads), and the constructs the
// CPU prelude does not run. Shared by the run-time compile and the build-time generator, so the shipped
// build and an edited one are wrapped the same way. Depends on nothing else in the project.
#pragma once
#include <string>
#include <vector>

namespace kl::editable::scan {

struct Kernel {
  std::string name;
  int line = 0;
};
struct ExternShared {
  std::string align;  // "alignas(16) " or ""
  std::string type;   // "float"
  std::string name;   // "smem"
};
struct Unsupported {
  int line = 0, col = 0;
  std::string message;  // "inline asm is not supported by the CPU prelude"
};

struct Result {
  std::vector<Kernel> kernels;
  std::vector<ExternShared> extern_shared;
  bool fibers = false;
  bool atomics = false;  // it uses atomics (atomicAdd, ..., Tensor::atomic_add): its blocks may share data
  std::vector<Unsupported> unsupported;  // CPU only
};

Result scan(const std::string& text);

// The translation unit the host compiler builds for the CPU backend: the prelude's definitions of the
// source's `extern __shared__` arrays and one entry per kernel. `include` is how it includes the source;
// `ns` wraps the source in a namespace (the shipped build, many sources in one binary) or is empty
// (a run-time build, one source per shared object, entries exported as extern "C" kl_entry_NAME and
// kl_params_NAME). The shipped build's entries of a source without atomics may run blocks on several
// threads (kl_cpu::launch); a run-time build's run in order, so an edited kernel's races replay the same way
// every time.
std::string cpu_wrapper(const Result& r, const std::string& include, const std::string& ns,
                        const std::string& table_name);
// The CUDA translation unit of the shipped build (nvcc): the source in `ns`, its kernels' table and the
// fault record's reset and read-back.
std::string cuda_wrapper(const Result& r, const std::string& include, const std::string& ns,
                         const std::string& table_name);
// The source NVRTC compiles: the source followed by each kernel's signature as a device constant
// (extern "C" kl_params_NAME) the host reads back.
std::string nvrtc_suffix(const Result& r);

}  // namespace kl::editable::scan
