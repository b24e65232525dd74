// Shared test helpers: device detection for GPU tests, fresh random inputs, float64 references.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"

namespace kl::test {

bool has_cuda_device();
// Skips the current test when there is no CUDA device: use as the first line of every GPU test.
#define KL_REQUIRE_CUDA()                                                   \
  do {                                                                      \
    if (!::kl::test::has_cuda_device()) GTEST_SKIP() << "no CUDA device";  \
  } while (0)

// Backends to sweep in a test: always the CPU one, the CUDA one where a device is present.
std::vector<Backend> backends();

// Fresh random inputs per call (seeded from a per-process counter, printed on failure by the caller).
std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f);
// Small integers stored as floats, so sums compare bit-exactly (the CUTLASS habit).
std::vector<float> random_small_ints(size_t n, int lo = -64, int hi = 64);
uint64_t next_seed();

// Relative error in the 2-norm of a float32 result against a float64 reference (absolute where the
// reference is all zeros), and the number of NaNs in a result.
double rel_err(const std::vector<float>& got, const std::vector<double>& ref);
size_t nan_count(const std::vector<float>& v);

// The backend the window and layout tests drive the app with: "cpu" unless KL_TEST_BACKEND names another
// (the GPU machine runs them a second time with KL_TEST_BACKEND=cuda).
std::string window_backend();
// A scratch directory for files tests write (created on demand).
std::string tmp_dir();
// Runs the kernel-ladder binary with arguments; returns the exit code; output in *out (stdout+stderr).
int run_cli(const std::string& args, std::string* out);
// Runs a shell command line (stdout+stderr into *out); returns its exit code.
int run_shell(const std::string& command, std::string* out);

}  // namespace kl::test
