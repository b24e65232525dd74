// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0), float32 little-endian,
// C order. Everything in the header is validated before anything of the declared size is allocated:
// malformed headers, another dtype, Fortran order, shapes whose product overflows, declared sizes
// larger than the file, each become an InputError naming the file and the problem.
#pragma once
#include <string>

#include "kernels/runtime/array.h"

namespace kl::npy {

Array read(const std::string& path);
// Parses an in-memory .npy image; `what` names it in error messages.
Array parse(const std::string& bytes, const std::string& what);
void write(const std::string& path, const Array& a);
std::string serialize(const Array& a);

}  // namespace kl::npy
