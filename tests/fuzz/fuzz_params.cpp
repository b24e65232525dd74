// libFuzzer target: the --set key=value parser. Any string is applied or refused with one InputError;
// a refused value never changes the stored one.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kl::ParamValues p({kl::pow2_param("block_size", 32, 4096, 1024, ""), kl::int_param("n", 1, 1 << 26, 1000, ""),
                     kl::float_param("p", 0.0, 1.0, 0.5, "", true), kl::bool_param("causal", false, ""),
                     kl::choice_param("variant", {"buggy", "fixed", "online"}, "fixed", "")});
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string before = p.get_text("n") + "|" + p.get_text("p") + "|" + p.get_text("block_size");
  try {
    p.set(text);
    const int64_t b = p.get_int("block_size");
    if (b < 32 || b > 4096 || (b & (b - 1))) __builtin_trap();
    const double q = p.get_float("p");
    if (!(q >= 0.0 && q < 1.0)) __builtin_trap();
  } catch (const kl::InputError&) {
    const std::string after = p.get_text("n") + "|" + p.get_text("p") + "|" + p.get_text("block_size");
    if (after != before) __builtin_trap();
  }
  return 0;
}
