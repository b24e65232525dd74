#include "kernels/measure/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"

#ifdef KL_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace kl::bench {
namespace {

#ifdef KL_HAS_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
  }
}
// Long enough for the host to queue every timed iteration (tens of microseconds each) behind it.
constexpr double kQueueAheadMs = 10.0;
#endif

Timing summarize(std::vector<double> ms) {
  Timing t;
  std::sort(ms.begin(), ms.end());
  t.iterations = int(ms.size());
  if (ms.empty()) return t;
  t.min_ms = ms.front();
  t.median_ms = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  return t;
}

}  // namespace

double warmup_ms_from_env() {
  const char* env = std::getenv("KL_BENCH_WARMUP_MS");
  if (!env || !*env) return 0;
  char* end = nullptr;
  const double ms = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(ms >= 0 && ms <= 10000))
    throw InputError(out_of_range_message("KL_BENCH_WARMUP_MS", env, "[0, 10000] milliseconds"));
  return ms;
}

Timing time(Backend b, const std::function<void()>& fn, int warmup, int iterations) {
  for (int i = 0; i < warmup; ++i) fn();
#ifdef KL_HAS_CUDA
  if (b == Backend::Cuda) {
    const double warm_ms = warmup_ms_from_env();
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < warm_ms) {
      for (int i = 0; i < 4; ++i) fn();
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize in the timed warm-up");
    }
  }
#endif
  std::vector<double> ms;
  ms.reserve(size_t(iterations));
  if (b == Backend::Cpu) {
    for (int i = 0; i < iterations; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      fn();
      auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    return summarize(ms);
  }
#ifdef KL_HAS_CUDA
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before timing");
  std::vector<cudaEvent_t> ev(size_t(iterations) * 2);
  for (cudaEvent_t& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
  detail::enqueue_spin(kQueueAheadMs);  // the launches below queue up behind it
  for (int i = 0; i < iterations; ++i) {
    check(cudaEventRecord(ev[2 * i]), "cudaEventRecord");
    fn();
    check(cudaEventRecord(ev[2 * i + 1]), "cudaEventRecord");
  }
  check(cudaEventSynchronize(ev.back()), "cudaEventSynchronize");
  for (int i = 0; i < iterations; ++i) {
    float m = 0;
    check(cudaEventElapsedTime(&m, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    ms.push_back(m);
  }
  for (cudaEvent_t& e : ev) cudaEventDestroy(e);
  check(cudaGetLastError(), "timed work");
  return summarize(ms);
#else
  throw RuntimeError("built without CUDA");
#endif
}

int sets_to_span(int64_t l2_bytes, size_t bytes_per_set) {
  if (l2_bytes <= 0 || bytes_per_set == 0) return 1;
  const size_t span = 4 * size_t(l2_bytes);
  return int(std::max<size_t>(1, (span + bytes_per_set - 1) / bytes_per_set));
}

int cold_sets(Backend b, size_t bytes_per_set) {
  return b == Backend::Cpu ? 1 : sets_to_span(device_info(b).l2_bytes, bytes_per_set);
}

double copy_bandwidth_gbs(Backend b, size_t bytes, int sets) {
  const Timing t = copy_timing(b, bytes, sets);
  return 2.0 * double(bytes) / (t.median_ms * 1e-3) / 1e9;
}

Timing copy_timing(Backend b, size_t bytes, int sets) {
  if (sets < 1) throw InputError("copy_bandwidth_gbs: sets=" + std::to_string(sets) + " must be >= 1");
  std::vector<Buffer<uint8_t>> src, dst;
  for (int k = 0; k < sets; ++k) {
    src.emplace_back(b, bytes);
    dst.emplace_back(b, bytes);
    src.back().fill_bytes(1);
  }
  int k = 0;
  Timing t;
  if (b == Backend::Cpu) {
    t = time(b, [&] {
      std::memcpy(dst[size_t(k)].data(), src[size_t(k)].data(), bytes);
      k = (k + 1) % sets;
    }, 2, 10);
  } else {
#ifdef KL_HAS_CUDA
    t = time(b, [&] {
      check(cudaMemcpyAsync(dst[size_t(k)].data(), src[size_t(k)].data(), bytes, cudaMemcpyDeviceToDevice), "copy");
      k = (k + 1) % sets;
    });
#endif
  }
  return t;
}

std::string format_table(const std::vector<Row>& rows) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-16s %-12s %-28s %10s %10s %10s %8s  %s\n", "kernel", "variant", "shape",
                "ms", "GB/s", "TFLOP/s", "ratio", "baseline");
  s += line;
  for (const Row& r : rows) {
    auto num = [](double v, const char* fmt) {
      char b[32];
      if (v == 0) return std::string("-");
      std::snprintf(b, sizeof b, fmt, v);
      return std::string(b);
    };
    std::snprintf(line, sizeof line, "%-16s %-12s %-28s %10s %10s %10s %8s  %s\n", r.kernel.c_str(),
                  r.variant.c_str(), r.shape.c_str(), num(r.ms, "%.4f").c_str(), num(r.gbs, "%.1f").c_str(),
                  num(r.tflops, "%.1f").c_str(), num(r.ratio, "%.3f").c_str(), r.baseline.c_str());
    s += line;
  }
  return s;
}

}  // namespace kl::bench
