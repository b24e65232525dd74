// `kernel-ladder soak`: thousands of headless frames over every panel and parameter extreme, then the
// figures that say whether anything leaked or failed (app/soak.h).
#include "app/soak.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli/common.h"  // make_shell, headless
#include "app/shell.h"
#include "app/ui.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "viz/gl_check.h"
#include "viz/render_host.h"

namespace kl::app {
namespace {

enum Which { kDefault = 0, kMin = 1, kMax = 2 };

int64_t cap_int(int64_t v, int64_t lo, bool cpu) { return cpu && v > kCpuSoakCap ? std::max(lo, kCpuSoakCap) : v; }

int64_t cap_pow2(int64_t v, int64_t lo, bool cpu) {
  if (!cpu || v <= kCpuSoakCap) return v;
  int64_t p = 1;
  while (p * 2 <= kCpuSoakCap) p *= 2;
  return std::max(lo, p);
}

std::string float_text(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// The value of one parameter at a stop.
std::string value_of(const ParamSpec& sp, Which which, bool cpu) {
  switch (sp.kind) {
    case ParamSpec::Kind::Int:
      if (which == kMin) return std::to_string(int64_t(sp.min));
      if (which == kMax) return std::to_string(cap_int(int64_t(sp.max), int64_t(sp.min), cpu));
      return std::to_string(cap_int(std::stoll(sp.def), int64_t(sp.min), cpu));
    case ParamSpec::Kind::Pow2:
      if (which == kMin) return std::to_string(int64_t(sp.min));
      if (which == kMax) return std::to_string(cap_pow2(int64_t(sp.max), int64_t(sp.min), cpu));
      return std::to_string(cap_pow2(std::stoll(sp.def), int64_t(sp.min), cpu));
    case ParamSpec::Kind::Float:
      if (which == kMin) return float_text(sp.min);
      // [lo, hi): the largest value a user can type that is still inside.
      if (which == kMax) return float_text(sp.max_exclusive ? sp.max - (sp.max - sp.min) * 1e-6 : sp.max);
      return sp.def;
    case ParamSpec::Kind::Bool:
      return which == kMin ? "0" : which == kMax ? "1" : sp.def;
    case ParamSpec::Kind::Choice:
      if (sp.choices.empty()) return sp.def;
      if (which == kMin) return sp.choices.front();
      if (which == kMax) return sp.choices.back();
      return sp.def;
  }
  return sp.def;
}

// Stop j: panel j % P at round (j / P) % kRounds: the defaults (0), every parameter at its minimum (1),
// at its maximum (2), then alternating (3: the 1st, 3rd, ... parameter at its minimum, the others at
// their maximum; 4: the reverse, e.g. the most elements with the smallest blocks). The cycle of
// P * kRounds stops repeats, so after the first pass every allocation the run makes has been made once:
// growth after it is a leak, not a new high-water mark. Returns "key=value, ..." for the report.
constexpr long kRounds = 5;

std::string apply_stop(Shell& s, long j, bool cpu, long* refused) {
  const size_t P = s.panels.size();
  s.current = size_t(j % long(P));
  const long round = (j / long(P)) % kRounds;
  ParamValues& p = s.panels[s.current]->params();
  std::string text;
  int k = 0;
  for (const ParamSpec& sp : p.specs()) {
    const bool even = k++ % 2 == 0;
    const Which w = round == 0 ? kDefault : round == 1 ? kMin : round == 2 ? kMax : (even == (round == 3)) ? kMin : kMax;
    const std::string v = value_of(sp, w, cpu);
    try {
      p.set(sp.name, v);
    } catch (const InputError&) {
      ++*refused;  // a value the spec itself refuses: the soak's own mistake, reported
    }
    text += (text.empty() ? "" : ", ") + sp.name + "=" + v;
  }
  return text;
}

double mib(double bytes) { return bytes / double(1 << 20); }

// What the frames measured: memory early, after the first cycle of settings and in tenths, the slowest frame.
struct Samples {
  long early = 0, baseline = 0, stops = 0, refused = 0;
  uint64_t rss_early = 0, dev_early = 0, rss0 = 0, dev0 = 0;
  bool dev_known = false;
  std::vector<double> tenths;  // host RSS in MiB after each tenth of the run
  double slowest_ms = 0, secs = 0;
  std::string slowest;
};

// Draws o.frames frames of the shell on `host`, new settings every o.every frames (apply_stop).
Samples run_frames(const SoakOptions& o, Shell& s, viz::RenderHost& host, bool cpu, long cycle) {
  Samples m;
  // Memory is reported after `early` frames, and compared with what it was after the first full cycle.
  m.early = std::min(o.early, o.frames);
  m.baseline = std::min(cycle * o.every, o.frames);
  const auto t0 = std::chrono::steady_clock::now();
  std::string stop_text;
  for (long f = 0; f < o.frames; ++f) {
    if (f % o.every == 0) {
      const std::string settings = apply_stop(s, m.stops++, cpu, &m.refused);
      stop_text = s.panels[s.current]->id() + ": " + settings;
    }
    const auto a = std::chrono::steady_clock::now();
    if (!host.begin_frame()) throw RuntimeError("headless host stopped at frame " + std::to_string(f));
    draw_shell(s, float(host.width()), float(host.height()));
    host.end_frame();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    if (ms > m.slowest_ms) m.slowest_ms = ms, m.slowest = stop_text;
    if ((f + 1) % std::max(1L, o.frames / 10) == 0 && m.tenths.size() < 10)
      m.tenths.push_back(mib(double(mem::host_rss_bytes())));
    if (f + 1 == m.early) {
      m.rss_early = mem::host_rss_bytes();
      uint64_t fr = 0, t = 0;
      if (!cpu && mem::device_memory(&fr, &t)) m.dev_early = t - fr;
    }
    if (f + 1 == m.baseline) {
      m.rss0 = mem::host_rss_bytes();
      uint64_t fr = 0, t = 0;
      m.dev_known = !cpu && mem::device_memory(&fr, &t);
      m.dev0 = t - fr;
    }
  }
  m.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

// The device's lines of the report (memory growth since the first cycle, the CUDA error state); failures into
// `failed`.
void report_device(const Samples& m, double bound, std::vector<std::string>& failed) {
  uint64_t f1 = 0, t1 = 0;
  const bool known1 = mem::device_memory(&f1, &t1);
  if (m.dev_known && known1) {
    const uint64_t dev1 = t1 - f1;
    const double dev_growth = mib(double(dev1) - double(m.dev0));
    std::printf("soak: device memory in use after %ld frames %.1f MiB, after the first cycle (%ld frames) %.1f MiB, at "
                "the end %.1f MiB (%+.1f MiB since the cycle; bound +%.0f MiB)\n",
                m.early, mib(double(m.dev_early)), m.baseline, mib(double(m.dev0)), mib(double(dev1)), dev_growth, bound);
    if (dev_growth > bound) failed.push_back("device memory grew by " + std::to_string(dev_growth) + " MiB");
  } else {
    std::printf("soak: device memory: cudaMemGetInfo failed\n");
    failed.push_back("cudaMemGetInfo failed");
  }
  try {
    mem::synchronize(Backend::Cuda);  // any asynchronous or sticky error surfaces here
    std::printf("soak: CUDA error state: none (cudaDeviceSynchronize succeeds)\n");
  } catch (const std::exception& e) {
    std::printf("soak: CUDA error state: %s\n", e.what());
    failed.push_back("CUDA error");
  }
}

// The report after the frames; 0 when nothing failed (PASS), else 1.
int report(const SoakOptions& o, const Shell& s, const Samples& m, bool cpu, long failures_before) {
  std::vector<std::string> failed;
  const uint64_t rss1 = mem::host_rss_bytes();
  const double bound = o.max_growth_mib;
  const double host_growth = mib(double(rss1) - double(m.rss0));
  std::printf("soak: %ld frames, %ld settings over %zu panels in %.1f s (%.2f ms/frame; slowest frame %.0f ms, %s)\n",
              o.frames, m.stops, s.panels.size(), m.secs, 1000.0 * m.secs / double(o.frames), m.slowest_ms,
              m.slowest.c_str());
  std::printf("soak: host RSS after %ld frames %.1f MiB, after the first cycle (%ld frames) %.1f MiB, at the end %.1f MiB "
              "(%+.1f MiB since the cycle; bound +%.0f MiB)\n",
              m.early, mib(double(m.rss_early)), m.baseline, mib(double(m.rss0)), mib(double(rss1)), host_growth, bound);
  std::string trend;
  for (double t : m.tenths) trend += (trend.empty() ? "" : " ") + std::to_string(long(t + 0.5));
  std::printf("soak: host RSS after each tenth of the run (MiB): %s\n", trend.c_str());
  if (m.rss0 == 0 || rss1 == 0) failed.push_back("host RSS unreadable (/proc/self/status)");
  else if (host_growth > bound) failed.push_back("host memory grew by " + std::to_string(host_growth) + " MiB");
  if (cpu) {
    std::printf("soak: device memory: not used (CPU backend)\n");
    std::printf("soak: CUDA error state: not used (CPU backend)\n");
  } else {
    report_device(m, bound, failed);
  }
  const int gl_errors = viz::gl_error_count();
  std::printf("soak: GL errors: %d%s%s\n", gl_errors, gl_errors ? ", first: " : "",
              gl_errors ? viz::gl_first_error().c_str() : "");
  if (gl_errors) failed.push_back("GL errors");
  const long shown = ui::failures_shown() - failures_before + s.failures;
  std::printf("soak: failures shown by panels: %ld (refusals of out-of-range settings are not failures)\n", shown);
  if (shown) {
    std::printf("soak: first failure shown: %s\n", ui::first_failure_shown().c_str());
    failed.push_back("panels showed failures");
  }
  if (m.refused) {
    std::printf("soak: %ld settings refused by their own specs (a soak bug)\n", m.refused);
    failed.push_back("settings refused");
  }
  if (failed.empty()) {
    std::printf("soak: PASS\n");
    return 0;
  }
  std::string why;
  for (const std::string& f : failed) why += (why.empty() ? "" : "; ") + f;
  std::printf("soak: FAIL: %s\n", why.c_str());
  return 1;
}

}  // namespace

int soak_command(const SoakOptions& o) {
  if (o.frames < 1) throw InputError(out_of_range_message("--frames", std::to_string(o.frames), "[1, 10^9]"));
  if (o.every < 1) throw InputError(out_of_range_message("--every", std::to_string(o.every), "[1, 10^6]"));
  Shell s = cli::make_shell(o.backend);
  s.ctx.headless = true;
  const bool cpu = s.ctx.backend.backend == Backend::Cpu;

  auto host = cli::headless(cli::Size{o.width, o.height});
  struct PanelsFirst {  // panels own GL objects: released before the host's context goes
    Shell& s;
    ~PanelsFirst() { s.panels.clear(); }
  } panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  const long cycle = long(s.panels.size()) * kRounds;
  std::printf("soak: %ld frames at %dx%d, new settings every %d frames, a cycle of %ld settings (%ld frames); %s; "
              "%s, GL_RENDERER %s\n",
              o.frames, o.width, o.height, o.every, cycle, cycle * o.every, s.ctx.backend.reason.c_str(),
              s.host_kind.c_str(), s.gl_renderer.c_str());
  if (cpu)
    std::printf("soak: CPU backend: integer parameters capped at %" PRId64 " (the CUDA backend takes every range whole)\n",
                kCpuSoakCap);
  std::fflush(stdout);
  const long failures_before = ui::failures_shown();
  const Samples m = run_frames(o, s, *host, cpu, cycle);
  return report(o, s, m, cpu, failures_before);
}

}  // namespace kl::app
