// What the compiler gave a kernel of the editable sources (kernels/editable/sources/*.cu), for the studies'
// sentences on occupancy and local memory: registers per thread and stack frame bytes per thread. On the
// CUDA backend read from the running build (cudaFuncGetAttributes on the shipped kernel); on the CPU backend
// the figures ptxas printed for sm_90 when this program was built (the embedded asset ptxas/sm90.txt,
// recorded by cmake/ptxas_record.cmake from `nvcc -Xptxas -v`, or the checked-in
// kernels/studies/ptxas_sm90.txt where the build found no nvcc; its first line says which).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "kernels/runtime/backend.h"

namespace kl::study {

struct KernelResources {
  std::string kernel;      // "attention_smem"
  int registers = 0;       // per thread
  int64_t stack_bytes = 0; // stack frame per thread: local memory (arrays indexed at run time, spills)
  std::string origin;      // "cudaFuncGetAttributes on this device", "ptxas -v at sm_90, recorded at build time", ...
};

// A record's text parsed: "# origin: ..." then "NAME registers=R stack=S" lines. RuntimeError on anything else.
struct PtxasRecord {
  std::string origin;
  bool from_ptxas = false;  // recorded by this build's ptxas (not the checked-in fallback)
  std::map<std::string, std::pair<int, int64_t>> kernels;  // name -> (registers, stack bytes)
};
PtxasRecord parse_ptxas_record(std::string_view text);
const PtxasRecord& ptxas_record();  // the embedded ptxas/sm90.txt, parsed once

// `file` is the editable source ("attention.cu"), `kernel` its __global__ function. RuntimeError when the
// kernel is not in the record (CPU) or the shipped build (CUDA).
KernelResources kernel_resources(Backend b, const std::string& file, const std::string& kernel);

// Blocks per SM of `threads` threads using `regs` registers per thread: warps allocate registers in units of
// 256 (sm_80 and later), so a warp holds ceil(regs * 32 / 256) * 256 of the SM's register file.
int blocks_by_registers(int regs, int threads, const DeviceInfo& info);

}  // namespace kl::study
