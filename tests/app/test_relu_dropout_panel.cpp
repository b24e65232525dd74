// app/panels/relu_dropout_panel.cpp rendered headlessly by `shot`: the mask raster's kept (palette
// colour 1) and dropped (palette colour 0) cells come in the proportion 1-p : p, keyed by two swatches
// rather than a continuous colour bar, and the ratio histogram has its one highlighted spike.
#include <gtest/gtest.h>

#include <cstdlib>

#include "app/panel_specs.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/studies/relu_dropout_study.h"
#include "test_util.h"
#include "viz/heatmap.h"
#include "viz/png.h"

namespace kl {
namespace {

int count_colour(const std::vector<uint8_t>& rgba, const float c[3], int tol) {
  int n = 0;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4) {
    bool m = true;
    for (int ch = 0; ch < 3; ++ch) m = m && std::abs(int(rgba[i + ch]) - int(c[ch] * 255.0f + 0.5f)) <= tol;
    n += m;
  }
  return n;
}

void check_kept_share(const std::string& backend) {
  float kept[3], dropped[3], mid[3];
  viz::categorical_rgb(1, kept);
  viz::categorical_rgb(0, dropped);
  viz::colormap_rgb(0.5f, mid);  // the middle of a 0-1 colour bar: a binary mask has no such value
  const float spike[3] = {120 / 255.0f, 220 / 255.0f, 120 / 255.0f};
  for (double p : {0.2, 0.5, 0.9}) {
    std::string out;
    const std::string file = test::tmp_dir() + "/rd-" + backend + ".png";
    ASSERT_EQ(test::run_cli("shot relu-dropout --backend " + backend + " --size 1400x900 --out " + file +
                                " --set n=65536 --set p=" + std::to_string(p),
                            &out),
              0)
        << out;
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    ASSERT_TRUE(viz::read_png(file, rgba, w, h));
    ASSERT_EQ(w, 1400);
    const int k = count_colour(rgba, kept, 4), d = count_colour(rgba, dropped, 4);
    ASSERT_GT(k + d, 50000) << "mask raster missing";
    EXPECT_NEAR(double(k) / (k + d), 1.0 - p, 0.05) << "p " << p;
    EXPECT_GT(count_colour(rgba, spike, 3), 200) << "no highlighted spike bar";
    EXPECT_LT(count_colour(rgba, mid, 6), 10) << "a continuous colour bar beside the binary mask";
  }
}

TEST(ReluDropoutPanel, MaskRasterShowsTheKeptShareCpu) { check_kept_share("cpu"); }

TEST(ReluDropoutPanel, MaskRasterShowsTheKeptShareCuda) {
  KL_REQUIRE_CUDA();
  check_kept_share("cuda");
}

// One spec per parameter: the panel takes the study's list, whose p, seed and block_size are the rung's
// own specs, unchanged.
TEST(ReluDropoutPanel, ParametersAreTheStudysBuiltFromTheRungsSpecs) {
  test::expect_panel_params_are_the_studys("relu-dropout");
  const ParamValues v(study::relu_dropout_params());
  for (const ParamSpec& k : {relu_dropout::param::p(), relu_dropout::param::seed(), relu_dropout::param::block_size()}) {
    const ParamSpec* s = v.spec(k.name);
    ASSERT_NE(s, nullptr) << k.name;
    EXPECT_FALSE(s->is_override()) << k.name;
    test::expect_same_spec(*s, k, "relu-dropout " + k.name);
  }
}

TEST(ReluDropoutPanel, POutsideRangeExitsTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("shot relu-dropout --backend cpu --out " + test::tmp_dir() + "/x.png --set p=1", &out), 2)
      << out;
  EXPECT_NE(out.find("p"), std::string::npos);
}

}  // namespace
}  // namespace kl
