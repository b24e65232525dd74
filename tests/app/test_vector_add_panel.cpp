// app/panels/vector_add_panel.cpp rendered headlessly by `shot` (Mesa here, NVIDIA EGL on the GPU
// machine): the PNG has the asked size, and the program grid shows one colour per program.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "app/palette_pixels.h"
#include "app/panel_specs.h"
#include "kernels/rungs/vector_add.h"
#include "kernels/studies/vector_add_study.h"
#include "test_util.h"
#include "viz/heatmap.h"
#include "viz/png.h"

namespace kl {
namespace {

using test::palette_colours_present;

void shot(const std::string& args, const std::string& file, std::vector<uint8_t>& rgba, int& w, int& h,
          const char* backend = "cpu", std::string* text = nullptr) {
  std::string out;
  ASSERT_EQ(test::run_cli("shot vector-add --backend " + std::string(backend) + " --out " + file + " " + args, &out), 0)
      << out;
  if (text) *text = out;
  ASSERT_TRUE(viz::read_png(file, rgba, w, h)) << file;
}

TEST(VectorAddPanel, OneColourPerProgram) {
  struct Case {
    const char* sets;
    int programs;
  } cases[] = {{"--set n=1000 --set block_size=256", 4}, {"--set n=33 --set block_size=32", 2},
               {"--set n=100 --set block_size=32", 4}, {"--set n=1024 --set block_size=128", 8}};
  for (const Case& c : cases) {
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    shot(std::string("--size 1200x800 ") + c.sets, test::tmp_dir() + "/va.png", rgba, w, h);
    ASSERT_EQ(w, 1200);
    ASSERT_EQ(h, 800);
    EXPECT_EQ(palette_colours_present(rgba, 40), c.programs) << c.sets;
  }
}

TEST(VectorAddPanel, AskedSizeAndNotBlank) {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  shot("--size 800x600 --set n=1048576 --set block_size=1024", test::tmp_dir() + "/va-large.png", rgba, w, h);
  ASSERT_EQ(w, 800);
  ASSERT_EQ(h, 600);
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4)
    colours.insert(uint32_t(rgba[i]) << 16 | uint32_t(rgba[i + 1]) << 8 | rgba[i + 2]);
  EXPECT_GT(colours.size(), 20u);
}

// 1024 programs: the palette's twelve colours by pid mod 12, keyed, so neighbouring programs always differ
// (on a sequential scale 1024 pids read as a smooth gradient of values: issue 27's tour 02), and no
// viridis ramp.
TEST(VectorAddPanel, ManyProgramsCycleThePaletteNotAColourRamp) {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  shot("--size 1400x900 --set n=1048576 --set block_size=1024", test::tmp_dir() + "/va-1024.png", rgba, w, h);
  EXPECT_EQ(palette_colours_present(rgba, 2000), 12) << "every palette colour fills a good share of the grid";
  float mid[3];
  viz::colormap_rgb(0.5f, mid);
  int ramp = 0;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4) {
    bool m = true;
    for (int ch = 0; ch < 3; ++ch) m = m && std::abs(int(rgba[i + ch]) - int(mid[ch] * 255.0f + 0.5f)) <= 6;
    ramp += m;
  }
  EXPECT_LT(ramp, 200) << "the grid is still coloured on the sequential ramp";
}

TEST(VectorAddPanel, FewProgramsGetOneKeyedColourEach) {
  // Up to 12 programs: one palette colour each, and a swatch per pid in the key; 13 programs show the
  // twelve again (pid 12 takes pid 0's colour), keyed as pid mod 12.
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  shot("--size 1200x800 --set n=384 --set block_size=32", test::tmp_dir() + "/va-12.png", rgba, w, h);
  EXPECT_EQ(palette_colours_present(rgba, 40), 12);
  shot("--size 1200x800 --set n=416 --set block_size=32", test::tmp_dir() + "/va-13.png", rgba, w, h);
  EXPECT_EQ(palette_colours_present(rgba, 40), 12);
}

// One spec per parameter: the panel takes the study's list, whose block_size is the rung's spec with
// the panel's declared default (a panel_override naming the kernel's default and range).
TEST(VectorAddPanel, ParametersAreTheStudysBuiltFromTheRungsSpec) {
  test::expect_panel_params_are_the_studys("vector-add");
  const ParamValues v(study::vector_add_params());
  const ParamSpec* b = v.spec("block_size");
  ASSERT_NE(b, nullptr);
  const ParamSpec k = vector_add::param::block_size();
  EXPECT_TRUE(b->is_override());
  EXPECT_EQ(b->kernel_def, k.def);
  EXPECT_EQ(b->kernel_range, k.range_text());
  EXPECT_EQ(b->def, "256");
  EXPECT_EQ(b->help, k.help);
}

TEST(VectorAddPanel, CudaBackendThroughInteropSameColours) {
  KL_REQUIRE_CUDA();
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  std::string text;
  shot("--size 1200x800 --set n=1000 --set block_size=256", test::tmp_dir() + "/va-cuda.png", rgba, w, h, "cuda", &text);
  EXPECT_NE(text.find("CUDA backend"), std::string::npos) << text;
  EXPECT_NE(text.find("CUDA-GL interop: kernels write"), std::string::npos) << text;
  EXPECT_EQ(palette_colours_present(rgba, 40), 4);
  std::vector<uint8_t> cpu;
  shot("--size 1200x800 --set n=1000 --set block_size=256", test::tmp_dir() + "/va-cpu.png", cpu, w, h);
  // The two backends draw the same picture but for the status bar's text.
  size_t differ = 0;
  for (size_t i = 0; i < rgba.size() && i < cpu.size(); ++i) differ += rgba[i] != cpu[i];
  EXPECT_LT(differ, rgba.size() / 20) << "CPU and CUDA pictures differ in " << differ << " bytes";
}

}  // namespace
}  // namespace kl
