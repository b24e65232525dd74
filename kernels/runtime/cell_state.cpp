#include "kernels/runtime/cell_state.h"

#include <cctype>

namespace kl {

std::string cell_state_glsl_defines() {
  std::string s;
  auto add = [&s](const char* name, int value) {
    std::string upper = "CELL_";
    for (const char* p = name; *p; ++p) {
      if (std::isupper(static_cast<unsigned char>(*p)) && p != name) upper += '_';
      upper += char(std::toupper(static_cast<unsigned char>(*p)));
    }
    s += "#define " + upper + " " + std::to_string(value) + "\n";
  };
#define KL_CELL_DEFINE(name, value, what) add(#name, value);
  KL_CELL_STATES(KL_CELL_DEFINE)
#undef KL_CELL_DEFINE
  return s;
}

}  // namespace kl
