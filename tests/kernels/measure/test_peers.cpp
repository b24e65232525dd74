// The recorded peers (kernels/measure/peers.*, docs/perf/h200.json): the embedded file parses and is the
// source tree's; a bad file gets one line naming the field; the table in docs/fast-kernels.md is the one the file
// generates (so they cannot drift) and its sentences on the backward agree with the file; the ratios, the
// ahead/behind reading and the live match; kl_peers_table's --check; bench/record_peers.py's output reads
// back (where python3 is installed).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "assets/embedded.h"
#include "kernels/measure/peers.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

// The source tree's root. __FILE__ may be relative to the build directory: resolve it from there.
std::string source_root() {
  const std::string here = __FILE__;  // .../tests/kernels/measure/test_peers.cpp
  std::string root = here.substr(0, here.rfind("/tests/"));
  if (root.empty() || root[0] != '/') {
    const std::string bin = KL_BINARY;
    root = bin.substr(0, bin.rfind('/')) + "/" + root;
  }
  return root;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string build_dir() {
  const std::string bin = KL_BINARY;
  return bin.substr(0, bin.rfind('/'));
}

std::string collapse_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\n';
    if (space && !out.empty() && out.back() == ' ') continue;
    out += space ? ' ' : c;
  }
  return out;
}

// [SECTION] the embedded file ------------------------------------------------------------------------------
TEST(RecordedPeers, TheEmbeddedFileParsesAndIsTheSourceTrees) {
  const peers::Recorded& r = peers::embedded();
  std::string embedded(assets::find(peers::kEmbeddedName));
  while (!embedded.empty() && embedded.back() == '\0') embedded.pop_back();
  EXPECT_EQ(embedded, read_file(source_root() + "/" + peers::kSourcePath)) << "rebuild: the embedded copy is stale";
  // The caption names what ran (whichever session the file is from): device, date, torch, cuDNN, Triton.
  ASSERT_FALSE(r.torch.empty());
  ASSERT_FALSE(r.cudnn.empty());
  ASSERT_FALSE(r.triton.empty());
  const std::string cap = peers::caption(r);
  EXPECT_EQ(cap.rfind(r.device + ", " + r.date + ", torch " + r.torch + ", cuDNN " + r.cudnn + ", Triton " + r.triton, 0), 0u)
      << cap;
  EXPECT_FALSE(r.quick) << "the recorded results are a full run";
  EXPECT_FALSE(r.harness.empty());
  EXPECT_NE(r.harness.find("bench/peers_common.py"), std::string::npos);
}

// Issue 16's rows: the forward's 24 shapes at d = 64 and 128, d = 256 and the grouped-query rows, each with
// the ladder's figure, PyTorch flash's and cuDNN's; the backward's 24 shapes; vector add and ReLU + dropout
// against Triton and torch.
TEST(RecordedPeers, TheFileHoldsEveryShapeWithEveryPeer) {
  const peers::Recorded& r = peers::embedded();
  const peers::Section* fw = r.find("flash-forward");
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->columns.size(), 3u);
  EXPECT_EQ(fw->columns[1].id, "flash");
  EXPECT_EQ(fw->columns[2].id, "cudnn");
  EXPECT_EQ(fw->unit, "TFLOP/s");
  int by_d[257] = {}, gqa = 0;
  for (const peers::Row& row : fw->rows) {
    SCOPED_TRACE(row.shape);
    EXPECT_TRUE(row.values[0].has_value()) << "the ladder has a figure at every shape";
    EXPECT_TRUE(row.values[1] || row.values[2]) << "at least one peer timed it (a null is a peer's refusal)";
    EXPECT_EQ(row.key.B * row.key.L, 16384);
    EXPECT_EQ(row.key.H * row.key.d, 2048);
    if (row.key.Hkv) ++gqa;
    else ++by_d[row.key.d];
  }
  EXPECT_EQ(by_d[64], 12);
  EXPECT_EQ(by_d[128], 12);
  EXPECT_EQ(by_d[256], 12);
  EXPECT_EQ(gqa, 6);
  const peers::Section* bw = r.find("flash-backward");
  ASSERT_TRUE(bw);
  EXPECT_EQ(bw->rows.size(), 36u);  // d = 64, 128 and 256, 12 shapes each
  EXPECT_EQ(bw->peer_columns(), (std::vector<size_t>{2, 3}));
  const peers::Section* mem = r.find("memory");
  ASSERT_TRUE(mem);
  EXPECT_EQ(mem->unit, "of copy");
  ASSERT_GE(mem->rows.size(), 2u);
  EXPECT_EQ(mem->rows[0].name, "vector add fast");
  EXPECT_EQ(mem->rows[1].name, "ReLU + dropout fused");
  for (const peers::Row& row : mem->rows) EXPECT_EQ(row.gbs.size(), mem->columns.size()) << row.name;
}

// [SECTION] bad files: one line naming the file, the field and what was expected -----------------------------
std::string good_text() { return read_file(source_root() + "/" + peers::kSourcePath); }

std::string error_of(const std::string& text) {
  try {
    peers::parse(text, "bad.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RecordedPeers, ABadFileIsRefusedNamingTheField) {
  ASSERT_EQ(error_of(good_text()), "");
  EXPECT_NE(error_of("{\"schema\": 1,").find("bad.json: not JSON"), std::string::npos);
  auto mutated = [](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::parse(good_text());
    f(j);
    return j.dump();
  };
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string want;
  };
  const Case cases[] = {
      {[](nlohmann::json& j) { j.erase("date"); }, "bad.json: top level: missing field \"date\""},
      {[](nlohmann::json& j) { j["date"] = "1 Dec 2026"; }, "bad.json: date: expected YYYY-MM-DD, got \"1 Dec 2026\""},
      {[](nlohmann::json& j) { j["schema"] = 2; }, "bad.json: top level.schema: expected an integer in [1, 1], got 2"},
      {[](nlohmann::json& j) { j["torch"] = 2.11; }, "bad.json: top level.torch: expected a string or null, got 2.11"},
      {[](nlohmann::json& j) { j["sections"][0]["rows"][3]["values"][1] = "abc"; },
       "bad.json: sections[0].rows[3].values[1]: expected a positive number or null, got \"abc\""},
      {[](nlohmann::json& j) { j["sections"][0]["rows"][3]["values"][2] = -1.5; },
       "bad.json: sections[0].rows[3].values[2]: expected a positive number or null, got -1.5"},
      {[](nlohmann::json& j) { j["sections"][1]["rows"][0]["values"].erase(0); },
       "bad.json: sections[1].rows[0].values: expected 4 entries (one per column), got 3"},
      {[](nlohmann::json& j) { j["sections"][0]["columns"][0]["ours"] = false; },
       "bad.json: sections[0].columns: expected the ladder's column first (\"ours\": true) and at least one peer"},
      {[](nlohmann::json& j) { j["sections"][2]["rows"] = nlohmann::json::array(); },
       "bad.json: sections[2].rows: expected at least one row"},
      {[](nlohmann::json& j) { j["sections"][0]["ratio_digits"] = 9; },
       "bad.json: sections[0].ratio_digits: expected an integer in [1, 4], got 9"},
      {[](nlohmann::json& j) { j["sections"] = nlohmann::json::object(); },
       "bad.json: top level.sections: expected an array, got {}"},
  };
  for (const Case& c : cases) EXPECT_EQ(error_of(mutated(c.edit)), c.want);
}

// A null value is a peer that refused the shape (or a figure not measured): shown as "-", no ratio.
TEST(RecordedPeers, ANullValueReadsAsNotMeasured) {
  nlohmann::json j = nlohmann::json::parse(good_text());
  j["sections"][0]["rows"][0]["values"][2] = nullptr;
  const peers::Recorded r = peers::parse(j.dump(), "x.json");
  const peers::Section& s = r.sections[0];
  EXPECT_FALSE(s.rows[0].values[2].has_value());
  EXPECT_FALSE(peers::ratio(s.rows[0], 2).has_value());
  EXPECT_EQ(peers::format_ratio(s, peers::ratio(s.rows[0], 2)), "-");
  EXPECT_EQ(peers::format_value(s, s.rows[0].values[2]), "-");
  const std::string line = "| B=32 H=32 L=512 d=64 non-causal bf16 | " + peers::format_value(s, s.rows[0].values[0]) + " | " +
                           peers::format_value(s, s.rows[0].values[1]) + " | - | " +
                           peers::format_ratio(s, peers::ratio(s.rows[0], 1)) + " | - |";
  EXPECT_NE(peers::markdown(r).find(line), std::string::npos) << line;
}

// [SECTION] ratios and their reading ----------------------------------------------------------------------
TEST(RecordedPeers, RatiosAreTheLaddersOverThePeersAndAheadIsAsShown) {
  const peers::Section& s = *peers::embedded().find("flash-forward");
  const peers::Row& row = s.rows[0];
  ASSERT_EQ(row.shape, "B=32 H=32 L=512 d=64 non-causal bf16");
  ASSERT_TRUE(row.values[0] && row.values[1] && row.values[2]);
  EXPECT_DOUBLE_EQ(*peers::ratio(row, 1), *row.values[0] / *row.values[1]);
  EXPECT_DOUBLE_EQ(*peers::ratio(row, 2), *row.values[0] / *row.values[2]);
  char want[32];
  std::snprintf(want, sizeof want, "%.2f", *row.values[0] / *row.values[2]);
  EXPECT_EQ(peers::format_ratio(s, peers::ratio(row, 2)), want);
  EXPECT_EQ(peers::format_ratio(s, 290.9 / 394.9), "0.74");
  EXPECT_EQ(peers::format_value(s, 290.94), "290.9");
  EXPECT_TRUE(peers::ahead(1.0, 2));
  EXPECT_TRUE(peers::ahead(0.996, 2)) << "reads 1.00: level counts as ahead";
  EXPECT_FALSE(peers::ahead(0.994, 2));
  EXPECT_FALSE(peers::ahead(0.996, 3));
  EXPECT_EQ(peers::short_shape(row), "d=64 L=512");
  const peers::Row& gqa = s.rows.back();
  EXPECT_EQ(peers::short_shape(gqa), "d=128 L=16384 Hkv=2 causal");
  const peers::Section& mem = *peers::embedded().find("memory");
  EXPECT_EQ(peers::short_shape(mem.rows[0]), "vector add fast n=2^26");
}

// The Peers tab's notice: per section, against the peer with the highest figures (cuDNN for attention, not
// PyTorch's flash backend, which the ladder is ahead of everywhere), the rows read ahead as the table colours them.
TEST(RecordedPeers, TheNoticeCountsAheadOfTheStrongestPeer) {
  const peers::Recorded& r = peers::embedded();
  const std::string n = peers::notice(r);
  EXPECT_EQ(n.rfind("Recorded on " + r.device + ", " + r.date + ": the ladder ahead of ", 0), 0u) << n;
  for (const char* id : {"flash-forward", "flash-backward"}) {
    const peers::Section& s = *r.find(id);
    size_t cudnn = 0;
    for (size_t c = 0; c < s.columns.size(); ++c)
      if (s.columns[c].id == "cudnn") cudnn = c;
    ASSERT_GT(cudnn, 0u) << id;
    int ahead = 0, n_rows = 0;
    double lo = 1e9, hi = 0;
    for (const peers::Row& row : s.rows) {
      const double v = *peers::ratio(row, cudnn);
      ++n_rows, ahead += peers::ahead(v, s.ratio_digits), lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const std::string want = "ahead of cuDNN at " + std::to_string(ahead) + " of " + std::to_string(n_rows) + " " +
                             (std::string(id) == "flash-forward" ? "forward" : "backward") + " shapes (" +
                             peers::format_ratio(s, lo) + "x to " + peers::format_ratio(s, hi) + "x)";
    EXPECT_NE(n.find(want), std::string::npos) << want << "\nin: " << n;
  }
  EXPECT_EQ(n.find("PyTorch flash"), std::string::npos) << n;
}

TEST(RecordedPeers, ShapeKeyReadsEveryField) {
  const peers::ShapeKey k = peers::shape_key("B=16 H=16 Hkv=2 L=1024 d=128 causal bf16");
  EXPECT_EQ(k.B, 16);
  EXPECT_EQ(k.H, 16);
  EXPECT_EQ(k.Hkv, 2);
  EXPECT_EQ(k.L, 1024);
  EXPECT_EQ(k.d, 128);
  EXPECT_TRUE(k.causal);
  EXPECT_FALSE(peers::shape_key("B=1 H=16 L=16384 d=128 non-causal bf16").causal);
}

// [SECTION] the table and sentences in docs/fast-kernels.md (moved there from the README) ----------------
TEST(RecordedPeers, TheReadmesTableIsTheOneTheFileGenerates) {
  const std::string readme = read_file(source_root() + "/docs/fast-kernels.md");
  const std::string block = peers::readme_block(readme);
  ASSERT_FALSE(block.empty()) << "docs/fast-kernels.md lacks the peers table's markers";
  const peers::Recorded r = peers::parse(good_text(), peers::kSourcePath);
  EXPECT_EQ(block, peers::markdown(r))
      << "docs/fast-kernels.md's peers table differs from " << peers::kSourcePath
      << ": regenerate it with `cmake --build --preset default --target readme-peers-table`";
  // Every shape of every section is in it, with the caption.
  for (const peers::Section& s : r.sections)
    for (const peers::Row& row : s.rows) EXPECT_NE(block.find("| " + row.shape + " |"), std::string::npos) << row.shape;
  EXPECT_NE(block.find(peers::caption(r)), std::string::npos);
}

TEST(RecordedPeers, ReplacingTheBlockNeedsTheMarkers) {
  EXPECT_THROW(peers::replace_readme_block("no markers here\n", "x"), InputError);
  const std::string readme = std::string("a\n") + peers::kReadmeBegin + "\nold\n" + peers::kReadmeEnd + "\nb\n";
  EXPECT_EQ(peers::replace_readme_block(readme, "NEW\n"), "a\nNEW\nb\n");
}

// Rung 6's paragraph states the backward's ranges: they are the file's (rounded as written).
bool d64(const peers::Row& r) { return r.key.d == 64; }
bool d128(const peers::Row& r) { return r.key.d == 128; }
bool d256(const peers::Row& r) { return r.key.d == 256; }
std::string range(const peers::Span& s, const char* f) {
  char b[64];
  std::snprintf(b, sizeof b, f, s.lo, s.hi);
  return b;
}

TEST(RecordedPeers, TheReadmesBackwardSentenceIsTheFiles) {
  const std::string readme = collapse_spaces(read_file(source_root() + "/docs/fast-kernels.md"));
  const peers::Section& bw = *peers::embedded().find("flash-backward");
  const std::string want128 = "it reads " + range(peers::value_span(bw, 0, d128), "%.0f to %.0f") +
                              " TFLOP/s at d = 128, " + range(peers::ratio_span(bw, 2, d128), "%.2fx to %.2fx") +
                              " PyTorch's flash backward and " + range(peers::ratio_span(bw, 3, d128), "%.2fx to %.2fx") +
                              " its cuDNN backward, and " + range(peers::value_span(bw, 0, d64), "%.0f to %.0f") +
                              " TFLOP/s at d = 64 (" + range(peers::ratio_span(bw, 2, d64), "%.2fx to %.2fx") + " flash, " +
                              range(peers::ratio_span(bw, 3, d64), "%.2fx to %.2fx") + " cuDNN)";
  EXPECT_NE(readme.find(want128), std::string::npos) << "docs/fast-kernels.md's backward paragraph should read: " << want128;
  const std::string want256 = "the d = 256 backward reads " + range(peers::value_span(bw, 0, d256), "%.0f to %.0f") +
                              " TFLOP/s, " + range(peers::ratio_span(bw, 2, d256), "%.2fx to %.2fx") +
                              " PyTorch's flash backward and " + range(peers::ratio_span(bw, 3, d256), "%.2fx to %.2fx") +
                              " cuDNN";
  EXPECT_NE(readme.find(want256), std::string::npos) << "docs/fast-kernels.md's d = 256 paragraph should read: " << want256;
}

// [SECTION] live figures ----------------------------------------------------------------------------------
TEST(RecordedPeers, LiveFiguresMatchByShape) {
  const peers::Section& fw = *peers::embedded().find("flash-forward");
  measure::Results live;
  live.machine.cpu_figures = false;
  measure::Point p;
  p.section = "compute", p.kernel = "flash-attention", p.variant = "fast d=128 causal";
  p.shape = "B=4 H=16 L=4096 d=128 causal bf16", p.size = 4096, p.tflops = 501.5;
  live.points.push_back(p);
  p.variant = "fast d=64", p.shape = "B=32 H=32 L=512 d=64 bf16", p.size = 512, p.tflops = 280.0;
  live.points.push_back(p);
  const std::vector<std::optional<double>> got = peers::live_ladder(fw, live);
  ASSERT_EQ(got.size(), fw.rows.size());
  int matched = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i]) continue;
    ++matched;
    const peers::ShapeKey& k = fw.rows[i].key;
    EXPECT_EQ(k.Hkv, 0) << "no grouped-query row matches a multi-head point";
    if (k.d == 128) {
      EXPECT_EQ(*got[i], 501.5);
      EXPECT_TRUE(k.causal);
      EXPECT_EQ(k.L, 4096);
    } else {
      EXPECT_EQ(*got[i], 280.0);
      EXPECT_FALSE(k.causal);
      EXPECT_EQ(k.L, 512);
    }
  }
  EXPECT_EQ(matched, 2);
  live.machine.cpu_figures = true;  // CPU figures are not the GPU's
  for (const auto& v : peers::live_ladder(fw, live)) EXPECT_FALSE(v.has_value());
  live.machine.cpu_figures = false;  // the other sections have no live figure
  for (const auto& v : peers::live_ladder(*peers::embedded().find("flash-backward"), live)) EXPECT_FALSE(v.has_value());
}

// [SECTION] the generator, kl_peers_table ------------------------------------------------------------------
TEST(PeersTableTool, ChecksTheReadmeAndRefusesABadFile) {
  const std::string tool = build_dir() + "/kl_peers_table", json = source_root() + "/" + peers::kSourcePath;
  std::string out;
  EXPECT_EQ(test::run_shell(tool + " " + json + " --check-file", &out), 0) << out;
  EXPECT_EQ(test::run_shell(tool + " " + json + " --check " + source_root() + "/docs/fast-kernels.md", &out), 0) << out;
  // A page whose table was edited by hand: --check fails and says how to regenerate; --write fixes it.
  std::string readme = read_file(source_root() + "/docs/fast-kernels.md");
  const std::string first = "| B=32 H=32 L=512 d=64 non-causal bf16 | ";
  const size_t row = readme.find(first, readme.find(peers::kReadmeBegin));
  ASSERT_NE(row, std::string::npos);
  const size_t digit = readme.find_first_of("0123456789", row + first.size());
  readme[digit] = readme[digit] == '9' ? '8' : char(readme[digit] + 1);  // one figure edited by hand
  const std::string copy = test::tmp_dir() + "/README-edited.md";
  std::ofstream(copy, std::ios::binary) << readme;
  EXPECT_EQ(test::run_shell(tool + " " + json + " --check " + copy, &out), 1) << out;
  EXPECT_NE(out.find("--write"), std::string::npos) << out;
  EXPECT_EQ(test::run_shell(tool + " " + json + " --write " + copy, &out), 0) << out;
  EXPECT_EQ(test::run_shell(tool + " " + json + " --check " + copy, &out), 0) << out;
  const std::string bad = test::tmp_dir() + "/bad-peers.json";
  std::ofstream(bad) << "{\"schema\": 1}";
  EXPECT_EQ(test::run_shell(tool + " " + bad + " --check-file", &out), 2) << out;
  EXPECT_NE(out.find("bad-peers.json: top level: missing field \"date\""), std::string::npos) << out;
  EXPECT_EQ(test::run_shell(tool + " " + json, &out), 2) << out;
  EXPECT_NE(out.find("usage:"), std::string::npos) << out;
}

// [SECTION] bench/record_peers.py's output reads back --------------------------------------------------------
TEST(RecordPeersScript, ItsOutputParsesWithTheSessionsFiguresAndVersions) {
  std::string out;
  if (test::run_shell("python3 --version", &out) != 0) GTEST_SKIP() << "no python3 here (the GPU machine has it)";
  const std::string dir = test::tmp_dir() + "/record-peers";
  test::run_shell("mkdir -p " + dir, &out);
  const nlohmann::json versions = {{"device", "NVIDIA H200"}, {"driver", "580.1"}, {"cuda", "13.0"},
                                   {"torch", "2.11.0+cu130"}, {"cudnn", "9.19.0"}, {"triton", nullptr},
                                   {"harness", "the harness"}};
  const nlohmann::json bench = {
      {"backend", "cuda"}, {"device", "NVIDIA H200"}, {"quick", false},
      {"rows",
       {{{"kernel", "flash-attention"}, {"variant", "fast"}, {"shape", "B=4 H=16 L=4096 d=128 non-causal bf16 wgmma-tma"}, {"tflops", 612.34}},
        {{"kernel", "flash-attention"}, {"variant", "fast"}, {"shape", "B=4 H=16 Hkv=2 L=4096 d=128 causal bf16 wgmma-tma"}, {"tflops", 530.0}},
        {{"kernel", "flash-attention-backward"}, {"variant", "fast"}, {"shape", "B=4 H=16 L=4096 d=128 causal bf16 dq=atomic"}, {"tflops", 175.5}},
        {{"kernel", "flash-attention-backward"}, {"variant", "fast"}, {"shape", "B=4 H=16 L=4096 d=128 causal bf16 dq=deterministic"}, {"tflops", 179.1}},
        {{"kernel", "flash-attention-backward"}, {"variant", "fast"}, {"shape", "B=4 H=8 L=4096 d=256 causal bf16 dq=deterministic wgmma-d256"}, {"tflops", 278.63}},
        {{"kernel", "vector-add"}, {"variant", "fast"}, {"shape", "n=2^26 fp32"}, {"gbs", 4268.0}, {"ratio", 1.0241}},
        {{"kernel", "relu-dropout"}, {"variant", "fused"}, {"shape", "n=67108864 p=0.5"}, {"gbs", 4019.0}, {"ratio", 0.963}},
        {{"kernel", "softmax"}, {"variant", "fixed"}, {"shape", "4096x1024 fp32"}, {"gbs", 3300.0}, {"ratio", 0.98}},
        {{"kernel", "transpose"}, {"variant", "padded"}, {"shape", "8192x8192 fp32"}, {"gbs", 3606.5}, {"ratio", 0.866}},
        {{"kernel", "transpose"}, {"variant", "traced padded"}, {"shape", "8192x8192 fp32"}, {"gbs", 1486.5}, {"ratio", 0.357}}}}};
  const nlohmann::json flash = {
      {"versions", versions},
      {"rows",
       {{{"B", 4}, {"H", 16}, {"Hkv", nullptr}, {"L", 4096}, {"d", 128}, {"causal", false},
         {"shape", "B=4 H=16 L=4096 d=128 non-causal bf16"}, {"flash_tflops", 358.9}, {"cudnn_tflops", 663.9}},
        {{"B", 4}, {"H", 16}, {"Hkv", 2}, {"L", 4096}, {"d", 128}, {"causal", true},
         {"shape", "B=4 H=16 Hkv=2 L=4096 d=128 causal bf16"}, {"flash_tflops", 308.3}, {"cudnn_tflops", nullptr},
         {"cudnn_error", "refused"}}}}};
  const nlohmann::json backward = {
      {"versions", versions},
      {"rows",
       {{{"B", 4}, {"H", 16}, {"Hkv", nullptr}, {"L", 4096}, {"d", 128}, {"causal", true},
         {"shape", "B=4 H=16 L=4096 d=128 causal bf16"}, {"flash_tflops", 237.8}, {"cudnn_tflops", 485.6}},
        {{"B", 4}, {"H", 8}, {"Hkv", nullptr}, {"L", 4096}, {"d", 256}, {"causal", true},
         {"shape", "B=4 H=8 L=4096 d=256 causal bf16"}, {"flash_tflops", 200.1}, {"cudnn_tflops", 375.0}}}}};
  const nlohmann::json triton = {
      {"versions", {{"triton", "3.6.0"}}},
      {"triton_version", "3.6.0"},
      {"peers",
       {{{"op", "vector-add"}, {"impl", "triton add_kernel"}, {"shape", "n=2^26"}, {"gbs", 4277.0}, {"ratio", 1.027}},
        {{"op", "vector-add"}, {"impl", "torch.add"}, {"shape", "n=2^26"}, {"gbs", 4270.0}, {"ratio", 1.025}},
        {{"op", "relu-dropout"}, {"impl", "triton relu_dropout_kernel"}, {"shape", "n=2^26 p=0.5"}, {"gbs", 2583.0}, {"ratio", 0.62}},
        {{"op", "relu-dropout"}, {"impl", "torch relu + F.dropout"}, {"shape", "n=2^26 p=0.5"}, {"gbs", 1705.0}, {"ratio", 0.409}},
        {{"op", "softmax"}, {"impl", "triton softmax_kernel"}, {"shape", "4096x1024"}, {"gbs", 3000.0}, {"ratio", 0.9}},
        {{"op", "softmax"}, {"impl", "triton softmax, num_warps=8"}, {"shape", "4096x1024"}, {"gbs", 3100.0}, {"ratio", 0.93}},
        {{"op", "softmax"}, {"impl", "torch.softmax"}, {"shape", "4096x1024"}, {"gbs", 2800.0}, {"ratio", 0.85}}}}};
  std::ofstream(dir + "/bench.json") << bench.dump();
  std::ofstream(dir + "/flash.json") << flash.dump();
  std::ofstream(dir + "/backward.json") << backward.dump();
  std::ofstream(dir + "/triton.json") << triton.dump();
  const std::string script = "python3 " + source_root() + "/bench/record_peers.py";
  ASSERT_EQ(test::run_shell(script + " --bench " + dir + "/bench.json --flash " + dir + "/flash.json --backward " + dir +
                                "/backward.json --triton " + dir + "/triton.json --date 2026-12-02 --out " + dir + "/h200.json",
                            &out),
            0)
      << out;
  const peers::Recorded r = peers::parse(read_file(dir + "/h200.json"), "h200.json");
  EXPECT_EQ(peers::caption(r),
            "NVIDIA H200, 2026-12-02, torch 2.11.0+cu130, cuDNN 9.19.0, Triton 3.6.0, CUDA 13.0, driver 580.1");
  EXPECT_EQ(r.harness, "the harness");
  const peers::Section& fw = *r.find("flash-forward");
  ASSERT_EQ(fw.rows.size(), 2u);
  EXPECT_EQ(*fw.rows[0].values[0], 612.3);
  EXPECT_EQ(*fw.rows[0].values[2], 663.9);
  EXPECT_EQ(*fw.rows[1].values[0], 530.0) << "the grouped-query row takes the ladder's Hkv=2 figure";
  EXPECT_FALSE(fw.rows[1].values[2].has_value()) << "a refused peer is null";
  const peers::Section& bw = *r.find("flash-backward");
  ASSERT_EQ(bw.rows.size(), 2u);
  EXPECT_EQ(*bw.rows[0].values[0], 175.5);
  EXPECT_EQ(*bw.rows[0].values[1], 179.1);
  // d = 256: one bench row (both modes run the dQ pass there), the default's column and det's alike.
  EXPECT_EQ(*bw.rows[1].values[0], 278.6);
  EXPECT_EQ(*bw.rows[1].values[1], 278.6);
  const peers::Section& mem = *r.find("memory");
  ASSERT_EQ(mem.rows.size(), 4u);
  EXPECT_EQ(mem.rows[0].shape, "n=2^26");
  EXPECT_EQ(*mem.rows[0].values[0], 1.024);
  EXPECT_EQ(*mem.rows[0].values[2], 1.025);
  EXPECT_EQ(mem.rows[1].shape, "n=2^26 p=0.5");
  EXPECT_EQ(*mem.rows[2].values[1], 0.93) << "Triton softmax: the better of its two num_warps rows";
  // Rung 1½'s fast transpose, no peer (the traced build's row is not recorded); the study reads it back.
  EXPECT_EQ(mem.rows[3].name, "transpose padded");
  EXPECT_EQ(mem.rows[3].shape, "8192x8192");
  EXPECT_EQ(*mem.rows[3].values[0], 0.866);
  EXPECT_FALSE(mem.rows[3].values[1].has_value());
  // A missing input is one line and exit 2.
  EXPECT_EQ(test::run_shell(script + " --bench " + dir + "/nope.json --flash " + dir + "/flash.json --out " + dir + "/x.json", &out), 2);
  EXPECT_NE(out.find("--bench " + dir + "/nope.json: cannot read"), std::string::npos) << out;
  EXPECT_EQ(test::run_shell(script + " --flash " + dir + "/flash.json --out " + dir + "/x.json", &out), 2);
  EXPECT_NE(out.find("needs --bench"), std::string::npos) << out;
}

// The record's flash sections from bench/interleaved_flash.py's outputs (every side of a shape timed in turn in one
// process): each row's figures as that script wrote them, d = 256's one backward figure in both ladder columns, a
// refused side null; a --paths run, the backward's file given as the forward's, or both methods for one section:
// one line, exit 2.
TEST(RecordPeersScript, InterleavedRowsAreTheFlashSections) {
  std::string out;
  if (test::run_shell("python3 --version", &out) != 0) GTEST_SKIP() << "no python3 here (the GPU machine has it)";
  const std::string dir = test::tmp_dir() + "/record-interleaved";
  test::run_shell("mkdir -p " + dir, &out);
  const nlohmann::json versions = {{"device", "NVIDIA H200"}, {"torch", "2.11.0+cu130"}, {"cudnn", "9.19.0"}};
  const nlohmann::json forward = {
      {"versions", versions}, {"quick", false}, {"backward", false},
      {"rows",
       {{{"shape", "B=4 H=16 L=4096 d=128 non-causal bf16"}, {"kernel", "wgmma-persistent-q2-late"},
         {"ladder_tflops", 660.94}, {"cudnn_tflops", 650.61}, {"flash_tflops", 360.02}},
        {{"shape", "B=4 H=16 Hkv=2 L=4096 d=128 causal bf16"}, {"kernel", "wgmma-persistent-q2-late"},
         {"ladder_tflops", 615.2}, {"cudnn_tflops", 578.2}, {"flash_error", "refused"}}}}};
  const nlohmann::json backward = {
      {"versions", versions}, {"quick", false}, {"backward", true},
      {"rows",
       {{{"shape", "B=4 H=16 L=4096 d=128 causal bf16"}, {"kernel", "wgmma-tma"}, {"ladder_tflops", 437.7},
         {"ladder_det_tflops", 365.1}, {"cudnn_tflops", 463.4}, {"flash_tflops", 300.0}},
        {{"shape", "B=4 H=8 L=4096 d=256 causal bf16"}, {"kernel", "wgmma-d256"}, {"ladder_tflops", 289.04},
         {"cudnn_tflops", 359.0}, {"flash_tflops", 210.0}}}}};
  const nlohmann::json paths = {
      {"versions", versions},
      {"rows", {{{"shape", "B=4 H=16 L=4096 d=128 causal bf16"}, {"ladder@wgmma_tflops", 500.0}, {"cudnn_tflops", 1.0}}}}};
  std::ofstream(dir + "/fwd.json") << forward.dump();
  std::ofstream(dir + "/bwd.json") << backward.dump();
  std::ofstream(dir + "/paths.json") << paths.dump();
  const std::string script = "python3 " + source_root() + "/bench/record_peers.py --date 2026-12-06 ";
  ASSERT_EQ(test::run_shell(script + "--interleaved " + dir + "/fwd.json --interleaved-backward " + dir +
                                "/bwd.json --out " + dir + "/h200.json",
                            &out),
            0)
      << out;
  const peers::Recorded r = peers::parse(read_file(dir + "/h200.json"), "h200.json");
  const peers::Section& fw = *r.find("flash-forward");
  ASSERT_EQ(fw.rows.size(), 2u);
  EXPECT_EQ(*fw.rows[0].values[0], 660.9);
  EXPECT_EQ(*fw.rows[0].values[1], 360.0) << "PyTorch flash, timed in the same turn";
  EXPECT_EQ(*fw.rows[0].values[2], 650.6);
  EXPECT_FALSE(fw.rows[1].values[1].has_value()) << "a refused side is null";
  EXPECT_NE(fw.title.find("wgmma-persistent-q2-late"), std::string::npos) << fw.title;
  const peers::Section& bw = *r.find("flash-backward");
  ASSERT_EQ(bw.rows.size(), 2u);
  EXPECT_EQ(*bw.rows[0].values[0], 437.7);
  EXPECT_EQ(*bw.rows[0].values[1], 365.1);
  EXPECT_EQ(*bw.rows[0].values[3], 463.4);
  EXPECT_EQ(*bw.rows[1].values[0], 289.0);
  EXPECT_EQ(*bw.rows[1].values[1], 289.0) << "d = 256: both modes are the same launches";
  EXPECT_EQ(*bw.rows[1].values[2], 210.0);
  for (const std::string& bad :
       {"--interleaved " + dir + "/bwd.json", "--interleaved " + dir + "/paths.json",
        "--interleaved-backward " + dir + "/fwd.json", "--bench x --flash x --interleaved " + dir + "/fwd.json"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(test::run_shell(script + bad + " --out " + dir + "/x.json", &out), 2);
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(out.rfind("record_peers.py: --", 0), 0u) << out;
  }
}

// [SECTION] bench/peers_common.py reads KL_BENCH_WARMUP_MS as the ladder's bench does ----------------------------
TEST(PeersCommon, WarmupMillisecondsFromTheEnvironment) {
  std::string out;
  if (test::run_shell("python3 --version", &out) != 0) GTEST_SKIP() << "no python3 here (the GPU machine has it)";
  const std::string read = " python3 -c \"import sys; sys.path.insert(0, '" + source_root() +
                           "/bench'); import peers_common as pc; print(pc.warmup_ms_from_env())\"";
  ASSERT_EQ(test::run_shell("env -u KL_BENCH_WARMUP_MS" + read, &out), 0) << out;
  EXPECT_EQ(out, "0.0\n");
  ASSERT_EQ(test::run_shell("KL_BENCH_WARMUP_MS=250" + read, &out), 0) << out;
  EXPECT_EQ(out, "250.0\n");
  for (const char* bad : {"abc", "-1", "20000", "nan"}) {
    EXPECT_EQ(test::run_shell(std::string("KL_BENCH_WARMUP_MS=") + bad + read, &out), 2) << bad;
    EXPECT_EQ(out, std::string("KL_BENCH_WARMUP_MS=") + bad + " is out of range: allowed [0, 10000] milliseconds\n");
  }
}

// [SECTION] bench/clocks_summary.py: one line on the clocks and power beside a bench ---------------------------------
TEST(ClocksSummaryScript, OneLineFromNvidiaSmisCsv) {
  std::string out;
  if (test::run_shell("python3 --version", &out) != 0) GTEST_SKIP() << "no python3 here (the GPU machine has it)";
  const std::string csv = test::tmp_dir() + "/clocks.csv";
  // As nvidia-smi writes it (driver 580: the reasons column under its newer name), with a line cut short.
  std::ofstream(csv) << "timestamp, clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active\n"
                        "2026/12/06 03:56:50.891, 1980 MHz, 236.10 W, 0x0000000000000000\n"
                        "2026/12/06 03:56:50.991, 1980 MHz, 240.00 W, 0x0000000000000000\n"
                        "2026/12/06 03:56:51.091, 1590 MHz, 700.00 W, 0x0000000000000004\n"
                        "2026/12/06 03:56:51.191, 1410 MHz, 708.00 W, 0x0000000000000004\n"
                        "2026/12/06 03:56:51.291, 1\n";
  const std::string script = "python3 " + source_root() + "/bench/clocks_summary.py ";
  ASSERT_EQ(test::run_shell(script + csv + " 'clocks under the ladder'", &out), 0) << out;
  EXPECT_EQ(out,
            "clocks under the ladder: 4 samples, SM clock median 1785 MHz (10th percentile 1410, 1410 to 1980), "
            "power median 470 W (max 708), held by the power cap in 50% of samples\n");
  std::ofstream(csv) << "timestamp, clocks.current.sm [MHz]\n";
  EXPECT_EQ(test::run_shell(script + csv, &out), 1);
  EXPECT_EQ(out, csv + ": no nvidia-smi sample in it\n");
  // --record becomes nvidia-smi (here a stand-in that echoes its arguments), its output into the file.
  const std::string bin = test::tmp_dir() + "/fake-smi";
  test::run_shell("mkdir -p " + bin, &out);
  std::ofstream(bin + "/nvidia-smi") << "#!/bin/sh\necho \"$@\"\n";
  test::run_shell("chmod +x " + bin + "/nvidia-smi", &out);
  ASSERT_EQ(test::run_shell("PATH=" + bin + ":$PATH " + script + "--record " + csv, &out), 0) << out;
  EXPECT_EQ(read_file(csv),
            "--query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 100\n");
  EXPECT_EQ(test::run_shell("PATH=/nonexistent /usr/bin/python3 " + source_root() + "/bench/clocks_summary.py --record " + csv, &out), 1);
  EXPECT_EQ(read_file(csv), "clocks_summary.py --record: cannot run nvidia-smi (No such file or directory)\n");
}

// bench/ab_builds.sh takes a candidate as a patch: its tree made from the base's files (no builds, no docs/tour)
// with the patch applied, also where the base is a git repository's root with the patched file committed (as on the
// CPU machine, where `git apply` run inside .ab/NAME reads a git diff's paths from the repository's root and skips
// them, silently), kept while the patch is the same (a warm machine keeps its build), made again for another patch;
// a patch that does not apply, or a name that is neither a tree nor a patch: one line, exit 2.
TEST(AbBuildsScript, PatchesBecomeTreesBesideTheBase) {
  std::string out;
  if (test::run_shell("git --version", &out) != 0) GTEST_SKIP() << "no git here";
  const std::string dir = test::tmp_dir() + "/ab-trees";
  ASSERT_EQ(test::run_shell("rm -rf " + dir + " && mkdir -p " + dir + "/build-cuda " + dir + "/docs/tour && cd " + dir +
                                " && printf 'one\\n' > a.txt && touch build-cuda/junk docs/tour/x.png && git init -q . && "
                                "git add a.txt && git -c user.name=t -c user.email=t@t commit -qm base",
                            &out),
            0)
      << out;
  auto patch = [&](const std::string& name, const std::string& to) {
    std::ofstream(dir + "/" + name) << "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+" << to
                                    << "\n";  // git's form: paths from the repository's root
  };
  patch("c1.patch", "two");
  const std::string script = "cd " + dir + " && bash " + source_root() + "/bench/ab_builds.sh --trees-only . ";
  ASSERT_EQ(test::run_shell(script + "c1.patch", &out), 0) << out;
  EXPECT_EQ(out, ".\n.ab/c1\n");
  EXPECT_EQ(read_file(dir + "/.ab/c1/a.txt"), "two\n");
  EXPECT_EQ(read_file(dir + "/a.txt"), "one\n");
  EXPECT_NE(test::run_shell("test -e " + dir + "/.ab/c1/build-cuda || test -e " + dir + "/.ab/c1/docs/tour", &out), 0);
  test::run_shell("mkdir -p " + dir + "/.ab/c1/build-cuda && touch " + dir + "/.ab/c1/build-cuda/kept", &out);
  ASSERT_EQ(test::run_shell(script + "c1.patch", &out), 0) << out;
  EXPECT_EQ(test::run_shell("test -e " + dir + "/.ab/c1/build-cuda/kept", &out), 0) << "the same patch: tree kept";
  patch("c1.patch", "three");
  ASSERT_EQ(test::run_shell(script + "c1.patch", &out), 0) << out;
  EXPECT_EQ(read_file(dir + "/.ab/c1/a.txt"), "three\n");
  EXPECT_NE(test::run_shell("test -e " + dir + "/.ab/c1/build-cuda/kept", &out), 0) << "another patch: tree made again";
  std::ofstream(dir + "/bad.patch") << "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-nine\n+ten\n";
  EXPECT_EQ(test::run_shell(script + "bad.patch 2>&1 >/dev/null | grep -c 'bad.patch does not apply to .$'", &out), 0);
  EXPECT_EQ(out, "1\n");
  EXPECT_EQ(test::run_shell(script + "bad.patch > /dev/null 2>&1", &out), 2);
  EXPECT_EQ(test::run_shell(script + "nothere 2>&1", &out), 2);
  EXPECT_EQ(out, source_root() + "/bench/ab_builds.sh: nothere is neither a directory nor a .patch file\n");
}

// bench/interleaved_flash.py: a library it cannot load, or a round count out of range, is one line and exit 2.
TEST(InterleavedFlashScript, RefusesInOneLine) {
  std::string out;
  if (test::run_shell("python3 --version", &out) != 0) GTEST_SKIP() << "no python3 here (the GPU machine has it)";
  const std::string script = "python3 " + source_root() + "/bench/interleaved_flash.py ";
  EXPECT_EQ(test::run_shell(script + "--lib /nonexistent/libkl_ladder_c.so", &out), 2);
  EXPECT_EQ(out.rfind("interleaved_flash.py: cannot load --lib /nonexistent/libkl_ladder_c.so (", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(test::run_shell(script + "--lib /nonexistent.so --rounds 0", &out), 2);
  EXPECT_EQ(out, "interleaved_flash.py: --rounds=0 is out of range: allowed [1, 20]\n");
  EXPECT_EQ(test::run_shell(script + "--lib /nonexistent.so --backward --paths wgmma-late", &out), 2);
  EXPECT_EQ(out, "interleaved_flash.py: --paths=wgmma-late is out of range: allowed one or more KL_FLASH_FAST_PATH "
                 "values, forward only (not with --backward)\n");
}

#ifdef KL_LADDER_C_LIB
// The C ABI (bench/ladder_c_api.cpp) checks its input as run_fast does and answers with the one line, no device
// needed; the kernel's name for a shape.
TEST(LadderCApi, OneLineForBadInput) {
  void* lib = dlopen(KL_LADDER_C_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Forward = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, int, char*, int);
  using Path = int (*)(int, int, int, int, int, int, char*, int);
  const auto forward = reinterpret_cast<Forward>(dlsym(lib, "kl_flash_forward_bf16"));
  const auto path = reinterpret_cast<Path>(dlsym(lib, "kl_flash_forward_path"));
  ASSERT_NE(forward, nullptr);
  ASSERT_NE(path, nullptr);
  char message[256];
  EXPECT_EQ(forward(nullptr, nullptr, nullptr, nullptr, 8, 16, 0, 2048, 96, 0, message, sizeof message), 1);
  EXPECT_STREQ(message, "d=96 is out of range: allowed {64, 128, 256} for --variant fast");
  EXPECT_EQ(forward(nullptr, nullptr, nullptr, nullptr, 8, 16, 0, 2048, 128, 0, message, sizeof message), 1);
  EXPECT_STREQ(message, "q=null is out of range: allowed a 16-byte aligned device pointer");
  EXPECT_EQ(path(8, 16, 0, 2048, 128, 0, message, sizeof message), 0);
  EXPECT_GT(std::string(message).size(), 0u);
  using Backward = int (*)(const void*, const void*, const void*, const void*, const void*, const float*, void*, void*,
                           void*, float*, float*, int, int, int, int, int, int, int, char*, int);
  const auto backward = reinterpret_cast<Backward>(dlsym(lib, "kl_flash_backward_bf16"));
  ASSERT_NE(backward, nullptr);
  EXPECT_EQ(backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                     8, 16, 0, 2048, 96, 0, 0, message, sizeof message),
            1);
  EXPECT_STREQ(message, "d=96 is out of range: allowed {64, 128, 256} for --variant fast");
  dlclose(lib);
}

// The ladder's forward, cuDNN's and PyTorch flash's, then the backwards, timed in turn in one process (--quick:
// L = 512, both masks, every head dimension, the forward's grouped-query rows): every row timed on each side twice,
// the backward's deterministic mode beside its default at d = 64 and 128; then two named forward kernels beside
// cuDNN at the d = 64 rows alone. Where PyTorch or a device is missing, the script's one line, and the test skips.
TEST(InterleavedFlashScript, TimesBothSidesInTurn) {
  std::string out;
  if (test::run_shell("python3 --version", &out) != 0) GTEST_SKIP() << "no python3 here (the GPU machine has it)";
  const std::string json = test::tmp_dir() + "/interleaved.json";
  auto run = [&](const std::string& options) {
    return test::run_shell("python3 " + source_root() + "/bench/interleaved_flash.py --quick --rounds 2 --lib " +
                               KL_LADDER_C_LIB + " " + options + " --out " + json + " 2>&1 >/dev/null",
                           &out);
  };
  for (const bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "--backward" : "forward");
    const int rc = run(backward ? "--backward" : "");
    if (rc == 2 && (out.find("needs the Python package 'torch'") != std::string::npos ||
                    out.find("sees no CUDA device") != std::string::npos)) {
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
      GTEST_SKIP() << out;
    }
    ASSERT_EQ(rc, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(read_file(json));
    ASSERT_EQ(j["rows"].size(), backward ? 6u : 8u) << "d = 64, 128, 256 (and forward: grouped queries), both masks";
    for (const auto& r : j["rows"]) {
      SCOPED_TRACE(r["shape"].get<std::string>());
      ASSERT_FALSE(r.contains("error")) << r["error"];
      EXPECT_EQ(r["ladder_runs_ms"].size(), 2u);
      EXPECT_EQ(r["cudnn_runs_ms"].size(), 2u);
      EXPECT_FALSE(r.contains("flash_error")) << r["flash_error"];
      EXPECT_EQ(r["flash_runs_ms"].size(), 2u) << "PyTorch flash in the same turn";
      EXPECT_EQ(r.contains("ladder_det_runs_ms"), backward && r["d"] != 256);
      EXPECT_GT(r["ladder_over_cudnn"].get<double>(), 0.0);
      EXPECT_FALSE(r["kernel"].get<std::string>().empty());
    }
  }
  ASSERT_EQ(run("--paths wgmma-persistent,wgmma-persistent-m192 --shapes 'd=64 '"), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(j["rows"].size(), 2u) << "d = 64 at L = 512, both masks";
  for (const auto& r : j["rows"])
    for (const char* path : {"wgmma-persistent", "wgmma-persistent-m192"}) {
      const std::string side = std::string("ladder@") + path;
      EXPECT_EQ(r[side + "_kernel"], path);
      EXPECT_EQ(r[side + "_runs_ms"].size(), 2u);
      EXPECT_GT(r[side + "_over_cudnn"].get<double>(), 0.0);
    }
}
#endif

}  // namespace
}  // namespace kl
