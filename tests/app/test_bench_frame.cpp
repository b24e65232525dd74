// `kernel-ladder bench-frame` (app/bench_frame.cpp): a recomputed attention-weight heatmap drawn every
// frame. CPU backend: the upload path only, a few frames, figures printed. CUDA: both paths in one run,
// the interop path really used, the ratio printed. No time thresholds here: the goals are checked by
// reading the printed numbers (bench/gpu_session.sh), not by a test.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(BenchFrame, CpuUploadPathRunsAndSaysSo) {
  const std::string json = test::tmp_dir() + "/bench-frame-cpu.json", png = test::tmp_dir() + "/bench-frame-cpu.png";
  std::string out;
  ASSERT_EQ(test::run_cli("bench-frame --backend cpu --size 256 --frames 4 --json " + json + " --png " + png, &out), 0)
      << out;
  std::printf("%s", out.c_str());
  EXPECT_NE(out.find("only the upload path"), std::string::npos) << out;
  EXPECT_NE(out.find("fps"), std::string::npos) << out;
  const nlohmann::json j = read_json(json);
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_TRUE(j.at("cpu_figures").get<bool>());
  EXPECT_EQ(j.at("size"), 256);
  ASSERT_EQ(j.at("paths").size(), 1u);
  const auto& p = j.at("paths")[0];
  EXPECT_EQ(p.at("path"), "upload");
  EXPECT_EQ(p.at("frames"), 4);
  EXPECT_GT(p.at("fps").get<double>(), 0.0);
  EXPECT_GT(p.at("median_ms").get<double>(), 0.0);
  // The last frame shows the weights: the diagonal (each query attends to its own position) is the
  // colour map's top, the background its bottom.
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(viz::read_png(png, rgba, w, h));
  int bright = 0, dark = 0;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4) {
    bright += rgba[i] > 200 && rgba[i + 1] > 200 && rgba[i + 2] < 80;  // viridis yellow
    dark += rgba[i] > 55 && rgba[i] < 80 && rgba[i + 1] < 30 && rgba[i + 2] > 70 && rgba[i + 2] < 100;  // viridis purple
  }
  EXPECT_GT(bright, 100) << "no diagonal";
  EXPECT_GT(dark, 100000) << "no weight matrix";
}

TEST(BenchFrame, BadSizeExitsTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("bench-frame --backend cpu --size 1", &out), 2) << out;
  EXPECT_NE(out.find("--size"), std::string::npos) << out;
}

TEST(BenchFrame, CudaInteropAgainstUploadInOneRun) {
  KL_REQUIRE_CUDA();
  const std::string json = test::tmp_dir() + "/bench-frame-cuda.json";
  std::string out;
  ASSERT_EQ(test::run_cli("bench-frame --backend cuda --size 4096 --frames 30 --json " + json, &out), 0) << out;
  std::printf("%s", out.c_str());
  EXPECT_NE(out.find("interop path: used"), std::string::npos) << out;
  EXPECT_NE(out.find("ratio upload / interop per frame:"), std::string::npos) << out;
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j.at("paths").size(), 2u);
  EXPECT_EQ(j.at("paths")[0].at("path"), "interop");
  EXPECT_TRUE(j.at("paths")[0].at("interop").get<bool>()) << j.dump(2);
  EXPECT_EQ(j.at("paths")[1].at("path"), "upload");
  EXPECT_FALSE(j.at("paths")[1].at("interop").get<bool>()) << j.dump(2);
  EXPECT_GT(j.at("ratio_upload_over_interop").get<double>(), 0.0);
}

}  // namespace
}  // namespace kl
