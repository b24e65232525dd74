#include "kernels/runtime/registry.h"

#include "kernels/rungs/attention.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/rungs/softmax.h"
#include "kernels/rungs/transpose.h"
#include "kernels/rungs/vector_add.h"

namespace kl {

const std::vector<KernelEntry>& kernel_registry() {
  static const std::vector<KernelEntry> entries = {
      vector_add::entry(),
      transpose::entry(),  // rung 1½, between vector add and dropout
      relu_dropout::entry(),
      softmax::entry(),
      attention::entry(),
      flash_attention::entry(),
      flash_attention_backward::entry(),
  };
  return entries;
}

bool KernelEntry::untraced(const std::string& variant) const {
  for (const std::string& v : untraced_variants)
    if (v == variant) return true;
  return false;
}

const KernelEntry* find_kernel(const std::string& name) {
  for (const KernelEntry& e : kernel_registry())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace kl
