// kernels/gemm_ceiling.{h,cpp,cu}: the ceiling is a real product (sampled entries against float64 sums of
// the same inputs) on both backends, its figures are positive, and bad sizes are refused. No time limits.
#include <gtest/gtest.h>

#include "kernels/runtime/errors.h"
#include "kernels/measure/gemm_ceiling.h"
#include "test_util.h"

namespace kl {
namespace {

TEST(GemmCeiling, CpuProductIsRightAndTimed) {
  for (int n : {16, 64, 272}) {
    const gemm::Ceiling c = gemm::measure_ceiling(Backend::Cpu, n, 1);
    EXPECT_EQ(c.n, n);
    EXPECT_LT(c.max_rel_err, 1e-5) << n;
    EXPECT_GT(c.ms, 0.0);
    EXPECT_GT(c.tflops, 0.0);
    EXPECT_NE(c.what.find("CPU"), std::string::npos);
  }
}

TEST(GemmCeiling, BadSizesRefused) {
  EXPECT_THROW(gemm::measure_ceiling(Backend::Cpu, 8), InputError);
  EXPECT_THROW(gemm::measure_ceiling(Backend::Cpu, 100), InputError);  // not a multiple of 16
  EXPECT_THROW(gemm::measure_ceiling(Backend::Cpu, 4096), InputError);
  EXPECT_THROW(gemm::measure_ceiling(Backend::Cpu, 64, -1), InputError);
}

TEST(GemmCeiling, CudaCublasProductIsRightAndTimed) {
  KL_REQUIRE_CUDA();
  for (int n : {256, 1040, gemm::kDefaultCudaN}) {
    const gemm::Ceiling c = gemm::measure_ceiling(Backend::Cuda, n, n == gemm::kDefaultCudaN ? 10 : 3);
    EXPECT_EQ(c.n, n);
    EXPECT_LT(c.max_rel_err, 1e-4) << n;  // bf16 products are exact in fp32; only the fp32 sums round
    EXPECT_GT(c.tflops, 0.0);
    EXPECT_NE(c.what.find("cuBLAS"), std::string::npos);
    std::printf("cuBLAS bf16 GEMM %d^3: %.3f ms, %.1f TFLOP/s, max rel err %.2g\n", n, c.ms, c.tflops, c.max_rel_err);
  }
}

}  // namespace
}  // namespace kl
