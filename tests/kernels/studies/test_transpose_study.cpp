// kernels/studies/transpose_study.*: what the transpose panel concludes, asserted on numbers worked out by
// hand from the kernels' addresses, on every backend present; each sentence held to the numbers it states;
// the gallery's bugs (kernels/editable/gallery/transpose/) run as edited sources through the worker and
// show their symptoms; the speed sentence on the CPU with and without a recorded figure.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "assets/embedded.h"
#include "kernels/editable/worker.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/transpose_study.h"
#include "test_util.h"

namespace kl {
namespace {

namespace ts = study::transpose_study;
using transpose::Variant;

ParamValues settings(std::vector<std::string> sets) {
  ParamValues v(ts::params());
  for (const std::string& s : sets) v.set(s);
  return v;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(TransposeStudy, HandComputedCostsAtTheDefaults) {
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const ts::TransposeResult r = ts::run(b, settings({}), nullptr);
    EXPECT_EQ(r.rows, 64);
    EXPECT_EQ(r.cols, 96);
    EXPECT_EQ(r.programs, 6);
    // 64 x 96 is 6 full tiles: 6 programs x 8 warps x 4 requests of each kind, every one a full warp.
    for (const ts::KernelCosts& k : r.kernels) {
      SCOPED_TRACE(transpose::variant_name(k.variant));
      EXPECT_TRUE(k.matches.pass) << k.matches.sentence;
      EXPECT_EQ(k.matches.sentence, "yes, bit for bit");
      EXPECT_EQ(k.loads.requests, 6 * 8 * 4);
      EXPECT_EQ(k.stores.requests, 6 * 8 * 4);
      EXPECT_EQ(k.loads.sectors, 6 * 8 * 4 * 4);  // 32 floats of a row of in: 128 B, 4 sectors
      EXPECT_FALSE(k.overflow);
    }
    // naive stores down a column of out [96 x 64]: lanes 64 * 4 = 256 bytes apart, a sector each.
    EXPECT_EQ(r.of(Variant::Naive).stores.sectors, 6 * 8 * 4 * 32);
    EXPECT_EQ(r.of(Variant::Naive).stores.lines, 6 * 8 * 4 * 32);
    EXPECT_FALSE(r.of(Variant::Naive).uses_tile);
    for (Variant v : {Variant::Tiled, Variant::Padded}) {
      const ts::KernelCosts& k = r.of(v);
      EXPECT_EQ(k.stores.sectors, 6 * 8 * 4 * 4);
      EXPECT_EQ(k.tile_stores.requests, 6 * 8 * 4);
      EXPECT_EQ(k.tile_loads.requests, 6 * 8 * 4);
      EXPECT_EQ(k.tile_stores.max_degree, 1);  // along a row of the tile: 32 banks
    }
    // tiled reads its tile down a column: word 32 L + c, all lanes in bank c: 32 passes, every request.
    EXPECT_EQ(r.of(Variant::Tiled).tile_loads.max_degree, 32);
    EXPECT_EQ(r.of(Variant::Tiled).tile_loads.wavefronts, 6 * 8 * 4 * 32);
    // padded: word 33 L + c, bank (L + c) % 32: one pass.
    EXPECT_EQ(r.of(Variant::Padded).tile_loads.max_degree, 1);
    EXPECT_EQ(r.of(Variant::Padded).tile_loads.wavefronts, 6 * 8 * 4);
    EXPECT_EQ(r.notice,
              "naive's stores cost 32 sectors a request against 4 for its loads; tiled makes both 4 but reads "
              "its tile with 32-way bank conflicts; padded's 33-float tile rows remove them.");
    EXPECT_EQ(r.of(Variant::Naive).line, "naive: in's loads 4 sectors a request, out's stores 32; no shared memory");
    EXPECT_EQ(r.of(Variant::Tiled).line,
              "tiled: in's loads 4 sectors a request, out's stores 4; the tile's stores no bank conflict, its loads "
              "32-way bank conflicts (32 shared-memory passes a load)");
  }
}

TEST(TransposeStudy, TheChosenWarpsRequestsAreItsOwn) {
  const ts::TransposeResult r = ts::run(Backend::Cpu, settings({"program=4", "warp=5", "variant=padded"}), nullptr);
  EXPECT_EQ(r.program_x, 1);
  EXPECT_EQ(r.program_y, 1);
  const ts::KernelCosts& k = r.of(Variant::Padded);
  ASSERT_EQ(k.warp_loads.size(), 4u);
  ASSERT_EQ(k.warp_stores.size(), 4u);
  ASSERT_EQ(k.warp_tile.size(), 8u);
  // Its second load: in's row 32 + 5 + 8, columns 32..63; lane L at byte ((45 * 96) + 32 + L) * 4.
  for (int l = 0; l < 32; ++l) EXPECT_EQ(k.warp_loads[1].offset[l], ((45 * 96) + 32 + l) * 4);
  // Its first store: out's row 32 + 5, columns 32..63 (out is 96 x 64).
  EXPECT_EQ(k.warp_stores[0].offset[0], (37 * 64 + 32) * 4);
  EXPECT_EQ(k.chosen_loads.requests, 8 * 4);
  EXPECT_EQ(ts::global_caption(k.warp_loads[0], "the warp's first load of in"),
            "the warp's first load of in: 32 lanes, 4 sectors of 32 B in 1 line: 128 B used of 128 B moved");
  EXPECT_EQ(ts::global_caption(r.of(Variant::Naive).warp_stores[0], "a store"),
            "a store: 32 lanes, 32 sectors of 32 B in 32 lines: 128 B used of 1024 B moved (4 if coalesced)");
  const ts::TransposeResult t = ts::run(Backend::Cpu, settings({"program=4", "warp=5"}), nullptr);
  const warp_access::Request* load = nullptr;
  for (const warp_access::Request& q : t.of(Variant::Tiled).warp_tile)
    if (!q.store && !load) load = &q;
  ASSERT_NE(load, nullptr);
  EXPECT_EQ(ts::shared_caption(*load, "x"), "x: 32 lanes, 32 words in bank 5: 32 passes, a 32-way bank conflict");
  EXPECT_EQ(ts::shared_caption(t.of(Variant::Tiled).warp_tile[0], "y"), "y: 32 lanes, 32 words in 32 banks: 1 pass, no bank conflict");
}

TEST(TransposeStudy, RaggedAndTinyMatricesStateWhatTheirLanesCost) {
  // 4 x 40: one row of programs, warps 4..7 have no rows; naive's stores: out is 40 x 4, lanes 16 bytes apart:
  // 32 lanes span 512 bytes, 16 sectors.
  const ts::TransposeResult r = ts::run(Backend::Cpu, settings({"rows=4", "cols=40"}), nullptr);
  EXPECT_EQ(r.programs, 2);
  const ts::KernelCosts& n = r.of(Variant::Naive);
  EXPECT_EQ(n.loads.requests, 2 * 4);  // warps 0..3, one row each, j = 0 only
  // Program 0's stores: 32 lanes 16 bytes apart, 16 sectors; program 1's: 8 lanes (columns 32..39), 4 sectors.
  EXPECT_EQ(n.stores.sectors, 4 * 16 + 4 * 4);
  EXPECT_TRUE(n.matches.pass);
  EXPECT_TRUE(has(r.notice, "naive's stores cost 10 sectors a request against 2.5 for its loads")) << r.notice;
  for (const ts::KernelCosts& k : r.kernels) EXPECT_TRUE(k.matches.pass) << k.matches.sentence;
}

TEST(TransposeStudy, SettingsOutsideTheLaunchAreRefusedInWords) {
  try {
    ts::run(Backend::Cpu, settings({"program=6"}), nullptr);
    FAIL() << "program 6 of 6 ran";
  } catch (const InputError& e) {
    EXPECT_TRUE(has(e.what(), "program")) << e.what();
    EXPECT_TRUE(has(e.what(), "[0, 5]")) << e.what();
  }
  EXPECT_THROW(settings({"rows=257"}), InputError);
  EXPECT_THROW(settings({"warp=8"}), InputError);
}

TEST(TransposeStudy, ReportCarriesEverySentenceAndNumber) {
  const ts::TransposeResult r = ts::run(Backend::Cpu, settings({}), nullptr);
  const study::Report rep = ts::report(r);
  ASSERT_EQ(rep.checks.size(), 3u);
  EXPECT_EQ(rep.checks[1].sentence, "tiled matches reference: yes, bit for bit");
  EXPECT_EQ(rep.lines[0], r.notice);
  EXPECT_EQ(rep.numbers["naive_store_sectors_per_request"].get<double>(), 32.0);
  EXPECT_EQ(rep.numbers["tiled_tile_load_degree"].get<int>(), 32);
  EXPECT_EQ(rep.numbers["padded_tile_load_degree"].get<int>(), 1);
  const study::Entry* e = study::find("transpose");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->run(Backend::Cpu, settings({})).settings, "rows=64, cols=96, variant=tiled, program=0, warp=0");
}

// The README's and docs/ladder.md's paragraphs and the panel's text (assets/text/transpose.md) state these
// numbers; they are the study's: 32 sectors against 4 at the defaults, a 32-way conflict, none padded, and 32
// "once the matrix has 8 rows or more" (7 rows: 28).
std::string read_source_file(const std::string& rel) {
  const std::string here = __FILE__;  // .../tests/kernels/studies/test_transpose_study.cpp
  std::string root = here.substr(0, here.rfind("/tests/"));
  if (root.empty() || root[0] != '/') {
    const std::string bin = KL_BINARY;
    root = bin.substr(0, bin.rfind('/')) + "/" + root;
  }
  std::ifstream f(root + "/" + rel);
  std::stringstream s;
  s << f.rdbuf();
  std::string t = s.str();
  for (char& c : t) c = c == '\n' ? ' ' : c;
  return t;
}

TEST(TransposeStudy, TheReadmeAndThePanelsTextStateTheStudysNumbers) {
  const std::string readme = read_source_file("README.md");
  const std::string ladder = read_source_file("docs/ladder.md");
  const std::string text(assets::find("text/transpose.md"));
  std::string flat = text;
  for (char& c : flat) c = c == '\n' ? ' ' : c;
  ASSERT_FALSE(readme.empty());
  ASSERT_FALSE(ladder.empty());
  EXPECT_TRUE(has(readme, "the naive transpose writes down a column (32 sectors a request instead of 4)"));
  EXPECT_TRUE(has(ladder, "naive (coalesced reads, writes down a column: 32 sectors a request against 4)"));
  EXPECT_TRUE(has(ladder, "a 32-way bank conflict on every tile read) and padded (33-float tile rows: none)"));
  EXPECT_TRUE(has(flat, "each store request costs 32 sectors once the matrix has 8 rows or more"));
  EXPECT_TRUE(has(flat, "32 passes for one request, a 32-way bank conflict"));
  const ts::TransposeResult r = ts::run(Backend::Cpu, settings({}), nullptr);
  EXPECT_EQ(r.of(Variant::Naive).stores.sectors_per_request(), 32.0);
  EXPECT_EQ(r.of(Variant::Naive).loads.sectors_per_request(), 4.0);
  EXPECT_EQ(r.of(Variant::Tiled).tile_loads.max_degree, 32);
  EXPECT_EQ(r.of(Variant::Tiled).tile_loads.wavefronts_per_request(), 32.0);
  EXPECT_EQ(r.of(Variant::Padded).tile_loads.max_degree, 1);
  EXPECT_EQ(ts::run(Backend::Cpu, settings({"rows=8"}), nullptr).of(Variant::Naive).stores.sectors_per_request(), 32.0);
  EXPECT_EQ(ts::run(Backend::Cpu, settings({"rows=7"}), nullptr).of(Variant::Naive).stores.sectors_per_request(), 28.0);
}

// [SECTION] Speed: what the CPU says, and a recorded figure when there is one ------------------------------

TEST(TransposeStudy, OnTheCpuGbsNeedAGpuAndARecordedFigureIsShownWhenThereIsOne) {
  const std::string text(assets::find("perf/h200.json"));
  nlohmann::json j = nlohmann::json::parse(text);
  // The recorded file (docs/perf/h200.json, since the bench of 2026-12-03) has the three kernels' rows.
  ts::TransposeResult r;
  ts::apply_recorded(r, peers::parse(text, "h200.json"));
  EXPECT_TRUE(r.recorded);
  EXPECT_TRUE(r.speed[0].known && r.speed[1].known && r.speed[2].known);
  EXPECT_TRUE(has(r.speed_line, "GB/s need a GPU")) << r.speed_line;
  EXPECT_TRUE(has(r.speed_line, "Recorded on a GPU: naive ")) << r.speed_line;
  // Without them: said, not guessed.
  nlohmann::json none = j, two = j;
  auto transpose_rows_out = [](nlohmann::json& doc) {
    for (nlohmann::json& s : doc["sections"]) {
      if (s["id"] != "memory") continue;
      nlohmann::json kept = nlohmann::json::array();
      for (const nlohmann::json& row : s["rows"])
        if (row["name"].get<std::string>().rfind("transpose", 0) != 0) kept.push_back(row);
      s["rows"] = kept;
    }
  };
  transpose_rows_out(none);
  ts::TransposeResult n;
  ts::apply_recorded(n, peers::parse(none.dump(), "h200.json"));
  EXPECT_FALSE(n.recorded);
  EXPECT_TRUE(has(n.speed_line, "GB/s need a GPU")) << n.speed_line;
  EXPECT_TRUE(has(n.speed_line, "No GPU figure is recorded")) << n.speed_line;
  // Two of the three: those two, by name.
  transpose_rows_out(two);
  for (nlohmann::json& s : two["sections"])
    if (s["id"] == "memory") {
      s["rows"].push_back({{"name", "transpose naive"}, {"shape", "8192x8192"}, {"values", {0.31, nullptr, nullptr}},
                           {"gbs", {1333.0, nullptr, nullptr}}});
      s["rows"].push_back({{"name", "transpose padded"}, {"shape", "8192x8192"}, {"values", {0.9, nullptr, nullptr}},
                           {"gbs", {3870.4, nullptr, nullptr}}});
    }
  ts::TransposeResult q;
  ts::apply_recorded(q, peers::parse(two.dump(), "h200.json"));
  EXPECT_TRUE(q.recorded);
  EXPECT_TRUE(q.speed[0].known && q.speed[2].known && !q.speed[1].known);
  EXPECT_TRUE(has(q.speed_line, "Recorded on a GPU: naive 1333 GB/s (0.31 of copy), padded 3870 GB/s (0.90 of copy).")) << q.speed_line;
  EXPECT_TRUE(has(q.speed_title, "recorded on")) << q.speed_title;
}

TEST(TransposeStudy, OnTheGpuTheFastBuildIsMeasuredAgainstACopy) {
  KL_REQUIRE_CUDA();
  const ts::TransposeResult r = ts::run(Backend::Cuda, settings({}), nullptr);
  ASSERT_TRUE(r.measured);
  EXPECT_GT(r.copy_gbs, 0);
  for (const ts::Speed& s : r.speed) {
    EXPECT_TRUE(s.known);
    EXPECT_GT(s.gbs, 0);
  }
  EXPECT_TRUE(has(r.speed_line, "Here: naive ")) << r.speed_line;
  // The counts are the CPU backend's, bit for bit.
  const ts::TransposeResult c = ts::run(Backend::Cpu, settings({}), nullptr);
  for (Variant v : transpose::kVariants) {
    EXPECT_EQ(r.of(v).stores.sectors, c.of(v).stores.sectors);
    EXPECT_EQ(r.of(v).tile_loads.wavefronts, c.of(v).tile_loads.wavefronts);
  }
}

// [SECTION] The gallery ------------------------------------------------------------------------------------

class TransposeGallery : public ::testing::Test {
 protected:
  void SetUp() override { editable::worker::set_program(KL_BINARY); }
  static editable::Source bug(const std::string& name) {
    for (const editable::GalleryBug& b : editable::gallery("transpose"))
      if (b.name == name) return {"transpose", b.file, b.text};
    ADD_FAILURE() << "no gallery bug " << name;
    return {};
  }
};

TEST_F(TransposeGallery, ListsItsThreeBugs) {
  const std::vector<editable::GalleryBug> bugs = editable::gallery("transpose");
  ASSERT_EQ(bugs.size(), 3u);
  for (const editable::GalleryBug& b : bugs) EXPECT_FALSE(b.sentence.empty()) << b.file;
}

TEST_F(TransposeGallery, AStridedReadMovesTheCostToTheLoads) {
  const editable::Source src = bug("strided read");
  for (Backend b : test::backends()) {
    const ts::TransposeResult r = ts::run(b, settings({"variant=naive"}), &src);
    const ts::KernelCosts& k = r.of(Variant::Naive);
    EXPECT_TRUE(r.edited);
    EXPECT_EQ(k.fault.kind, editable::Fault::None) << k.fault.text();
    EXPECT_TRUE(k.matches.pass) << k.matches.sentence;  // still the transpose
    EXPECT_EQ(k.loads.sectors_per_request(), 32.0);     // down a column of in: 96 * 4 bytes apart
    EXPECT_EQ(k.stores.sectors_per_request(), 4.0);
    EXPECT_TRUE(has(r.notice, "naive's stores cost 4 sectors a request against 32 for its loads")) << r.notice;
    EXPECT_TRUE(has(study::to_text(ts::report(r)), "kernel: strided_read.cu (edited)"));
  }
}

TEST_F(TransposeGallery, WithoutPaddingTheConflictsComeBack) {
  const editable::Source src = bug("tile without padding");
  const ts::TransposeResult r = ts::run(Backend::Cpu, settings({"variant=padded"}), &src);
  const ts::KernelCosts& k = r.of(Variant::Padded);
  EXPECT_TRUE(k.matches.pass) << k.matches.sentence;
  EXPECT_EQ(k.tile_loads.max_degree, 32);
  EXPECT_TRUE(has(r.notice, "padded reads its tile with 32-way conflicts")) << r.notice;
}

TEST_F(TransposeGallery, TheStoresIndexRemovesTheConflictsAndTheTranspose) {
  const editable::Source src = bug("transposed index in tile");
  const ts::TransposeResult r = ts::run(Backend::Cpu, settings({}), &src);
  const ts::KernelCosts& k = r.of(Variant::Tiled);
  EXPECT_EQ(k.tile_loads.max_degree, 1);
  EXPECT_FALSE(k.matches.pass);
  // Each of the 6 full tiles lands untransposed: only its 32 diagonal elements are right.
  EXPECT_EQ(k.mismatched, 6 * (32 * 32 - 32));
  EXPECT_EQ(k.matches.sentence, "no: 5952 of 6144 elements differ");
  EXPECT_TRUE(r.of(Variant::Padded).matches.pass);  // the other kernels are the shipped ones
  EXPECT_TRUE(has(r.notice, "tiled makes both 4 and reads its tile without bank conflicts; so does padded.")) << r.notice;
}

}  // namespace
}  // namespace kl
