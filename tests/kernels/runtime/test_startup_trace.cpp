// kernels/runtime/startup_trace.*: KL_TRACE_STARTUP=1 prints one timed line per start-up step; nothing
// without it. In process: the line format, a step's own time, the time since the process started, lines in
// the order of their steps. The binary: a headless shot prints its steps in start-up order (the binary
// loaded, EGL, the GL context, ImGui, the first frame begun and drawn) with times that never go back; on
// the GPU machine the CUDA steps too (driver, device query, context, the first interop registration).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/runtime/startup_trace.h"
#include "test_util.h"

namespace kl {
namespace {

struct Line {
  double at = 0, step = 0;
  std::string what;
};

// The trace's lines in `out` (other output ignored).
std::vector<Line> trace_lines(const std::string& out) {
  static const std::regex re(R"(^startup +([0-9]+\.[0-9]) ms  step +(-?[0-9]+\.[0-9]) ms  (.+)$)");
  std::vector<Line> v;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    std::smatch m;
    if (std::regex_match(line, m, re)) v.push_back({std::stod(m[1].str()), std::stod(m[2].str()), m[3].str()});
  }
  return v;
}

// The index of the first line at or after `from` that starts with `prefix` (-1: none).
int find_line(const std::vector<Line>& v, const std::string& prefix, int from = 0) {
  for (int i = from; i < int(v.size()); ++i)
    if (v[size_t(i)].what.rfind(prefix, 0) == 0) return i;
  return -1;
}

std::string all_text(const std::vector<Line>& v) {
  std::string s;
  for (const Line& l : v) s += "\n  " + std::to_string(l.at) + " " + std::to_string(l.step) + " " + l.what;
  return s;
}

struct TraceEnv {
  explicit TraceEnv(const char* v) {
    if (v) setenv("KL_TRACE_STARTUP", v, 1);
    else unsetenv("KL_TRACE_STARTUP");
  }
  ~TraceEnv() { unsetenv("KL_TRACE_STARTUP"); }
};

TEST(StartupTrace, OneTimedLinePerStepInOrder) {
  TraceEnv on("1");
  EXPECT_TRUE(startup::enabled());
  testing::internal::CaptureStderr();
  startup::mark("first mark");
  {
    startup::Step s("a step");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    s.set("a step, completed");
  }
  { startup::Step quiet("not traced", false); }
  startup::mark("second mark");
  const std::vector<Line> v = trace_lines(testing::internal::GetCapturedStderr());
  ASSERT_EQ(v.size(), 3u) << all_text(v);
  EXPECT_EQ(v[0].what, "first mark");
  EXPECT_EQ(v[1].what, "a step, completed");
  EXPECT_EQ(v[2].what, "second mark");
  EXPECT_GE(v[1].step, 29.9) << "a step's own time";
  EXPECT_LT(v[2].step, v[1].step) << "a mark's step is the time since the previous line";
  EXPECT_GT(v[0].at, 0.0) << "time since the process started";
  for (size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i].at, v[i - 1].at) << all_text(v);
  EXPECT_GE(v[2].at - v[0].at, 29.9);
}

TEST(StartupTrace, SilentWithoutTheVariable) {
  for (const char* value : {static_cast<const char*>(nullptr), "0", "yes"}) {
    TraceEnv env(value);
    EXPECT_FALSE(startup::enabled()) << (value ? value : "unset");
    testing::internal::CaptureStderr();
    startup::mark("nothing");
    { startup::Step s("nothing either"); }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << (value ? value : "unset");
  }
}

// The binary's own start-up, headless (EGL: Mesa's llvmpipe in CI). Leak checking is off for the child
// (Mesa keeps allocations to the end; the sanitizer run of this library checks leaks in process).
std::vector<Line> traced_shot(const std::string& backend, std::string* out) {
  const std::string png = test::test_file("shot.png");
  const int rc = test::run_shell("KL_TRACE_STARTUP=1 ASAN_OPTIONS=\"${ASAN_OPTIONS}:detect_leaks=0\" " +
                                     std::string(KL_BINARY) + " shot vector-add --backend " + backend + " --out " + png,
                                 out);
  EXPECT_EQ(rc, 0) << *out;
  return trace_lines(*out);
}

TEST(StartupTrace, TheBinaryTracesItsStartUpInOrder) {
  std::string out;
  const std::vector<Line> v = traced_shot("cpu", &out);
  int at = 0;
  for (const char* step : {"main reached", "EGL loaded", "EGL display and GL 3.3 core context: ", "ImGui context",
                           "first frame begun", "first frame drawn"}) {
    const int i = find_line(v, step, at);
    EXPECT_GE(i, at) << "no line \"" << step << "...\" after line " << at << ":" << all_text(v);
    if (i >= 0) at = i + 1;
  }
  for (size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i].at, v[i - 1].at) << all_text(v);
  for (const Line& l : v) EXPECT_GE(l.step, 0.0) << l.what;
  EXPECT_EQ(find_line(v, "CUDA"), -1) << "--backend cpu touches no CUDA:" << all_text(v);
  // Without the variable, the same run prints no trace (leak checking off for the child, as above).
  std::string quiet;
  EXPECT_EQ(test::run_shell("env -u KL_TRACE_STARTUP ASAN_OPTIONS=\"${ASAN_OPTIONS}:detect_leaks=0\" " +
                                std::string(KL_BINARY) + " shot vector-add --backend cpu --out " + test::test_file("quiet.png"),
                            &quiet),
            0)
      << quiet;
  EXPECT_TRUE(trace_lines(quiet).empty()) << quiet;
}

TEST(StartupTrace, TheBinaryTracesItsCudaStartUp) {
  KL_REQUIRE_CUDA();
  std::string out;
  const std::vector<Line> v = traced_shot("cuda", &out);
  std::printf("%s\n", all_text(v).c_str());  // the GPU machine's start-up, for the record
  const int driver = find_line(v, "CUDA driver loaded and initialised (cudaGetDeviceCount): ");
  const int query = find_line(v, "device query (cudaGetDeviceProperties): ");
  const int context = find_line(v, "CUDA context created");
  const int drawn = find_line(v, "first frame drawn");
  EXPECT_GE(driver, 0) << all_text(v);
  EXPECT_GT(query, driver) << all_text(v);
  EXPECT_GT(context, query) << all_text(v);
  EXPECT_GT(drawn, context) << all_text(v);
  const char* no_interop = std::getenv("KL_FORCE_NO_INTEROP");
  if (!(no_interop && no_interop[0] == '1')) {
    const int interop = find_line(v, "CUDA-GL interop: the first buffer registered");
    EXPECT_GE(interop, 0) << all_text(v);
    EXPECT_LT(interop, drawn) << all_text(v);
  }
}

}  // namespace
}  // namespace kl
