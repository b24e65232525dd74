// Shared test helpers: device detection for GPU tests, fresh random inputs, float64 references, files
// of one test, the CLI, and the editable kernels' sources and worker.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/array.h"
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

// Fresh random inputs per call, seeded from a per-process counter on a base seed: the clock's, or
// KL_TEST_SEED's where set. A failed test prints the base (KL_TEST_SEED=N replays its inputs).
std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f);
// Small integers stored as floats, so sums compare bit-exactly (the CUTLASS habit).
std::vector<float> random_small_ints(size_t n, int lo = -64, int hi = 64);
uint64_t next_seed();
// An array of `shape` filled by random_floats.
Array random_array(std::vector<int64_t> shape);

// Runs body(begin, end) over [0, n) split into contiguous ranges, one thread per range, as many threads as
// the machine has (for the float64 references of the GPU sweeps: 16 cores there, where one took minutes).
void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body);

// Relative error in the 2-norm of a float32 result against a float64 reference (absolute where the
// reference is all zeros), and the number of NaNs in a result.
double rel_err(const std::vector<float>& got, const std::vector<double>& ref);
size_t nan_count(const std::vector<float>& v);
// Same size and the same bytes (NaNs and signed zeros included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The backend the window and layout tests drive the app with: "cpu" unless KL_TEST_BACKEND names another
// (the GPU machine runs them a second time with KL_TEST_BACKEND=cuda).
std::string window_backend();
// A scratch directory for files tests write (created on demand).
std::string tmp_dir();
// A file of the running test in tmp_dir(), named after it ("<test>_<name>"): ctest runs each test as its
// own process, in parallel, so two tests writing one name would read each other's files.
std::string test_file(const std::string& name);
// Writes `text` (or a float32 .npy of `shape`) to test_file(name); returns the path.
std::string write_file(const std::string& name, const std::string& text);
std::string write_npy(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data);
// Runs the kernel-ladder binary with arguments; returns the exit code; output in *out (stdout+stderr).
int run_cli(const std::string& args, std::string* out);
// Runs a shell command line (stdout+stderr into *out); returns its exit code.
int run_shell(const std::string& command, std::string* out);

// `text` with the first `from` replaced by `to` (a test failure where `from` is not in it); unchanged
// when `from` is empty.
std::string replaced(std::string text, const std::string& from, const std::string& to);
// The rung's shipped editable source as the user's file `file`, edited by replaced(from, to).
editable::Source shipped_copy(const std::string& rung, const std::string& file, const std::string& from = "",
                              const std::string& to = "");
// The 1-based line of `text` on which `needle` first occurs (a test failure where it does not).
int line_of(const std::string& text, const std::string& needle);
// For tests that launch edited kernels through the worker: registers a test environment that runs the
// worker from the kernel-ladder binary and stops it after the last test. Returns the environment.
const void* use_worker_binary();

}  // namespace kl::test
