#include "kernels/registry.h"

#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "kernels/relu_dropout.h"
#include "kernels/softmax.h"
#include "kernels/vector_add.h"

namespace kl {

const std::vector<KernelEntry>& kernel_registry() {
  static const std::vector<KernelEntry> entries = {
      vector_add::entry(),
      relu_dropout::entry(),
      softmax::entry(),
      attention::entry(),
      flash_attention::entry(),
  };
  return entries;
}

const KernelEntry* find_kernel(const std::string& name) {
  for (const KernelEntry& e : kernel_registry())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace kl
