// app/gif.*: the quantiser keeps frames of <= 256 colours exact and the most covering colours of larger
// ones exact, is deterministic, and the writer's file decodes (giflib) to the frames it was given.
#include "app/gif.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "app/gif_frames.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

uint32_t rgb_at(const std::vector<uint8_t>& rgba, size_t i) {
  return uint32_t(rgba[4 * i]) << 16 | uint32_t(rgba[4 * i + 1]) << 8 | rgba[4 * i + 2];
}

TEST(Quantise, AtMost256ColoursIsExact) {
  std::mt19937 rng(uint32_t(test::next_seed()));
  std::vector<uint32_t> colours(256);
  for (uint32_t& c : colours) c = rng() & 0xffffff;
  std::vector<uint32_t> px(10000);
  for (uint32_t& p : px) p = colours[rng() % colours.size()];
  const app::Quantised q = app::quantise(px);
  ASSERT_LE(q.palette.size(), 256u);
  EXPECT_TRUE(q.exact());
  for (size_t i = 0; i < px.size(); ++i) ASSERT_EQ(q.palette[q.index[i]], px[i]) << i;
}

TEST(Quantise, MoreColoursKeepTheMostCoveringExactAndMapTheRestNearby) {
  std::mt19937 rng(uint32_t(test::next_seed()));
  // 100 "heatmap" colours covering 200 pixels each, and 3000 rare colours (1 pixel each) near grey.
  std::vector<uint32_t> px;
  std::vector<uint32_t> heat;
  for (int k = 0; k < 100; ++k) heat.push_back((rng() & 0xffffff) | 0x010000);
  for (uint32_t c : heat) px.insert(px.end(), 200, c);
  for (int k = 0; k < 3000; ++k) {
    const uint32_t g = 100 + rng() % 56;
    px.push_back(g << 16 | (g + rng() % 8) << 8 | (g + rng() % 8));
  }
  std::shuffle(px.begin(), px.end(), rng);
  const app::Quantised q = app::quantise(px);
  ASSERT_EQ(q.palette.size(), 256u);
  EXPECT_FALSE(q.exact());
  uint64_t approximated = 0;
  int worst = 0;
  for (size_t i = 0; i < px.size(); ++i) {
    const uint32_t got = q.palette[q.index[i]];
    bool is_heat = false;
    for (uint32_t c : heat) is_heat = is_heat || c == px[i];
    if (is_heat) ASSERT_EQ(got, px[i]) << "a colour covering 200 pixels was approximated";
    approximated += got != px[i];
    for (int s = 0; s < 24; s += 8) worst = std::max(worst, std::abs(int(got >> s & 255) - int(px[i] >> s & 255)));
  }
  EXPECT_EQ(approximated, q.approximated);
  EXPECT_GT(approximated, 0u);
  EXPECT_LE(worst, 16) << "the rare greys should map to a nearby grey from the median cut";
  const app::Quantised again = app::quantise(px);
  EXPECT_EQ(again.palette, q.palette);
  EXPECT_EQ(again.index, q.index);
}

TEST(GifWriter, FramesDecodeExactlyWithDelayLoopAndChangedRectangles) {
  const int w = 37, h = 23;
  std::mt19937 rng(uint32_t(test::next_seed()));
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> f(size_t(w) * h * 4, 255);
  for (int k = 0; k < 4; ++k) {
    // A few colours; each frame changes a small block (frame 2 changes nothing).
    if (k != 2)
      for (int y = 3 + k; y < 9 + k; ++y)
        for (int x = 5 * k; x < 5 * k + 7; ++x) {
          uint8_t* p = &f[(size_t(y) * w + x) * 4];
          p[0] = uint8_t(rng()), p[1] = uint8_t(rng() & 0xf0), p[2] = uint8_t(k * 60);
        }
    frames.push_back(f);
  }
  const std::string path = test::tmp_dir() + "/writer.gif";
  std::remove(path.c_str());
  {
    app::GifWriter gw(path, w, h, 25);
    for (const auto& fr : frames) gw.add_frame(fr);
    gw.close();
    EXPECT_EQ(gw.stats().frames, 4);
    EXPECT_EQ(gw.stats().exact_frames, 4);
    EXPECT_LT(gw.stats().pixels, uint64_t(4) * w * h) << "after the first frame only changed rectangles";
  }
  const test::GifFrames g = test::read_gif(path);
  ASSERT_TRUE(g.error.empty()) << g.error;
  EXPECT_EQ(g.width, w);
  EXPECT_EQ(g.height, h);
  EXPECT_TRUE(g.loops);
  ASSERT_EQ(g.rgba.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(g.delay_cs[k], 25);
    EXPECT_EQ(g.disposal[k], DISPOSE_DO_NOT);
    for (size_t i = 0; i < size_t(w) * h; ++i)
      ASSERT_EQ(rgb_at(g.rgba[k], i), rgb_at(frames[k], i)) << "frame " << k << " pixel " << i;
  }
}

TEST(GifWriter, UnwritablePathIsAnInputErrorNamingIt) {
  try {
    app::GifWriter gw("/nonexistent-dir/x.gif", 10, 10, 10);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.gif: cannot write ("), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kl
