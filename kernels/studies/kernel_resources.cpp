#include "kernels/studies/kernel_resources.h"

#include <sstream>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"

namespace kl::study {

#ifdef KL_HAS_CUDA
// kernel_resources.cu: cudaFuncGetAttributes on the shipped build of `file`'s `kernel`.
KernelResources shipped_resources_cuda(const std::string& file, const std::string& kernel);
#endif

PtxasRecord parse_ptxas_record(std::string_view text) {
  PtxasRecord r;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# origin: ", 0) == 0) {
      r.origin = line.substr(10);
      r.from_ptxas = r.origin.rfind("ptxas", 0) == 0;
      continue;
    }
    if (line[0] == '#') continue;
    std::istringstream l(line);
    std::string name, regs, stack;
    l >> name >> regs >> stack;
    if (regs.rfind("registers=", 0) != 0 || stack.rfind("stack=", 0) != 0)
      throw RuntimeError("ptxas record: cannot read the line '" + line + "'");
    r.kernels[name] = {std::stoi(regs.substr(10)), std::stoll(stack.substr(6))};
  }
  if (r.origin.empty() || r.kernels.empty()) throw RuntimeError("ptxas record: no origin line or no kernels");
  return r;
}

const PtxasRecord& ptxas_record() {
  static const PtxasRecord r = [] {
    const std::string_view text = assets::find("ptxas/sm90.txt");
    if (text.empty()) throw RuntimeError("ptxas record: the asset ptxas/sm90.txt is missing from this build");
    return parse_ptxas_record(text);
  }();
  return r;
}

KernelResources kernel_resources(Backend b, const std::string& file, const std::string& kernel) {
#ifdef KL_HAS_CUDA
  if (b == Backend::Cuda) return shipped_resources_cuda(file, kernel);
#endif
  (void)file;
  if (b == Backend::Cuda) throw RuntimeError("built without CUDA");
  const PtxasRecord& r = ptxas_record();
  const auto it = r.kernels.find(kernel);
  if (it == r.kernels.end()) throw RuntimeError("ptxas record: no kernel " + kernel);
  KernelResources k;
  k.kernel = kernel;
  k.registers = it->second.first;
  k.stack_bytes = it->second.second;
  k.origin = r.origin;
  return k;
}

int blocks_by_registers(int regs, int threads, const DeviceInfo& info) {
  const int64_t per_warp = (int64_t(regs) * 32 + 255) / 256 * 256;
  if (per_warp == 0) return info.max_blocks_per_sm;
  const int64_t warps = info.regs_per_sm / per_warp;
  const int64_t warps_per_block = (threads + 31) / 32;
  return int(warps / warps_per_block);
}

}  // namespace kl::study
