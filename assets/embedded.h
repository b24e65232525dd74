// Files embedded into the binary at build time (cmake/embed.cmake): fonts, shaders, panel texts and
// the kernels' own source, so the program reads no data path at run time.
#pragma once
#include <string_view>
#include <vector>

namespace kl::assets {
// The bytes of an embedded file ("font/sans", "font/mono", "shaders/NAME", "text/NAME",
// "source/NAME"), followed by a terminating zero byte; empty if there is no such file.
std::string_view find(std::string_view name);
std::vector<std::string_view> names();
}  // namespace kl::assets
