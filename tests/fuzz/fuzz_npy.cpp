// libFuzzer target: the .npy reader. Any input must give an Array or one InputError, never a crash,
// and never an allocation of a declared size the bytes do not hold.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kl::Array a = kl::npy::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    if (size_t(a.size()) != a.data.size()) __builtin_trap();
    // What we parse, we must be able to write and read back identically.
    kl::Array b = kl::npy::parse(kl::npy::serialize(a), "roundtrip");
    if (b.shape != a.shape || b.data.size() != a.data.size()) __builtin_trap();
  } catch (const kl::InputError&) {
  }
  return 0;
}
