// "Inside the fast kernel" (app/panels/timeline_view.*, app/cli/timeline.cpp) on the CPU backend, which cannot
// run the Hopper kernels and draws the recording made on the GPU machine (docs/perf/timeline-h200.json):
//   - `timeline --from FILE --out PNG` draws each recording (the phases' colours in the picture, the notice on
//     stdout), and the layout audit finds nothing at 1280x720 and at 3840x2160 with UI scale 2;
//   - bad files and options are refused with one line naming the field or option (exit 2);
//   - rungs 5 and 6 show the view in their tab (`--set view=inside`, `--set recording=NAME`), and the layout
//     audit of the panels in the window's frame finds nothing at both sizes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernels/studies/timeline_study.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

namespace ts = timeline_study;

std::string source_root() {
  const std::string here = __FILE__;  // .../tests/app/test_timeline_view.cpp
  std::string root = here.substr(0, here.rfind("/tests/"));
  if (root.empty() || root[0] != '/') {
    const std::string bin = KL_BINARY;
    root = bin.substr(0, bin.rfind('/')) + "/" + root;
  }
  return root;
}
std::string recorded() { return source_root() + "/" + ts::kSourcePath; }

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void expect_refused(const std::string& args, const std::string& needle) {
  std::string out;
  const int code = test::run_cli(args, &out);
  EXPECT_EQ(code, 2) << args << "\n" << out;
  EXPECT_NE(out.find(needle), std::string::npos) << args << "\nexpected '" << needle << "' in:\n" << out;
  EXPECT_EQ(count_lines(out), 1) << args << ": more than one line:\n" << out;
}

struct Image {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
};
Image read(const std::string& file) {
  Image im;
  EXPECT_TRUE(viz::read_png(file, im.rgba, im.w, im.h)) << file;
  return im;
}
int count(const Image& im, int r, int g, int b) {
  int n = 0;
  for (size_t i = 0; i + 3 < im.rgba.size(); i += 4)
    n += std::abs(im.rgba[i] - r) <= 2 && std::abs(im.rgba[i + 1] - g) <= 2 && std::abs(im.rgba[i + 2] - b) <= 2;
  return n;
}
// The view's colours (app/panels/timeline_view.cpp): the softmax, issuing S, the mark of a product in flight.
int softmax_px(const Image& im) { return count(im, 246, 204, 70); }
int issue_s_px(const Image& im) { return count(im, 96, 170, 255); }
int mark_px(const Image& im) { return count(im, 238, 238, 238); }

TEST(TimelineView, EveryRecordingDrawsFromTheFileWithItsNotice) {
  const timeline::File& f = ts::embedded();
  for (size_t i = 0; i < f.recordings.size(); ++i) {
    const std::string png = test::test_file("rec" + std::to_string(i) + ".png");
    std::string out;
    ASSERT_EQ(test::run_cli("timeline --backend cpu --from " + recorded() + " --recording " + std::to_string(i) +
                                " --size 1280x720 --out " + png,
                            &out),
              0)
        << out;
    EXPECT_NE(out.find(ts::notice(f.recordings, int(i))), std::string::npos) << out;
    const Image im = read(png);
    EXPECT_EQ(im.w, 1280);
    EXPECT_EQ(im.h, 720);
    EXPECT_GT(softmax_px(im), 2000) << png;  // the softmax's phases fill a good part of the warpgroups' lanes
    EXPECT_GT(issue_s_px(im), 100) << png;
    EXPECT_GT(mark_px(im), 400) << png;  // products in flight under the warpgroups' lanes
  }
}

TEST(TimelineView, TheWindowZoomsTheLanes) {
  // The default window (four K/V steps) against the whole span: far more phases per pixel, so far less of
  // each one's label, and the softmax still dominating the warpgroups' columns.
  const std::string a = test::test_file("steady.png"), b = test::test_file("whole.png"), c = test::test_file("zoom.png");
  std::string out;
  ASSERT_EQ(test::run_cli("timeline --backend cpu --from " + recorded() + " --recording 1 --out " + a, &out), 0) << out;
  ASSERT_EQ(test::run_cli("timeline --backend cpu --from " + recorded() + " --recording 1 --window 0..132 --out " + b, &out), 0)
      << out;
  // Both warpgroups in their softmax of K/V step 2 across the whole width (warpgroup 0's from 7.61 to 8.51 µs,
  // warpgroup 1's from 8.28 to 8.98 µs after CTA 0's start, in the recording of 2026-12-06's tenth session;
  // a new recording moves them: the test then names its own window).
  ASSERT_EQ(test::run_cli("timeline --backend cpu --from " + recorded() + " --recording 1 --window 8.31..8.48 --out " + c, &out), 0)
      << out;
  const Image steady = read(a), whole = read(b), zoom = read(c);
  EXPECT_GT(softmax_px(whole), 1000);
  EXPECT_GT(softmax_px(zoom), 2 * softmax_px(steady)) << "zoomed into one softmax, its colour fills a lane";
}

TEST(TimelineView, LayoutAuditFindsNothingAtBothSizes) {
  const timeline::File& f = ts::embedded();
  for (size_t i = 0; i < f.recordings.size(); ++i)
    for (const char* look : {"--size 1280x720", "--size 3840x2160 --ui-scale 2"}) {
      std::string out;
      const int code = test::run_cli("timeline --backend cpu --from " + recorded() + " --recording " + std::to_string(i) +
                                         " --ctas " + std::to_string(f.recordings[i].ctas[0].index) + "," +
                                         std::to_string(f.recordings[i].ctas[1].index) + " --layout-report " + look,
                                     &out);
      EXPECT_NE(out.find("layout report: 0 findings over 1 view"), std::string::npos) << i << " " << look << "\n" << out;
      EXPECT_EQ(code, 0) << out;
    }
}

TEST(TimelineView, BadFilesAndOptionsAreRefusedInOneLine) {
  const std::string png = " --out " + test::test_file("never.png");
  const std::string from = "timeline --backend cpu --from " + recorded();
  expect_refused("timeline --from " + test::test_file("missing.json") + png, "missing.json: cannot read the file");
  const std::string bad = test::write_file(
      "bad.json", "{\"schema\": 1, \"recordings\": [{\"kernel\": \"flash-attention\", \"path\": \"wgmma\"}]}");
  expect_refused("timeline --from " + bad + png, bad + ": recordings[0]: missing field \"requested\"");
  std::string text;
  {
    std::ifstream in(recorded());
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  const std::string phase = test::write_file("phase.json", test::replaced(text, "[\"softmax\", 0, 0,", "[\"softmix\", 0, 0,"));
  expect_refused("timeline --from " + phase + png, ".events[7][0]: unknown phase \"softmix\"");
  expect_refused(from + " --recording 9" + png, "--recording=9 is out of range: allowed [0, 5]");
  expect_refused(from + " --ctas 5" + png, "--ctas=5 is out of range: allowed the recorded CTAs: 0, 66, 131");
  expect_refused(from + " --window 5..2" + png, "--window=5..2 is out of range: allowed START..END in µs");
  expect_refused(from + " --window 5" + png, "--window=5 is out of range");
  expect_refused(from + " --window 0..900" + png, "--window=0.000..900.000 is out of range: allowed a window inside 0.000..");
  expect_refused(from + " --ui-scale 9" + png, "--ui-scale");
  expect_refused(from + " flash-attention" + png, "the kernel (flash-attention) is for recording");
  expect_refused(from + " --json x.json" + png, "--json is for recording");
  expect_refused(from + " --set L=1024" + png, "--set is for recording");
  expect_refused(from, "--out FILE.png is required");
  expect_refused("timeline --backend cpu", "the kernel to record (flash-attention or flash-attention-backward), or --from");
  expect_refused("timeline flash-attention --recording 1" + png, "--recording 1: only with --from");
  expect_refused("timeline flash-attention --window x" + png, "--window=x is out of range");
  expect_refused("timeline flash-attention --append" + png, "--append: only with --json FILE");
}

// The panels' section, in the window's frame (sidebar, source pane, status bar).
std::string panel_shot(const std::string& panel, const std::string& sets, const std::string& look, const std::string& png,
                       int* code) {
  std::string out;
  *code = test::run_cli("shot " + panel + " --chrome --layout-report --backend cpu " + look + " " + sets + " --out " + png, &out);
  return out;
}

TEST(TimelineView, RungsFiveAndSixShowItInTheirTab) {
  for (const char* panel : {"flash-attention", "backward"})
    for (const char* look : {"--size 1280x720", "--size 3840x2160 --ui-scale 2"}) {
      const std::string tag = std::string(panel) + (std::string(look).find("1280") != std::string::npos ? "-720" : "-4k");
      int code = 0;
      const std::string open = test::test_file(tag + "-open.png"), closed = test::test_file(tag + "-closed.png");
      std::string out = panel_shot(panel, "--set view=inside", look, open, &code);
      EXPECT_NE(out.find("layout report: 0 findings over 1 view"), std::string::npos) << panel << " " << look << "\n" << out;
      EXPECT_EQ(code, 0) << out;
      out = panel_shot(panel, "", look, closed, &code);
      EXPECT_EQ(code, 0) << out;
      // On its tab, the lanes; on the default tab, none.
      EXPECT_GT(softmax_px(read(open)), 1500) << open;
      EXPECT_GT(mark_px(read(open)), 300) << open;
      EXPECT_EQ(softmax_px(read(closed)), 0) << closed;
    }
  // The other recordings of rung 5, by name.
  for (const char* rec : {"d64", "d128-causal", "d128-wgmma"}) {
    int code = 0;
    const std::string png = test::test_file(std::string(rec) + ".png");
    const std::string out = panel_shot("flash-attention", std::string("--set view=inside --set recording=") + rec, "--size 1280x720", png, &code);
    EXPECT_NE(out.find("layout report: 0 findings over 1 view"), std::string::npos) << rec << "\n" << out;
    EXPECT_GT(softmax_px(read(png)), 1500) << png;
  }
  expect_refused("shot flash-attention --backend cpu --set recording=d96 --out " + test::test_file("never.png"),
                 "--set recording=d96: must be one of d64|d128|d128-causal|d128-wgmma");
}

// The tops of the notice boxes in a picture: each box has an amber bar down its left edge (app/notice.cpp),
// a run of 20 px or more of that colour in one column (the "Notice:" label's glyphs are shorter).
std::vector<int> notice_tops(const Image& im) {
  std::vector<int> tops;
  for (int x = 0; x < im.w && tops.empty(); ++x) {
    int run = 0;
    for (int y = 0; y <= im.h; ++y) {
      const uint8_t* px = y < im.h ? &im.rgba[(size_t(y) * im.w + x) * 4] : nullptr;
      if (px && px[0] == 255 && px[1] == 196 && px[2] == 80) {
        ++run;
        continue;
      }
      if (run >= 20) tops.push_back(y - run);
      run = 0;
    }
  }
  return tops;
}

// On the Timeline tab the panel's notice line, at the top where every panel has it, says what the recording
// shows (rung 5's or 6's study said what the other tabs draw); the view under it draws no second one.
TEST(TimelineView, ItsNoticeIsThePanelsNoticeLine) {
  for (const char* panel : {"flash-attention", "backward"}) {
    int code = 0;
    const std::string png = test::test_file(std::string(panel) + "-notice.png");
    std::string out;
    code = test::run_cli(std::string("shot ") + panel + " --backend cpu --size 1400x900 --set view=inside --out " + png, &out);
    ASSERT_EQ(code, 0) << out;
    const std::vector<int> tops = notice_tops(read(png));
    ASSERT_EQ(tops.size(), 1u) << panel << ": one notice box expected, " << png;
    EXPECT_LT(tops[0], 80) << panel << ": the notice box starts at y = " << tops[0] << ", not at the top";
    // On another tab, the panel's own notice, also one box at the top.
    code = test::run_cli(std::string("shot ") + panel + " --backend cpu --size 1400x900 --out " + png, &out);
    ASSERT_EQ(code, 0) << out;
    EXPECT_EQ(notice_tops(read(png)).size(), 1u) << png;
  }
}

}  // namespace
}  // namespace kl
