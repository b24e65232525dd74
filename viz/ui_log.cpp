#include "viz/ui_log.h"

#include <cstdio>

namespace kl::viz::ui_log {
namespace {
std::FILE* g_file = nullptr;
}

bool open(const std::string& path) {
  close();
  g_file = std::fopen(path.c_str(), "a");
  return g_file != nullptr;
}

void close() {
  if (g_file) std::fclose(g_file);
  g_file = nullptr;
}

bool is_open() { return g_file != nullptr; }

void event(const std::string& line) {
  if (!g_file) return;
  std::fprintf(g_file, "%s\n", line.c_str());
  std::fflush(g_file);
}

}  // namespace kl::viz::ui_log
