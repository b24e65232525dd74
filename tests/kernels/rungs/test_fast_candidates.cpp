// The `fast` candidates of rungs 1 and 2 (issue 16: one GPU run times them all, chosen by
// KL_VECTOR_ADD_FAST / KL_RELU_DROPOUT_FAST): each one bit-exact against the reference at sizes on both
// sides of its tile, of a full wave of blocks, and of the float4 tail, with the output poisoned with NaN;
// an unknown name refused with one line naming the variable and every candidate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "kernels/runtime/errors.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/rungs/vector_add.h"
#include "test_util.h"

namespace kl {
namespace {

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

const char* const kVectorAddCandidates[] = {"grid-stride",   "tile-k2-plain", "tile-k2",           "tile-k4-plain",
                                            "tile-k4",       "wave-k2-plain", "wave-k4",           "tile-k2-plain-t128",
                                            "tile-k4-plain-t128"};
const char* const kReluDropoutCandidates[] = {"tile-k4",  "u32",      "u32-plain",    "u32-t128",
                                              "u32-t512", "wave-u32", "wave-u32-t512"};

TEST(FastCandidatesCuda, VectorAddEachCandidateBitExact) {
  KL_REQUIRE_CUDA();
  // 2048 / 4096 floats: one tile of the K=2 / K=4 candidates; 2^24 + 5: several tiles per block of a full wave.
  const int64_t sizes[] = {1, 3, 4, 5, 2047, 2048, 2049, 4095, 4096, 4097, 1000003, (int64_t(1) << 24) + 5};
  for (const char* c : kVectorAddCandidates) {
    ScopedEnv env("KL_VECTOR_ADD_FAST", c);
    for (int64_t n : sizes) {
      const std::vector<float> x = test::random_floats(size_t(n)), y = test::random_floats(size_t(n));
      std::vector<float> ref(static_cast<size_t>(n));
      vector_add::reference(x.data(), y.data(), ref.data(), n);
      Buffer<float> dx(Backend::Cuda, size_t(n)), dy(Backend::Cuda, size_t(n)), dout(Backend::Cuda, size_t(n));
      dx.upload(x);
      dy.upload(y);
      dout.fill_bytes(0xFF);
      vector_add::run_fast(Backend::Cuda, dx.data(), dy.data(), dout.data(), n);
      EXPECT_EQ(0, std::memcmp(dout.to_host().data(), ref.data(), size_t(n) * 4)) << c << " n=" << n;
    }
  }
}

std::vector<float> fused_on(Backend b, const std::vector<float>& x, int64_t offset, double p, uint64_t seed,
                            int block) {
  const int64_t n = int64_t(x.size()) - offset;
  Buffer<float> dx(b, x.size()), dout(b, x.size());
  dx.upload(x);
  dout.fill_bytes(0xFF);
  relu_dropout::run_fused(b, dx.data() + offset, dout.data() + offset, n, p, seed, block);
  std::vector<float> out = dout.to_host();
  return std::vector<float>(out.begin() + offset, out.end());
}

TEST(FastCandidatesCuda, ReluDropoutEachCandidateSameBitsAsCpu) {
  KL_REQUIRE_CUDA();
  struct Case {
    int64_t n;
    int block;
    double p;
    int64_t offset;  // 1: pointers 4 bytes past 16-byte alignment (the scalar path)
  };
  // 2^23 + 5 at BLOCK_SIZE 4096: 2049 programs, more than a full wave of blocks, so wave-u32 loops.
  const Case cases[] = {{1, 32, 0.5, 0},          {5, 32, 0.5, 0},        {4095, 4096, 0.5, 0},
                        {4099, 4096, 0.3, 0},     {1000003, 1024, 0.5, 0}, {1000003, 128, 0.0, 0},
                        {100003, 4096, 0.5, 1},   {(int64_t(1) << 23) + 5, 4096, 0.5, 0}};
  for (const char* c : kReluDropoutCandidates) {
    ScopedEnv env("KL_RELU_DROPOUT_FAST", c);
    for (const Case& k : cases) {
      const uint64_t seed = test::next_seed() | (uint64_t(7) << 32);  // both key words non-zero
      const std::vector<float> x = test::random_floats(size_t(k.n + k.offset));
      const std::vector<float> cpu = fused_on(Backend::Cpu, x, k.offset, k.p, seed, k.block);
      const std::vector<float> gpu = fused_on(Backend::Cuda, x, k.offset, k.p, seed, k.block);
      ASSERT_EQ(cpu.size(), gpu.size());
      EXPECT_EQ(0, std::memcmp(cpu.data(), gpu.data(), cpu.size() * 4))
          << c << " n=" << k.n << " block=" << k.block << " p=" << k.p << " offset=" << k.offset << " seed=" << seed;
    }
  }
}

template <class Fn>
void expect_refusal(const char* var, const char* const* names, size_t count, Fn run) {
  ScopedEnv env(var, "no-such-candidate");
  try {
    run();
    FAIL() << var << "=no-such-candidate accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::string(var) + "=no-such-candidate"), std::string::npos) << m;
    for (size_t i = 0; i < count; ++i) EXPECT_NE(m.find(names[i]), std::string::npos) << names[i] << ": " << m;
  }
}

TEST(FastCandidatesCuda, UnknownCandidateRefusedNamingTheChoices) {
  KL_REQUIRE_CUDA();
  Buffer<float> x(Backend::Cuda, 64), y(Backend::Cuda, 64), out(Backend::Cuda, 64);
  expect_refusal("KL_VECTOR_ADD_FAST", kVectorAddCandidates, std::size(kVectorAddCandidates),
                 [&] { vector_add::run_fast(Backend::Cuda, x.data(), y.data(), out.data(), 64); });
  expect_refusal("KL_RELU_DROPOUT_FAST", kReluDropoutCandidates, std::size(kReluDropoutCandidates),
                 [&] { relu_dropout::run_fused(Backend::Cuda, x.data(), out.data(), 64, 0.5, 1, 1024); });
}

}  // namespace
}  // namespace kl
