#include "kernels/runtime/startup_trace.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

namespace kl::startup {
namespace {

double clock_ms(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

// The process's start on the monotonic clock: /proc/self/stat's starttime (clock ticks since boot, field
// 22, counted after the command name's closing parenthesis) set against CLOCK_BOOTTIME. Where that cannot
// be read, the first call stands in for it.
double origin_ms() {
  static const double origin = [] {
    const double mono = clock_ms(CLOCK_MONOTONIC), boot = clock_ms(CLOCK_BOOTTIME);
    std::ifstream f("/proc/self/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    const long ticks = sysconf(_SC_CLK_TCK);
    if (close == std::string::npos || ticks <= 0) return mono;
    std::istringstream in(stat.substr(close + 2));  // field 3 (state) onwards
    std::string field;
    for (int i = 3; i < 22 && (in >> field); ++i) {
    }
    unsigned long long start = 0;
    if (!(in >> start)) return mono;
    const double started_boot_ms = double(start) * 1e3 / double(ticks);
    const double age = boot - started_boot_ms;
    return age >= 0 && age < 86400e3 ? mono - age : mono;
  }();
  return origin;
}

std::mutex g_mutex;
double g_last = 0;  // since_start_ms() of the previous line

void line(double at, double step, const std::string& what) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "startup %10.1f ms  step %9.1f ms  %s\n", at, step, what.c_str());
  std::fflush(stderr);
  g_last = at;
}

}  // namespace

bool enabled() {
  const char* v = std::getenv("KL_TRACE_STARTUP");
  return v && std::strcmp(v, "1") == 0;
}

double since_start_ms() { return clock_ms(CLOCK_MONOTONIC) - origin_ms(); }

void mark(const std::string& what) {
  if (!enabled()) return;
  const double at = since_start_ms();
  double last;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    last = g_last;
  }
  line(at, at - last, what);
}

Step::Step(std::string what, bool active) : what_(std::move(what)) {
  if (active && enabled()) start_ = since_start_ms();
}

Step::~Step() {
  if (start_ < 0) return;
  const double at = since_start_ms();
  line(at, at - start_, what_);
}

}  // namespace kl::startup
