// viz/window_icon: the icon the window's title bar shows is the one drawn for the program (the 48 and
// 128 px PNGs made at build time from assets/icon/kernel-ladder.svg), embedded and decodable.
#include "viz/window_icon.h"

#include <gtest/gtest.h>

#include "viz/png.h"

namespace kl::viz {
namespace {

// The pixel at (x, y) of an RGBA8 image.
const uint8_t* px(const IconImage& im, int x, int y) { return &im.rgba[(size_t(y) * im.width + x) * 4]; }

TEST(WindowIcon, TheEmbeddedIconsAreThe48And128PixelImages) {
  const std::vector<IconImage> icons = embedded_icons();
  ASSERT_EQ(icons.size(), 2u);
  EXPECT_EQ(icons[0].width, 48);
  EXPECT_EQ(icons[0].height, 48);
  EXPECT_EQ(icons[1].width, 128);
  EXPECT_EQ(icons[1].height, 128);
  for (const IconImage& im : icons) ASSERT_EQ(im.rgba.size(), size_t(im.width) * im.height * 4);
}

TEST(WindowIcon, TheIconIsTheLadderOnAnOpaqueTileWithTransparentCorners) {
  for (const IconImage& im : embedded_icons()) {
    const int w = im.width;
    EXPECT_EQ(px(im, 0, 0)[3], 0) << w << " px: the rounded tile leaves the corner transparent";
    EXPECT_EQ(px(im, w / 2, w / 2)[3], 255) << w << " px: the centre is opaque";
    // The top rung (x = 0.5, y = 57/256 of the side) is the bright yellow heatmap cell (#fde725).
    const uint8_t* rung = px(im, w / 2, w * 57 / 256);
    EXPECT_GT(rung[0], 200);
    EXPECT_GT(rung[1], 200);
    EXPECT_LT(rung[2], 100);
    // A rail (x = 66/256 of the side) is light grey; the background between rungs is dark.
    const uint8_t* rail = px(im, w * 66 / 256, w / 2);
    EXPECT_GT(rail[0] + rail[1] + rail[2], 600);
    const uint8_t* gap = px(im, w / 2, w * 85 / 256);
    EXPECT_LT(gap[0] + gap[1] + gap[2], 200);
  }
}

}  // namespace
}  // namespace kl::viz
