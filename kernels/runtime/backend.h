// Where kernels run: the CUDA backend (a real GPU) or the CPU backend, which runs the same launch grid
// program by program. Nothing here includes a CUDA header, so every layer can ask.
#pragma once
#include <cstdint>
#include <string>

namespace kl {

enum class Backend { Cpu, Cuda };
const char* backend_name(Backend b);  // "cpu" / "cuda"

struct BackendChoice {
  Backend backend = Backend::Cpu;
  std::string reason;  // shown in the UI: "no CUDA device: CPU backend", "CUDA: NVIDIA H200"
};

// requested: "auto" | "cuda" | "cpu". Unknown names and "cuda" without a usable device throw
// InputError with the reason ("--backend cuda: ...").
BackendChoice choose_backend(const std::string& requested);

bool cuda_compiled();  // built with the CUDA backend
// Number of usable CUDA devices; 0 with *why_none set ("built without CUDA", "no CUDA device", the
// driver's message) when there is none.
int cuda_device_count(std::string* why_none = nullptr);

// What the kernels need to know of the chip: limits for refusals, ceilings for the Measure view.
struct DeviceInfo {
  std::string name;
  bool assumed = false;  // CPU backend: the H100/H200 figures below are assumed, not read
  int cc_major = 9, cc_minor = 0;
  int sm_count = 132;
  int max_threads_per_block = 1024;
  int64_t smem_per_block = 48 * 1024;              // without opt-in
  int64_t smem_per_block_optin = 227 * 1024;       // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int64_t smem_per_sm = 228 * 1024;
  int64_t regs_per_sm = 65536;                     // 32-bit registers per SM
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int64_t l2_bytes = 60ll * 1024 * 1024;
  int64_t global_mem_bytes = 141ll * 1000 * 1000 * 1000;
  double peak_bandwidth_gbs = 4800;  // from memory clock and bus width where read
};
// The current CUDA device's figures on the CUDA backend (read once per device, then cached); an H200's
// (assumed = true) on the CPU one.
DeviceInfo device_info(Backend b);

}  // namespace kl
