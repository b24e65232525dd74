// viz/png.cpp: PNG files written with stb_image_write read back identical with stb_image.
#include <gtest/gtest.h>

#include <random>

#include "kernels/runtime/errors.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

TEST(Png, RoundTripIsExact) {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{3, 7}, std::pair{257, 129}}) {
    const uint64_t seed = test::next_seed();
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> rgba(size_t(w) * h * 4);
    for (uint8_t& b : rgba) b = uint8_t(rng());
    const std::string path = test::tmp_dir() + "/round_trip.png";
    viz::write_png(path, rgba, w, h);
    std::vector<uint8_t> back;
    int bw = 0, bh = 0;
    ASSERT_TRUE(viz::read_png(path, back, bw, bh)) << path;
    EXPECT_EQ(bw, w);
    EXPECT_EQ(bh, h);
    EXPECT_EQ(back, rgba) << "seed " << seed << ", " << w << "x" << h;
  }
}

TEST(Png, WrongPixelCountThrows) {
  std::vector<uint8_t> rgba(10 * 10 * 4);
  EXPECT_THROW(viz::write_png(test::tmp_dir() + "/bad.png", rgba, 10, 11), RuntimeError);
  EXPECT_THROW(viz::write_png(test::tmp_dir() + "/bad.png", rgba, 0, 0), RuntimeError);
}

TEST(Png, UnwritablePathThrowsNamingIt) {
  std::vector<uint8_t> rgba(4 * 4 * 4, 128);
  try {
    viz::write_png("/nonexistent-dir/x.png", rgba, 4, 4);
    FAIL() << "no exception";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.png"), std::string::npos) << e.what();
  }
}

TEST(Png, ReadingAMissingFileFails) {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  EXPECT_FALSE(viz::read_png(test::tmp_dir() + "/does-not-exist.png", rgba, w, h));
}

}  // namespace
}  // namespace kl
