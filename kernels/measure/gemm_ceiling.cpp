// The GEMM ceiling: argument checks, the CPU loop, and the sampled check both backends share.
#include "kernels/measure/gemm_ceiling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/measure/bench.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

namespace kl::gemm {
namespace {

// C = A B, all [n, n] row-major fp32, blocked so a tile of B stays in cache.
void cpu_gemm(const float* a, const float* b, float* c, int n) {
  constexpr int kT = 64;
  std::fill(c, c + size_t(n) * n, 0.0f);
  for (int i0 = 0; i0 < n; i0 += kT)
    for (int k0 = 0; k0 < n; k0 += kT)
      for (int j0 = 0; j0 < n; j0 += kT)
        for (int i = i0; i < std::min(n, i0 + kT); ++i)
          for (int k = k0; k < std::min(n, k0 + kT); ++k) {
            const float aik = a[size_t(i) * n + k];
            float* crow = c + size_t(i) * n;
            const float* brow = b + size_t(k) * n;
            for (int j = j0; j < std::min(n, j0 + kT); ++j) crow[j] += aik * brow[j];
          }
}

}  // namespace

Ceiling measure_ceiling(Backend b, int n, int iterations) {
  if (n == 0) n = b == Backend::Cuda ? kDefaultCudaN : kDefaultCpuN;
  require_range("gemm n", n, 16, b == Backend::Cuda ? 16384 : 2048);
  if (n % 16 != 0) throw InputError(out_of_range_message("gemm n", std::to_string(n), "a multiple of 16"));
  if (iterations == 0) iterations = b == Backend::Cuda ? 20 : 3;
  require_range("gemm iterations", iterations, 1, 1000);
  if (b == Backend::Cuda) {
#ifdef KL_HAS_CUDA
    return detail::measure_cuda(n, iterations);
#else
    throw RuntimeError("the GEMM ceiling on the CUDA backend: this build has no CUDA");
#endif
  }
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A(size_t(n) * n), B(size_t(n) * n), C(size_t(n) * n);
  for (float& v : A) v = u(rng);
  for (float& v : B) v = u(rng);
  cpu_gemm(A.data(), B.data(), C.data(), n);
  Ceiling c;
  c.n = n;
  for (int s = 0; s < 16; ++s) {  // sampled entries against float64
    const int i = (s * 7919) % n, j = (s * 104729 + 13) % n;
    double ref = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      const double p = double(A[size_t(i) * n + k]) * B[size_t(k) * n + j];
      ref += p, mag += std::fabs(p);
    }
    c.max_rel_err = std::max(c.max_rel_err, std::fabs(C[size_t(i) * n + j] - ref) / std::max(mag, 1e-30));
  }
  const bench::Timing t = bench::time(b, [&] { cpu_gemm(A.data(), B.data(), C.data(), n); }, 1, iterations);
  c.ms = t.median_ms;
  c.tflops = 2.0 * double(n) * n * n / (t.median_ms * 1e-3) / 1e12;
  c.what = "CPU fp32 blocked loop " + std::to_string(n) + "^3 (not a tuned BLAS)";
  return c;
}

}  // namespace kl::gemm
