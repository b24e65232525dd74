#include "kernels/runtime/errors.h"

namespace kl {
std::string out_of_range_message(const std::string& name, const std::string& value,
                                 const std::string& allowed) {
  return name + "=" + value + " is out of range: allowed " + allowed;
}
}  // namespace kl
