// kernels/vector_add.*: the traced version on both backends against the reference, bit-exact, for N
// on both sides of every block boundary and every BLOCK_SIZE; the trace says every element was stored
// exactly once, by the program that owns it, and exactly grid*BLOCK - N lanes were masked.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/editable/vector_add_outcome.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/vector_add.h"
#include "test_util.h"

namespace kl {
namespace {

using Outcome = test::VectorAddOutcome;

// The shipped traced version (test::traced_vector_add uploads, poisons the output, resets the trace and
// reads everything back).
Outcome run_on(Backend b, const std::vector<float>& x, const std::vector<float>& y, int block) {
  return test::traced_vector_add(b, int64_t(x.size()), block, x, y,
                                 [&](const float* dx, const float* dy, float* dout, int64_t n, int bs, ElementTraceView* v) {
                                   return vector_add::run_traced(b, dx, dy, dout, n, bs, v);
                                 });
}

std::vector<int64_t> sizes_for(int block) {
  std::vector<int64_t> s = {1, 2, block - 1, block, block + 1, 1000003};
  if (block == 1024) s.push_back((int64_t(1) << 24) + 5);  // the large case once, not per block size
  return s;
}

class VectorAdd : public ::testing::TestWithParam<int> {};

TEST_P(VectorAdd, BitExactAndTraceComplete) {
  const int block = GetParam();
  for (Backend b : test::backends()) {
    for (int64_t n : sizes_for(block)) {
      if (b == Backend::Cpu && n > 2000000 && block != 1024) continue;
      SCOPED_TRACE(std::string(backend_name(b)) + " n=" + std::to_string(n) + " block=" + std::to_string(block));
      const std::vector<float> x = test::random_small_ints(size_t(n)), y = test::random_small_ints(size_t(n));
      std::vector<float> ref(static_cast<size_t>(n));
      vector_add::reference(x.data(), y.data(), ref.data(), n);
      const Outcome o = run_on(b, x, y, block);
      ASSERT_EQ(0, std::memcmp(o.out.data(), ref.data(), size_t(n) * 4)) << "not bit-exact";
      const int64_t grid = (n + block - 1) / block;
      int64_t masked = 0, active = 0;
      for (uint8_t s : o.lanes) {
        ASSERT_NE(s, kLaneNotRun) << "a program of the grid never ran";
        masked += s == kLaneMasked;
        active += s == kLaneActive;
      }
      EXPECT_EQ(masked, grid * block - n);
      EXPECT_EQ(active, n);
      for (int64_t i = 0; i < n; ++i) {
        if (o.count[size_t(i)] != 1 || o.writer[size_t(i)] != int32_t(i / block)) {
          FAIL() << "element " << i << " stored " << o.count[size_t(i)] << " times, by pid " << o.writer[size_t(i)];
        }
      }
      // The masked lanes are exactly the tail of the last program.
      for (int64_t l = 0; l < grid * block; ++l)
        ASSERT_EQ(o.lanes[size_t(l)], l < n ? kLaneActive : kLaneMasked) << "lane " << l;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBlockSize, VectorAdd, ::testing::Values(32, 64, 128, 256, 512, 1024, 2048, 4096));

TEST(VectorAddCuda, TracesIdenticalToCpu) {
  KL_REQUIRE_CUDA();
  for (int block : {32, 1024, 4096}) {
    for (int64_t n : {int64_t(1), int64_t(block) + 1, int64_t(1000003)}) {
      const std::vector<float> x = test::random_small_ints(size_t(n)), y = test::random_small_ints(size_t(n));
      const Outcome c = run_on(Backend::Cpu, x, y, block), g = run_on(Backend::Cuda, x, y, block);
      EXPECT_EQ(c.writer, g.writer);
      EXPECT_EQ(c.count, g.count);
      EXPECT_EQ(c.lanes, g.lanes);
      EXPECT_EQ(0, std::memcmp(c.out.data(), g.out.data(), size_t(n) * 4));
    }
  }
}

TEST(VectorAddCuda, FastVersionBitExact) {
  KL_REQUIRE_CUDA();
  for (int64_t n : {int64_t(1), int64_t(3), int64_t(4), int64_t(5), int64_t(1000003), (int64_t(1) << 24) + 5}) {
    const std::vector<float> x = test::random_small_ints(size_t(n)), y = test::random_small_ints(size_t(n));
    std::vector<float> ref(static_cast<size_t>(n));
    vector_add::reference(x.data(), y.data(), ref.data(), n);
    Buffer<float> dx(Backend::Cuda, size_t(n)), dy(Backend::Cuda, size_t(n)), dout(Backend::Cuda, size_t(n));
    dx.upload(x);
    dy.upload(y);
    dout.fill_bytes(0xFF);
    vector_add::run_fast(Backend::Cuda, dx.data(), dy.data(), dout.data(), n);
    EXPECT_EQ(0, std::memcmp(dout.to_host().data(), ref.data(), size_t(n) * 4)) << "n=" << n;
  }
}

TEST(VectorAdd, RefusesBadBlockSizesAndLengths) {
  std::vector<float> x(100), y(100), out(100);
  for (int bad : {0, 16, 31, 33, 100, 8192}) {
    try {
      vector_add::run_traced(Backend::Cpu, x.data(), y.data(), out.data(), 100, bad, nullptr);
      FAIL() << "block " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("block_size=" + std::to_string(bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[32, 4096]"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(vector_add::run_traced(Backend::Cpu, x.data(), y.data(), out.data(), 0, 32, nullptr), InputError);
}

}  // namespace
}  // namespace kl
