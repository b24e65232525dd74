#include "test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

uint64_t next_seed() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base =
      uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  return base + counter++;
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

}  // namespace kl::test
