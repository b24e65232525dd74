#include "viz/ui_log.h"

#include <cstdio>
#include <map>

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

void place(const std::string& kind, const std::string& name, float x0, float y0, float x1, float y1) {
  if (!g_file) return;
  static std::map<std::string, std::string> last;
  char b[96];
  std::snprintf(b, sizeof b, " %.0f %.0f %.0f %.0f", x0, y0, x1, y1);
  const std::string key = kind + " " + name;
  if (last[key] == b) return;
  last[key] = b;
  event("place " + key + b);
}

}  // namespace kl::viz::ui_log
