#include "kernels/runtime/fault.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "kernels/runtime/errors.h"

namespace kl::fault {

namespace detail {
std::atomic<bool> g_armed{false};
}  // namespace detail

namespace {

std::atomic<long> g_target{0};  // the launch that fails, counted from 1
std::atomic<long> g_count{0};
std::mutex g_spec_mutex;
std::string g_spec;  // as given, for the message

long parse(const std::string& spec) {
  const std::string prefix = "launch:";
  if (spec.compare(0, prefix.size(), prefix) != 0 || spec.size() == prefix.size() || spec.size() > prefix.size() + 12)
    throw InputError("KL_INJECT_FAULT=" + spec + ": expected launch:N with N >= 1");
  long n = 0;
  for (size_t i = prefix.size(); i < spec.size(); ++i) {
    if (spec[i] < '0' || spec[i] > '9') throw InputError("KL_INJECT_FAULT=" + spec + ": expected launch:N with N >= 1");
    n = n * 10 + (spec[i] - '0');
  }
  if (n < 1) throw InputError("KL_INJECT_FAULT=" + spec + ": expected launch:N with N >= 1");
  return n;
}

// Read once, before main: a malformed value is reported and ignored (nothing to throw to yet).
[[maybe_unused]] const bool g_from_env = [] {
  const char* v = std::getenv("KL_INJECT_FAULT");
  if (!v || !*v) return false;
  try {
    arm(v);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel-ladder: %s; no fault injected\n", e.what());
    return false;
  }
}();

}  // namespace

void arm(const std::string& spec) {
  if (spec.empty()) {
    detail::g_armed.store(false);
    g_count.store(0);
    return;
  }
  const long n = parse(spec);
  {
    std::lock_guard<std::mutex> lock(g_spec_mutex);
    g_spec = spec;
  }
  g_target.store(n);
  g_count.store(0);
  detail::g_armed.store(true);
}

long launches_counted() { return detail::g_armed.load() ? g_count.load() : 0; }

void detail::count_launch(const char* name) {
  const long k = g_count.fetch_add(1) + 1;
  if (k != g_target.load()) return;
  std::string spec;
  {
    std::lock_guard<std::mutex> lock(g_spec_mutex);
    spec = g_spec;
  }
  // The wording of a failed launch checked by kl::cuda::launch, so the UI path is the real one.
  throw RuntimeError("CUDA error: unspecified launch failure (injected by KL_INJECT_FAULT=" + spec + ", launch " +
                     std::to_string(k) + ") in launch of " + name);
}

}  // namespace kl::fault
