// `animate` (app/animate.*): the values --vary walks, refusals before any frame (out of range, malformed,
// past the frame limit), and GIFs decoded with giflib: one frame per value at the asked size, frames that
// differ where the parameter changes the view, and heatmap colours exactly those `shot` draws.
#include "app/animate.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "app/gif_frames.h"
#include "app/palette_pixels.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"
#include "viz/heatmap.h"
#include "viz/png.h"

namespace kl {
namespace {

constexpr int kStatusRows = 40;  // the status bar at the bottom (backend, renderer, frame time)

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

uint32_t rgb_at(const std::vector<uint8_t>& rgba, size_t i) {
  return uint32_t(rgba[4 * i]) << 16 | uint32_t(rgba[4 * i + 1]) << 8 | rgba[4 * i + 2];
}

ParamValues params() {
  return ParamValues({int_param("n", 1, 5000, 10, ""), pow2_param("block", 32, 4096, 256, ""),
                      float_param("p", 0, 1, 0.5, "", true), bool_param("causal", false, ""),
                      choice_param("view", {"a", "b"}, "a", "")});
}

TEST(Vary, ValuesOfEachKind) {
  using V = std::vector<std::string>;
  EXPECT_EQ(app::parse_vary("n=1..5", params()).values, (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(app::parse_vary("n=10..1:4", params()).values, (V{"10", "6", "2"}));
  EXPECT_EQ(app::parse_vary("n=961..1089:16", params()).values.size(), 9u);
  EXPECT_EQ(app::parse_vary("block=32..256", params()).values, (V{"32", "64", "128", "256"}));
  EXPECT_EQ(app::parse_vary("block=1024..64:4", params()).values, (V{"1024", "256", "64"}));
  EXPECT_EQ(app::parse_vary("p=0..0.9:0.1", params()).values,
            (V{"0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}));
  EXPECT_EQ(app::parse_vary("causal=0..1", params()).values, (V{"0", "1"}));
  EXPECT_EQ(app::parse_vary("n=7..7", params()).key, "n");
}

void expect_refusal(const std::string& vary, const std::string& needle) {
  try {
    app::parse_vary(vary, params());
    ADD_FAILURE() << vary << ": accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << vary << ": " << e.what();
  }
}

TEST(Vary, RefusalsNameTheTextAndTheRule) {
  const std::string form = "expected KEY=FROM..TO[:STEP]";
  for (const char* bad : {"n", "n=", "=1..2", "n=1-5", "n=..5", "n=1..", "n=1..5:", "n=a..5", "n=1..5:0",
                          "n=1..5:x", "block=32..256:3", "p=0..0.5", "p=0..0.5:-1", "p=x..0.5:0.1"})
    expect_refusal(bad, std::string("--vary ") + bad + ": ");
  expect_refusal("n=1-5", form);
  expect_refusal("p=0..0.5", "needs a STEP");
  expect_refusal("n=0..5", "--vary n=0: must be integers in [1, 5000]");
  expect_refusal("n=1..5001", "--vary n=5001: must be integers in [1, 5000]");
  expect_refusal("block=32..100", "--vary block=100: must be powers of two in [32, 4096]");
  expect_refusal("p=0..1:0.1", "--vary p=1: must be numbers in [0, 1)");
  expect_refusal("view=0..1", "view is a choice");
  expect_refusal("nope=1..2", "unknown parameter; known: n, block, p, causal, view");
  expect_refusal("n=1..2001", "2001 frames; the limit is 2000 frames");
  expect_refusal("p=0..0.9:0.0001", "9001 frames; the limit is 2000 frames");
  EXPECT_EQ(app::parse_vary("n=1..2000", params()).values.size(), 2000u);
}

TEST(Animate, RefusedBeforeAnyFrameWithExit2) {
  const std::string gif = test::tmp_dir() + "/refused.gif";
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"softmax --vary n_cols=0..10", "--vary n_cols=0: must be integers in [1, "},
      {"softmax --vary n_cols=1..100000", "--vary n_cols=100000: must be integers in [1, "},
      {"softmax --vary n_cols=1..4001", "4001 frames; the limit is 2000 frames"},
      {"softmax --vary n_cols=1-5", "--vary n_cols=1-5: no FROM..TO; expected KEY=FROM..TO[:STEP]"},
      {"softmax --vary n_cols:1..5", "--vary n_cols:1..5: expected KEY=FROM..TO[:STEP]"},
      {"relu-dropout --vary p=0..1:0.25", "--vary p=1: must be numbers in [0, 1)"},
      {"softmax --vary n_cols=1..5 --set n_cols=7", "n_cols is the parameter --vary walks"},
      {"softmax --vary n_cols=1..5 --set rows=0", "--set rows=0: must be integers in [1, "},
      {"softmax --vary n_cols=1..5 --fps 0", "--fps=0 is out of range: allowed [1, 50]"},
      {"nopanel --vary n=1..5", "animate nopanel: unknown panel; known: vector-add"},
  };
  std::string unwritable;
  EXPECT_EQ(test::run_cli("animate softmax --vary n_cols=1..2 --backend cpu --size 320x240 --out /nonexistent-dir/x.gif",
                          &unwritable),
            2);
  EXPECT_NE(unwritable.find("/nonexistent-dir/x.gif: cannot write ("), std::string::npos) << unwritable;
  for (const Case& c : cases) {
    std::remove(gif.c_str());
    std::string out;
    EXPECT_EQ(test::run_cli("animate " + c.args + " --backend cpu --size 320x240 --out " + gif, &out), 2) << c.args;
    EXPECT_NE(out.find(c.needle), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
    EXPECT_FALSE(exists(gif)) << c.args << ": a GIF was written";
  }
}

// Renders `args` into a GIF and decodes it.
test::GifFrames animate(const std::string& args, const std::string& name, std::string* out,
                        const std::string& backend = "cpu") {
  const std::string gif = test::tmp_dir() + "/" + name;
  std::remove(gif.c_str());
  EXPECT_EQ(test::run_cli("animate " + args + " --backend " + backend + " --out " + gif, out), 0) << *out;
  test::GifFrames g = test::read_gif(gif);
  EXPECT_TRUE(g.error.empty()) << g.error;
  return g;
}

std::vector<uint8_t> shot(const std::string& args, const std::string& name, const std::string& backend = "cpu") {
  const std::string png = test::tmp_dir() + "/" + name;
  std::string out;
  EXPECT_EQ(test::run_cli("shot " + args + " --backend " + backend + " --out " + png, &out), 0) << out;
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  EXPECT_TRUE(viz::read_png(png, rgba, w, h)) << png;
  return rgba;
}

size_t differing_pixels(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int w, int rows) {
  size_t n = 0;
  for (size_t i = 0; i < size_t(w) * size_t(rows); ++i) n += rgb_at(a, i) != rgb_at(b, i);
  return n;
}

// The vector-add tail animation on `backend` against `shot` on the same backend. At 1024x768 the whole
// panel is in view: the pid key's swatches and the grid's four program rows (n = 784..1024 with
// BLOCK_SIZE 256 is 4 programs, so the panel colours by the 12-colour categorical palette, not the
// sequential scale it takes past 12 programs).
void check_vector_add_tail(const std::string& backend) {
  constexpr int W = 1024, H = 768;
  std::string out;
  const test::GifFrames g = animate("vector-add --vary n=784..1024:80 --set block_size=256 --size 1024x768 --fps 5",
                                    "va-" + backend + ".gif", &out, backend);
  if (backend == "cuda") EXPECT_NE(out.find("CUDA backend"), std::string::npos) << out;
  ASSERT_EQ(g.rgba.size(), 4u) << out;  // n = 784, 864, 944, 1024
  EXPECT_EQ(g.width, W);
  EXPECT_EQ(g.height, H);
  EXPECT_TRUE(g.loops);
  for (int d : g.delay_cs) EXPECT_EQ(d, 20);
  EXPECT_NE(out.find("4 frames"), std::string::npos) << out;
  for (size_t k = 1; k < g.rgba.size(); ++k)
    EXPECT_GT(differing_pixels(g.rgba[k - 1], g.rgba[k], W, H - kStatusRows), 1000u) << "frame " << k;

  // Frame 2 (n=944) against `shot` at the same settings: every pixel of a program's colour is exact.
  const std::vector<uint8_t> png =
      shot("vector-add --set n=944 --set block_size=256 --size 1024x768", "va944-" + backend + ".png", backend);
  ASSERT_EQ(png.size(), g.rgba[2].size());
  EXPECT_EQ(test::palette_colours_present(png, 40), 4) << "the shot shows other than one colour per program";
  EXPECT_EQ(test::palette_colours_present(g.rgba[2], 40), 4) << "the GIF frame shows other than one colour per program";
  size_t palette_pixels = 0, equal = 0;
  for (size_t i = 0; i < size_t(W) * (H - kStatusRows); ++i) {
    const uint32_t want = rgb_at(png, i), got = rgb_at(g.rgba[2], i);
    equal += want == got;
    for (int k = 0; k < 12; ++k) {
      float c[3];
      viz::categorical_rgb(k, c);
      const uint32_t pc = uint32_t(c[0] * 255.0f + 0.5f) << 16 | uint32_t(c[1] * 255.0f + 0.5f) << 8 |
                          uint32_t(c[2] * 255.0f + 0.5f);
      bool near = true;
      for (int s = 0; s < 24; s += 8) near = near && std::abs(int(want >> s & 255) - int(pc >> s & 255)) <= 3;
      if (!near) continue;
      ++palette_pixels;
      ASSERT_EQ(got, want) << "pixel " << i << ": the program colour changed in the GIF";
    }
  }
  EXPECT_GT(palette_pixels, 20000u) << "the programs' rows are not where the shot has them";
  EXPECT_GT(double(equal) / (double(W) * (H - kStatusRows)), 0.95);
}

TEST(Animate, OneFramePerValueAtTheSizeEachDifferentWithTheCategoricalColoursOfShot) { check_vector_add_tail("cpu"); }

TEST(Animate, CudaBackendTheSameAgainstShotOnTheGpu) {
  KL_REQUIRE_CUDA();
  check_vector_add_tail("cuda");
}

TEST(Animate, ContinuousHeatmapColoursOfShotKeptExactWhereTheyCoverMostPixels) {
  std::string out;
  const test::GifFrames g = animate("softmax --vary n_cols=1009..1025:16 --size 640x480", "sm.gif", &out);
  ASSERT_EQ(g.rgba.size(), 2u) << out;
  EXPECT_GT(differing_pixels(g.rgba[0], g.rgba[1], 640, 480 - kStatusRows), 1000u)
      << "n_cols 1009 -> 1025 should change the heatmaps and the verdict";
  const std::vector<uint8_t> png = shot("softmax --set n_cols=1009 --size 640x480", "sm1009.png");
  ASSERT_EQ(png.size(), g.rgba[0].size());
  std::map<uint32_t, size_t> count;
  for (size_t i = 0; i < png.size() / 4; ++i) ++count[rgb_at(png, i)];
  std::vector<std::pair<size_t, uint32_t>> by_count;
  for (const auto& [c, n] : count) by_count.emplace_back(n, c);
  std::sort(by_count.rbegin(), by_count.rend());
  ASSERT_GT(by_count.size(), 256u) << "this frame needs the quantiser";
  std::map<uint32_t, bool> kept;  // the 150 colours covering the most pixels (the writer keeps 192)
  for (size_t k = 0; k < 150; ++k) kept[by_count[k].second] = true;
  size_t equal = 0, checked = 0;
  for (size_t i = 0; i < png.size() / 4; ++i) {
    const uint32_t want = rgb_at(png, i), got = rgb_at(g.rgba[0], i);
    equal += want == got;
    if (!kept.count(want)) continue;
    ++checked;
    ASSERT_EQ(got, want) << "pixel " << i;
  }
  EXPECT_GT(checked, png.size() / 4 / 2);
  EXPECT_GT(double(equal) / double(png.size() / 4), 0.85);
}

TEST(Animate, ProgressLineOnLongRuns) {
  std::string out;
  const test::GifFrames g = animate("vector-add --vary n=1..20 --size 320x240", "progress.gif", &out);
  EXPECT_EQ(g.rgba.size(), 20u);
  EXPECT_NE(out.find("animate: frame 2/20 (n=2)"), std::string::npos) << out;
  EXPECT_NE(out.find("animate: frame 20/20 (n=20)"), std::string::npos) << out;
}

}  // namespace
}  // namespace kl
