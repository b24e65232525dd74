// kernels/runtime/array.cpp: the element count of a shape. A zero size anywhere makes it 0 without multiplying
// the sizes beside it (they may be anything the .npy header declared: the fuzzer's crash
// tests/fuzz/regressions/npy/crash-9969762876c67d9bf57d26cc9a249b048741b6de overflowed int64 there).
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/runtime/array.h"

namespace kl {
namespace {

TEST(Array, SizeIsTheProductAndZeroAnywhereIsZero) {
  EXPECT_EQ(Array{}.size(), 1);  // 0-d
  EXPECT_EQ((Array{{3}, {}}).size(), 3);
  EXPECT_EQ((Array{{2, 3, 5}, {}}).size(), 30);
  const int64_t big = int64_t(1) << 62;
  EXPECT_EQ((Array{{big, 9, 0}, {}}).size(), 0);
  EXPECT_EQ((Array{{0, big, big}, {}}).size(), 0);
  EXPECT_EQ((Array{{4, 594, 9, 8, 9, 108, 9, 4, 9, 98, 9, 108, 9, 4, 9, 9, 0, 9, 44, 2, 2}, {}}).size(), 0);
  EXPECT_EQ(Array::zeros({7, 0, 3}).data.size(), 0u);
  EXPECT_EQ(Array::zeros({7, 3}).data.size(), 21u);
}

}  // namespace
}  // namespace kl
