#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "kernels/editable/worker.h"
#include "kernels/runtime/npy.h"

namespace kl::test {

bool has_cuda_device() {
  static const bool has = cuda_device_count() > 0;
  return has;
}

std::vector<Backend> backends() {
  std::vector<Backend> b = {Backend::Cpu};
  if (has_cuda_device()) b.push_back(Backend::Cuda);
  return b;
}

namespace {

// The process's first seed: KL_TEST_SEED where set (to replay a failure), else from the clock.
uint64_t base_seed() {
  static const uint64_t base = []() -> uint64_t {
    if (const char* s = std::getenv("KL_TEST_SEED"); s && *s) return std::strtoull(s, nullptr, 0);
    return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  }();
  return base;
}

// Prints the base seed after a failed test, so that its random inputs can be drawn again: ctest runs one
// test per process, and the test draws its seeds in the same order every run.
class SeedPrinter : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result() && info.result()->Failed())
      std::printf("random inputs: KL_TEST_SEED=%llu replays them\n", (unsigned long long)base_seed());
  }
};

[[maybe_unused]] const bool seed_printer_added = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SeedPrinter);
  return true;
}();

}  // namespace

uint64_t next_seed() {
  static std::atomic<uint64_t> counter{0};
  return base_seed() + counter++;
}

std::vector<float> random_floats(size_t n, float lo, float hi) {
  std::mt19937_64 rng(next_seed());
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> random_small_ints(size_t n, int lo, int hi) {
  std::mt19937_64 rng(next_seed());
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = float(d(rng));
  return v;
}

Array random_array(std::vector<int64_t> shape) {
  Array a;
  a.shape = std::move(shape);
  a.data = random_floats(size_t(a.size()));
  return a;
}

double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = double(got[i]) - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

size_t nan_count(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += std::isnan(x) ? 1 : 0;
  return n;
}

std::string window_backend() {
  const char* b = std::getenv("KL_TEST_BACKEND");
  return b && *b ? b : "cpu";
}

std::string tmp_dir() {
  std::string d = KL_TEST_TMP;
  ::mkdir(d.c_str(), 0755);
  return d;
}

std::string test_file(const std::string& name) {
  return tmp_dir() + "/" + testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + name;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = test_file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string write_npy(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data) {
  const std::string path = test_file(name);
  npy::write(path, Array{std::move(shape), data});
  return path;
}

int run_cli(const std::string& args, std::string* out) {
  return run_shell(std::string(KL_BINARY) + " " + args, out);
}

int run_shell(const std::string& command, std::string* out) {
  const std::string cmd = "(" + command + ") 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, k);
  int status = ::pclose(p);
  if (out) *out = text;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

editable::Source shipped_copy(const std::string& rung, const std::string& file, const std::string& from,
                              const std::string& to) {
  return editable::Source{rung, file, replaced(editable::shipped_source(rung), from, to)};
}

int line_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  int line = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

namespace {
struct UseWorkerBinary : ::testing::Environment {
  void SetUp() override { editable::worker::set_program(KL_BINARY); }
  void TearDown() override { editable::worker::stop(); }
};
}  // namespace

const void* use_worker_binary() { return ::testing::AddGlobalTestEnvironment(new UseWorkerBinary); }

void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  for (std::thread& th : pool) th.join();
}

}  // namespace kl::test
