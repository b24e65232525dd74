// The Measure view (app/panels/measure_panel.cpp) and its measurements (kernels/measure/measure.h):
//   - `shot measure --set run=1 --set quick=1` on the CPU draws a finished measurement: not blank, the
//     four plot areas, the series' colours, the fusion bars;
//   - `measure --json/--csv` writes files that parse, with the expected columns, the machine, a positive
//     copy bandwidth and GEMM ceiling, and needs no GL context (EGL made unusable for the run);
//   - the worker cancels between measurements, restarts, and joins when destroyed mid-run;
//   - "Peers (recorded)": the recorded table drawn with its ratios coloured ahead and behind (before any
//     run), and the layout audit over it at the smallest and the largest window, at UI scales 1 and 2.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "app/measure_export.h"
#include "app/panel.h"
#include "assets/embedded.h"
#include "kernels/measure/measure.h"
#include "kernels/measure/peers.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

int count_colour(const std::vector<uint8_t>& rgba, int r, int g, int b, int tol) {
  int n = 0;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4)
    n += std::abs(rgba[i] - r) <= tol && std::abs(rgba[i + 1] - g) <= tol && std::abs(rgba[i + 2] - b) <= tol;
  return n;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == sep) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

TEST(MeasurePanel, ShotDrawsAFinishedQuickMeasurementCpu) {
  const std::string file = test::tmp_dir() + "/measure-cpu.png";
  std::string out;
  ASSERT_EQ(test::run_cli("shot measure --backend cpu --size 1400x900 --set run=1 --set quick=1 --out " + file, &out), 0)
      << out;
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(viz::read_png(file, rgba, w, h));
  ASSERT_EQ(w, 1400);
  ASSERT_EQ(h, 900);
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4) colours.insert(uint32_t(rgba[i]) << 16 | rgba[i + 1] << 8 | rgba[i + 2]);
  EXPECT_GT(colours.size(), 50u) << "looks blank";
  // The plot areas' background (viz/plot.cpp kFrameBg): the bandwidth and two bar plots of the first tab
  // (FlashAttention against the GEMM is the next tab).
  EXPECT_GT(count_colour(rgba, 20, 21, 24, 0), 200000) << "plot areas missing";
  EXPECT_GT(count_colour(rgba, 120, 215, 120, 2), 3000) << "no ReLU+dropout fused bar / line";
  EXPECT_GT(count_colour(rgba, 240, 165, 70, 2), 3000) << "no softmax fixed bar / line";
  EXPECT_GT(count_colour(rgba, 90, 180, 240, 2), 300) << "no vector-add / flash line";
  EXPECT_GT(count_colour(rgba, 235, 235, 235, 2), 150) << "no copy ceiling";  // its dots and legend swatch
}

TEST(MeasurePanel, ARatioAboveTheCeilingIsNotColouredAsSuccess) {
  measure::Point p;
  for (bool launch_bound : {false, true})
    for (double ratio : {1.0001, 1.09, 1.17, 1.36}) {  // the quick sizes' warm readings that were green
      p.ratio = ratio, p.launch_bound = launch_bound;
      EXPECT_NE(app::verdict_colour(measure::verdict(p)), app::kSuccessColour) << ratio;
      EXPECT_EQ(app::verdict_colour(measure::verdict(p)), app::kAboveCeilingColour) << ratio;
    }
  p.ratio = 0.95, p.launch_bound = true;
  EXPECT_NE(app::verdict_colour(measure::verdict(p)), app::kSuccessColour) << "launch-bound is not success";
  p.launch_bound = false;
  EXPECT_EQ(app::verdict_colour(measure::verdict(p)), app::kSuccessColour);
  // Five verdicts, five colours.
  const std::set<unsigned> colours = {app::kSuccessColour, app::kFairColour, app::kLowColour, app::kAboveCeilingColour,
                                      app::kLaunchBoundColour};
  EXPECT_EQ(colours.size(), 5u);
}

TEST(MeasurePanel, FusionTitleStatesTheSpeedupAndWhetherItIsLaunchBound) {
  app::FusionPair f;
  f.kernel = "relu-dropout", f.size = double(1 << 20), f.fused_ms = 0.00386, f.unfused_ms = 0.00608;
  f.launch_bound = true;
  char speedup[16];
  std::snprintf(speedup, sizeof speedup, "%.2fx", f.unfused_ms / f.fused_ms);
  EXPECT_EQ(app::fusion_title(f), std::string("ReLU+dropout, N=2^20: ") + speedup + " (launch-bound)");
  f.launch_bound = false, f.kernel = "softmax", f.size = double(1 << 26);
  EXPECT_EQ(app::fusion_title(f), std::string("softmax, N=2^26: ") + speedup);
}

// The panel text's numbers (assets/text/measure.md) against the code they describe.
TEST(MeasurePanel, TheTextsNumbersAreTheCodes) {
  const std::string text(assets::find("text/measure.md"));
  ASSERT_FALSE(text.empty());
  measure::Options o;
  o.backend = Backend::Cuda, o.quick = true;
  const std::vector<int64_t> quick = measure::sizes(o);
  auto has = [&](const std::string& s) { EXPECT_NE(text.find(s), std::string::npos) << "the text lacks: " << s; };
  has("quick sizes (2^" + std::to_string(int(std::log2(double(quick.front())))) + " to 2^" +
      std::to_string(int(std::log2(double(quick.back())))) + " floats");
  const double mib = 1024.0 * 1024.0;
  char pair[64];
  std::snprintf(pair, sizeof pair, "%.1f to %.0f MiB per buffer pair", 8.0 * double(quick.front()) / mib,
                8.0 * double(quick.back()) / mib);
  has(pair);
  const int64_t l2 = DeviceInfo{}.l2_bytes;  // the H200's, as the text names it
  has(std::to_string(l2 / (1024 * 1024)) + " MiB L2 seven times or more");
  EXPECT_GE(double(l2) / (8.0 * double(quick.back())), 7.0);
  EXPECT_LT(double(l2) / (8.0 * double(quick.back())), 8.0);
  has("span four times the L2");
  EXPECT_GE(double(measure::bandwidth_sets(l2, quick.front())) * 8.0 * double(quick.front()), 4.0 * double(l2));
  has("less than ten times that");
  EXPECT_EQ(measure::kLaunchBoundFactor, 10.0);
  has("a 4-byte copy");
}

// One spec per parameter: the view's two flags are declared once (kernels/measure/measure.h); the panel's
// list is that one and its tab (`view`), and `measure --quick` shows quick's help.
TEST(MeasurePanel, ParamsAreTheMeasureLibrarys) {
  std::unique_ptr<app::Panel> panel;
  for (auto& p : app::make_panels())
    if (p->id() == "measure") panel = std::move(p);
  ASSERT_TRUE(panel);
  const std::vector<ParamSpec> want = measure::params(), got = panel->params().specs();
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(got[2].name, "view");
  EXPECT_EQ(got[2].choices, (std::vector<std::string>{"fusion", "flash", "ceiling", "peers"}));
  EXPECT_EQ(got[2].def, "fusion");
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(int(got[i].kind), int(ParamSpec::Kind::Bool));
    EXPECT_EQ(int(got[i].kind), int(want[i].kind));
    EXPECT_EQ(got[i].def, want[i].def);
    EXPECT_EQ(got[i].help, want[i].help);
    EXPECT_FALSE(got[i].is_override());
  }
  EXPECT_EQ(got[0].name, measure::param::quick().name);
  EXPECT_EQ(got[1].name, measure::param::run().name);
  std::string out;
  EXPECT_EQ(test::run_cli("measure --help", &out), 0) << out;
  EXPECT_NE(out.find(measure::param::quick().help), std::string::npos) << out;
}

TEST(MeasurePanel, ShotWithoutRunShowsNoPlotsYet) {
  const std::string file = test::tmp_dir() + "/measure-empty.png";
  std::string out;
  ASSERT_EQ(test::run_cli("shot measure --backend cpu --out " + file, &out), 0) << out;
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(viz::read_png(file, rgba, w, h));
  EXPECT_LT(count_colour(rgba, 120, 215, 120, 2), 50) << "bars drawn without a measurement";
  EXPECT_LT(count_colour(rgba, 20, 21, 24, 0), 1000) << "plots drawn without a measurement";
}

// The recorded peers are drawn before any run: the ratios in the ahead and behind colours (the recorded
// forward has both: ahead of PyTorch flash everywhere, behind cuDNN at some shapes: four of the fifteen rows
// drawn at 1280x720 in the record of 2026-12-06, about 5 pixels of glyph cores each). Neither colour is drawn
// anywhere else in the view before a run.
TEST(MeasurePanel, RecordedPeersAreDrawnWithAheadAndBehindColours) {
  const std::string file = test::tmp_dir() + "/measure-peers.png";
  std::string out;
  ASSERT_EQ(test::run_cli("shot measure --backend cpu --size 1280x720 --out " + file, &out), 0) << out;
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(viz::read_png(file, rgba, w, h));
  auto rgb = [](unsigned c, int i) { return int((c >> (8 * i)) & 0xFF); };
  const int ahead = count_colour(rgba, rgb(app::kAheadColour, 0), rgb(app::kAheadColour, 1), rgb(app::kAheadColour, 2), 2);
  const int behind = count_colour(rgba, rgb(app::kBehindColour, 0), rgb(app::kBehindColour, 1), rgb(app::kBehindColour, 2), 2);
  EXPECT_GT(ahead, 40) << "no ratio drawn as ahead";  // none without the section (text: only its glyphs' cores match)
  EXPECT_GT(behind, 10) << "no ratio drawn as behind";
  // The colours follow the reading: 1.00 as shown is ahead, below it behind.
  EXPECT_EQ(app::standing_colour(1.10, 2), app::kAheadColour);
  EXPECT_EQ(app::standing_colour(0.996, 2), app::kAheadColour);
  EXPECT_EQ(app::standing_colour(0.74, 2), app::kBehindColour);
  EXPECT_NE(app::kAheadColour, app::kBehindColour);
}

// The section passes the layout audit where it is on screen (no run: it is at the top), from the smallest
// window to 4K, at UI scales 1 and 2: nothing cut, outside its window or overlapping; the long tables scroll.
TEST(MeasurePanel, RecordedPeersPassTheLayoutAudit) {
  for (const char* size : {"1280x720", "1920x1080", "3840x2160"})
    for (const char* scale : {"1", "2"}) {
      std::string out;
      const int code = test::run_cli(std::string("shot measure --chrome --layout-report --backend cpu --frames 3 --size ") +
                                         size + " --ui-scale " + scale,
                                     &out);
      EXPECT_NE(out.find("layout report: 0 findings over 1 view"), std::string::npos) << size << " x" << scale << "\n" << out;
      EXPECT_EQ(code, 0) << out;
    }
}

TEST(MeasureCommand, JsonAndCsvParseWithTheMachineAndNeedNoGl) {
  const std::string json = test::tmp_dir() + "/measure.json", csv = test::tmp_dir() + "/measure.csv";
  std::remove(json.c_str());
  std::remove(csv.c_str());
  std::string out;
  // No EGL vendor can load: a command that needed a GL context would fail here.
  ASSERT_EQ(test::run_shell("__EGL_VENDOR_LIBRARY_FILENAMES=/nonexistent.json " + std::string(KL_BINARY) +
                                " measure --backend cpu --quick --json " + json + " --csv " + csv,
                            &out),
            0)
      << out;
  EXPECT_NE(out.find("CPU figures"), std::string::npos) << out;

  const nlohmann::json j = nlohmann::json::parse(read_all(json));
  const auto& m = j.at("machine");
  EXPECT_FALSE(m.at("device").get<std::string>().empty());
  EXPECT_EQ(m.at("backend"), "cpu");
  EXPECT_EQ(m.at("date").get<std::string>().size(), 20u) << m.at("date");  // 2026-11-30T13:05:12Z
  EXPECT_TRUE(m.at("cpu_figures").get<bool>());
  EXPECT_GT(m.at("copy_gbs").get<double>(), 0.0);
  EXPECT_GT(m.at("gemm_tflops").get<double>(), 0.0);
  EXPECT_LT(m.at("gemm_max_rel_err").get<double>(), 1e-4);
  EXPECT_TRUE(j.at("complete").get<bool>());
  EXPECT_FALSE(j.at("cancelled").get<bool>());
  std::set<std::string> series;
  for (const auto& p : j.at("points")) {
    series.insert(p.at("kernel").get<std::string>() + " " + p.at("variant").get<std::string>());
    EXPECT_GT(p.at("ms").get<double>(), 0.0) << p.dump();
    if (p.at("section") == "bandwidth") EXPECT_GT(p.at("gbs").get<double>(), 0.0) << p.dump();
    else EXPECT_GT(p.at("tflops").get<double>(), 0.0) << p.dump();
    EXPECT_EQ(p.at("sets").get<int>(), 1) << "the CPU backend times what it finds: " << p.dump();
    EXPECT_FALSE(p.at("launch_bound").get<bool>()) << p.dump();
    if (p.at("ratio").get<double>() > 1) EXPECT_EQ(p.at("verdict"), "above the ceiling") << p.dump();
  }
  for (const char* s : {"copy memcpy", "vector-add fast", "relu-dropout fused", "relu-dropout unfused", "softmax fixed",
                        "softmax three_pass", "flash-attention teaching d=64"})
    EXPECT_TRUE(series.count(s)) << "missing series " << s;
  ASSERT_EQ(j.at("fusion").size(), 2u);
  for (const auto& f : j.at("fusion")) EXPECT_GT(f.at("speedup").get<double>(), 0.0);

  std::ifstream c(csv);
  std::string line;
  ASSERT_TRUE(std::getline(c, line));
  EXPECT_EQ(line, app::kCsvColumns);
  const std::vector<std::string> cols = split(line, ',');
  size_t copy_col = 0, backend_col = 0, gbs_col = 0;
  for (size_t i = 0; i < cols.size(); ++i) {
    if (cols[i] == "copy_gbs") copy_col = i;
    if (cols[i] == "backend") backend_col = i;
    if (cols[i] == "gbs") gbs_col = i;
  }
  ASSERT_GT(copy_col, 0u);
  size_t rows = 0;
  while (std::getline(c, line)) {
    const std::vector<std::string> f = split(line, ',');
    ASSERT_EQ(f.size(), cols.size()) << line;
    EXPECT_GT(std::atof(f[copy_col].c_str()), 0.0) << line;
    EXPECT_EQ(f[backend_col], "cpu");
    if (f[0] == "bandwidth") EXPECT_GT(std::atof(f[gbs_col].c_str()), 0.0) << line;
    ++rows;
  }
  EXPECT_EQ(rows, j.at("points").size());
}

TEST(MeasureCommand, UnwritableJsonExitsTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("measure --backend cpu --quick --json /nonexistent-dir/m.json", &out), 2) << out;
  EXPECT_NE(out.find("--json"), std::string::npos) << out;
}

// Polls until `done` (a guard against a hang, not a time limit on the work).
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 600000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(MeasureWorker, CancelStopsBetweenMeasurements) {
  measure::Worker w;
  measure::Options o;
  o.backend = Backend::Cpu;
  o.quick = false;  // the long run
  w.start(o);
  ASSERT_TRUE(eventually([&] { return w.snapshot().steps_done >= 2 || !w.running(); }));
  w.cancel();
  w.wait();
  EXPECT_FALSE(w.running());
  const measure::Results r = w.snapshot();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.finished);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_GE(r.steps_done, 2);
  EXPECT_LT(r.steps_done, r.steps_total);
  EXPECT_GE(r.points.size(), 2u) << "the measurements made before the cancel are kept";
  EXPECT_EQ(w.current(), "");

  // The same worker runs again, to the end.
  o.quick = true;
  w.start(o);
  w.wait();
  const measure::Results r2 = w.snapshot();
  EXPECT_TRUE(r2.finished) << r2.error;
  EXPECT_FALSE(r2.cancelled);
  EXPECT_EQ(r2.steps_done, r2.steps_total);
  EXPECT_EQ(r2.steps_total, int(measure::plan(o).size()));
}

TEST(MeasureWorker, CancelBeforeTheFirstStepRunsNothing) {
  std::atomic<bool> cancel{true};
  measure::Options o;
  const measure::Results r = measure::run(o, &cancel);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.steps_done, 0);
  EXPECT_TRUE(r.points.empty());
}

TEST(MeasureWorker, DestroyedMidRunJoins) {
  auto w = std::make_unique<measure::Worker>();
  measure::Options o;
  w->start(o);
  w.reset();  // cancels and joins; a detached thread would crash or hang the test
  SUCCEED();
}

TEST(MeasureCommand, CudaNumbersAgainstTheGemmCeiling) {
  KL_REQUIRE_CUDA();
  const std::string json = test::tmp_dir() + "/measure-cuda.json";
  std::string out;
  ASSERT_EQ(test::run_cli("measure --backend cuda --quick --json " + json, &out), 0) << out;
  std::printf("%s", out.c_str());
  const nlohmann::json j = nlohmann::json::parse(read_all(json));
  const auto& m = j.at("machine");
  EXPECT_EQ(m.at("backend"), "cuda");
  EXPECT_FALSE(m.at("cpu_figures").get<bool>());
  EXPECT_GT(m.at("copy_gbs").get<double>(), 0.0);
  EXPECT_GT(m.at("gemm_tflops").get<double>(), 0.0);
  EXPECT_LT(m.at("gemm_max_rel_err").get<double>(), 1e-3);
  EXPECT_NE(m.at("gemm").get<std::string>().find("cuBLAS"), std::string::npos);
  int flash = 0;
  for (const auto& p : j.at("points"))
    if (p.at("section") == "compute") {
      ++flash;
      EXPECT_GT(p.at("ratio").get<double>(), 0.0) << p.dump();
    }
  EXPECT_GT(flash, 0);
}

TEST(MeasurePanel, ShotDrawsAFinishedQuickMeasurementCuda) {
  KL_REQUIRE_CUDA();
  const std::string file = test::tmp_dir() + "/measure-cuda.png";
  std::string out;
  ASSERT_EQ(test::run_cli("shot measure --backend cuda --set run=1 --set quick=1 --out " + file, &out), 0) << out;
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(viz::read_png(file, rgba, w, h));
  EXPECT_GT(count_colour(rgba, 20, 21, 24, 0), 200000) << "plot areas missing";
  EXPECT_GT(count_colour(rgba, 120, 215, 120, 2), 3000) << "no fused bar";
}

}  // namespace
}  // namespace kl
