// kernels/studies/attention_study.*: what the attention panel concludes, asserted on numbers: the budget
// sentence states the code's formula and its bytes, the wall, the occupancy (one block per SM from
// Lk = 445 at d = 32 on an H200's figures), the checks against float64 for rung 4 and the unfused
// variant, the counted traffic, the refusal past the wall, and the registry entry.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "assets/embedded.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/attention_study.h"
#include "kernels/studies/kernel_resources.h"
#include "kernels/studies/study.h"
#include "test_util.h"

namespace kl::attention_study {
namespace {

ParamValues settings(std::initializer_list<const char*> sets) {
  ParamValues p(params());
  for (const char* s : sets) p.set(s);
  return p;
}

// The integer before " bytes" at the end of a sentence.
int64_t bytes_in(const std::string& s) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(s, m, std::regex("= (\\d+) bytes$"))) << s;
  return m.size() > 1 ? std::stoll(m[1]) : -1;
}

TEST(AttentionStudy, BudgetSentenceStatesTheCodesFormulaAndBytes) {
  for (int d : {16, 32, 64, 128})
    for (int64_t lk : {int64_t(1), int64_t(20), int64_t(900), int64_t(4096)}) {
      const Budget g = budget(Backend::Cpu, lk, d);
      EXPECT_EQ(g.need, attention::smem_bytes(lk, d));
      EXPECT_EQ(g.need, (2 * lk * d + attention::kBlockQ * d) * 4);
      EXPECT_EQ(bytes_in(g.formula_line), g.need) << g.formula_line;
      EXPECT_NE(g.formula_line.find("(2 x Lk x d + 16 x d) x 4 B"), std::string::npos) << g.formula_line;
      EXPECT_NE(g.legend.find("K+V+Q rows"), std::string::npos);
    }
}

TEST(AttentionStudy, TheWallAtD32Is900OnTheAssumedH200) {
  const Budget at = budget(Backend::Cpu, 900, 32), over = budget(Backend::Cpu, 901, 32);
  EXPECT_EQ(at.limit, 232448);
  EXPECT_EQ(at.wall, 900);
  EXPECT_FALSE(at.past);
  EXPECT_TRUE(over.past);
  EXPECT_NE(at.wall_line.find("Lk = 900 is the largest that fits"), std::string::npos) << at.wall_line;
  EXPECT_NE(over.wall_line.find("past it"), std::string::npos);
  EXPECT_EQ(at.bar_text, "227.0 KiB needed of 227.0 KiB");
}

// Occupancy from all three limits. attention_smem uses 64 registers per thread (ptxas at sm_90; 48 before
// the tracer's access logs, issue 31): a warp holds 64 x 32 = 2048 of the SM's 65536, so 32 warps, 4 blocks of
// 8 warps: registers bind at short Lk (the old sentence counted shared memory and threads only and said 8). Shared memory binds from Lk = 445 at d=32
// ((need + 1 KiB) x 2 <= 228 KiB up to Lk = 444: (2*444*32 + 512)*4 + 1024 = 116736 = 233472 / 2).
TEST(AttentionStudy, OccupancyFromRegistersSharedMemoryAndThreads) {
  const DeviceInfo h200 = device_info(Backend::Cpu);
  const study::KernelResources kr = study::kernel_resources(Backend::Cpu, "attention.cu", "attention_smem");
  EXPECT_EQ(kr.registers, 64);
  EXPECT_EQ(study::blocks_by_registers(64, 256, h200), 4);
  EXPECT_EQ(study::blocks_by_registers(48, 256, h200), 5);
  EXPECT_EQ(study::blocks_by_registers(32, 256, h200), 8);
  EXPECT_EQ(study::blocks_by_registers(33, 256, h200), 6);  // 33 x 32 rounds up to 1280 per warp: 51 warps
  EXPECT_EQ(blocks_per_sm(444, 32, h200, 64), 2);
  EXPECT_EQ(blocks_per_sm(445, 32, h200, 64), 1);
  EXPECT_EQ(blocks_per_sm(900, 32, h200, 64), 1);
  EXPECT_EQ(blocks_per_sm(901, 32, h200, 64), 0);
  EXPECT_EQ(blocks_per_sm(20, 32, h200, 64), 4);  // registers bind, not 2048 threads / 256 = 8
  EXPECT_EQ(blocks_per_sm(20, 32, h200, 32), 8);  // with 32 registers threads would
  EXPECT_EQ(one_block_from_lk(32, h200, 64), 445);
  const Budget g = budget(Backend::Cpu, 20, 32);
  EXPECT_EQ(g.blocks, 4);
  EXPECT_EQ(g.occ.by_registers, 4);
  EXPECT_EQ(g.occ.by_threads, 8);
  EXPECT_EQ(g.occ.binding, "registers");
  EXPECT_EQ(g.one_block_lk, 445);
  EXPECT_NE(g.occupancy_line.find("4 blocks of 256 threads per SM, bound by registers"), std::string::npos)
      << g.occupancy_line;
  EXPECT_NE(g.occupancy_line.find("Registers allow 4 (64 per thread: " + kr.origin + ")"), std::string::npos)
      << g.occupancy_line;
  EXPECT_NE(g.occupancy_line.find("threads 8 (2048 per SM)"), std::string::npos) << g.occupancy_line;
  EXPECT_EQ(g.occupancy_line.find("8 blocks"), std::string::npos) << g.occupancy_line;
  EXPECT_NE(g.occupancy_line.find("from Lk = " + std::to_string(g.one_block_lk) + " at d=32"), std::string::npos)
      << g.occupancy_line;
  const Budget s = budget(Backend::Cpu, 500, 32);
  EXPECT_EQ(s.occ.binding, "shared memory");
  EXPECT_NE(s.occupancy_line.find("1 block of 256 threads per SM, bound by shared memory"), std::string::npos)
      << s.occupancy_line;
}

// The defaults (unmasked: the kernel's causal spec) and the panel's first tour stop (causal=1), each
// against float64 on every backend.
TEST(AttentionStudy, DefaultsMatchTheReferenceOnEveryBackend) {
  for (Backend b : test::backends()) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(backend_name(b)) + (causal ? " causal=1" : " defaults"));
      const Result r = run(b, causal ? settings({"causal=1"}) : settings({}));
      ASSERT_TRUE(r.ran) << r.run_error;
      EXPECT_EQ(r.shape.lq, 12);
      EXPECT_EQ(r.shape.lk, 20);
      EXPECT_EQ(r.opt.causal, causal);
      EXPECT_EQ(r.nans, 0);
      EXPECT_LT(r.err, 1e-5);
      EXPECT_LT(r.werr, 1e-5);
      EXPECT_GT(r.err, 0.0);  // float32 against float64: never exactly 0 here
      EXPECT_TRUE(r.check.ok);
      char e[64];
      std::snprintf(e, sizeof e, "yes, relative error %.1e (output), %.1e (weights)", r.err, r.werr);
      EXPECT_EQ(r.check.text, e);
      EXPECT_TRUE(r.rowsum.ok);
      EXPECT_LT(r.rowsum_worst, 1e-5);
      EXPECT_EQ(r.empty_rows, 0);
      EXPECT_TRUE(r.unfused.ok) << r.unfused.text;
      EXPECT_LT(r.unfused_err, 1e-5);
      EXPECT_EQ(r.hs.size(), size_t(12 * 20 * 2));  // no sinks: the study kept the scores
    }
  }
}

// One spec per parameter: causal and scale are the kernel's own (attention::param), not copies.
TEST(AttentionStudy, ParamsAreTheKernelsSpecsPlusThePanelsShape) {
  const std::vector<ParamSpec> ps = params();
  std::vector<std::string> names;
  for (const ParamSpec& p : ps) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"lq", "lk", "d", "causal", "scale", "magnitude", "seed"}));
  for (const ParamSpec& k : {attention::param::causal(), attention::param::scale()}) {
    const ParamSpec* p = nullptr;
    for (const ParamSpec& s : ps) p = s.name == k.name ? &s : p;
    ASSERT_NE(p, nullptr) << k.name;
    EXPECT_FALSE(p->is_override()) << k.name;
    EXPECT_EQ(p->def, k.def) << k.name;
    EXPECT_EQ(p->range_text(), k.range_text()) << k.name;
    EXPECT_EQ(p->help, k.help) << k.name;
  }
  ParamValues v(ps);
  EXPECT_FALSE(v.get_bool("causal"));  // the kernel's default: unmasked
  v.set("scale=1000000");              // the kernel's range, not a smaller copy of it
  EXPECT_THROW(v.set("scale=1000001"), InputError);
}

TEST(AttentionStudy, RowsThatSeeNothingAreCountedInTheSentence) {
  const Result r = run(Backend::Cpu, settings({"lq=20", "lk=7", "causal=1"}));  // the first 13 rows see nothing
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.empty_rows, 13);
  EXPECT_TRUE(r.rowsum.ok);
  EXPECT_NE(r.rowsum.text.find("over 7 rows"), std::string::npos) << r.rowsum.text;
  EXPECT_NE(r.rowsum.text.find("; 13 such rows"), std::string::npos) << r.rowsum.text;
}

TEST(AttentionStudy, PastTheWallNothingRunsAndTheRefusalSaysWhy) {
  const Result r = run(Backend::Cpu, settings({"lq=64", "lk=901", "causal=0"}));
  EXPECT_FALSE(r.ran);
  EXPECT_TRUE(r.budget.past);
  EXPECT_NE(r.run_error.find("largest Lk that fits at d=32 is 900"), std::string::npos) << r.run_error;
  EXPECT_NE(r.run_error.find("(2*Lk*d + 16*d)*4"), std::string::npos) << r.run_error;
  const study::Report rep = report(r);
  ASSERT_FALSE(rep.checks.empty());
  EXPECT_EQ(rep.checks[0].name, "fits_shared_memory");
  EXPECT_FALSE(rep.checks[0].pass);
}

TEST(AttentionStudy, TrafficLineStatesTheCountedBytes) {
  const Result r = run(Backend::Cpu, settings({}));
  EXPECT_EQ(r.traffic_smem, attention::traffic_bytes_smem(r.shape));
  EXPECT_EQ(r.traffic_unfused, attention::traffic_bytes_unfused(r.shape));
  // 12 x 20 at d = 32: standard 4*(2*12*32 + 2*20*32 + 4*12*20) = 12032 B = 11.8 KiB, rung 4 8.0 KiB.
  EXPECT_EQ(r.traffic_unfused, 12032.0);
  EXPECT_EQ(r.traffic_smem, 8192.0);
  EXPECT_NE(r.traffic_line.find("standard attention 11.8 KiB"), std::string::npos) << r.traffic_line;
  EXPECT_NE(r.traffic_line.find("= 3.8 KiB of it"), std::string::npos) << r.traffic_line;  // 4*12*20*4 B
  EXPECT_NE(r.traffic_line.find("rung 4 8.0 KiB"), std::string::npos) << r.traffic_line;
}

TEST(AttentionStudy, ReportAndRegistry) {
  const study::Entry* e = study::find("attention");
  ASSERT_NE(e, nullptr);
  ParamValues p(e->params());
  p.set("lq=16");
  p.set("lk=16");
  const study::Report rep = e->run(Backend::Cpu, p);
  EXPECT_EQ(rep.panel, "attention");
  ASSERT_EQ(rep.checks.size(), 4u);
  for (const study::Check& c : rep.checks) EXPECT_TRUE(c.pass) << c.name << ": " << c.sentence;
  EXPECT_EQ(rep.numbers["wall_lk"].get<int64_t>(), 900);
  EXPECT_EQ(rep.numbers["one_block_per_sm_from_lk"].get<int64_t>(), 445);
  EXPECT_EQ(rep.numbers["smem_bytes"].get<int64_t>(), attention::smem_bytes(16, 32));
  EXPECT_NE(study::to_text(rep).find("[pass] matches reference (float64): yes"), std::string::npos);
  EXPECT_THROW(p.set("lk=5000"), InputError);  // the panel's range, named in one line
}

}  // namespace
}  // namespace kl::attention_study

namespace kl::attention_study {
namespace {

// The text: the wall is this kernel's staging of K and V (a two-pass kernel has none), and occupancy names
// registers among its limits (the old text called the kernel impossible past the wall and counted shared
// memory alone).
TEST(AttentionStudy, TextPutsTheWallOnStagingAndNamesTheThreeLimits) {
  const std::string text(assets::find("text/attention.md"));
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.find("impossible once it does not"), std::string::npos) << text;
  EXPECT_NE(text.find("a two-pass kernel that streams K twice"), std::string::npos) << text;
  EXPECT_NE(text.find("has no wall"), std::string::npos) << text;
  EXPECT_NE(text.find("registers (the\nkernel's registers per thread)"), std::string::npos) << text;
}

// The panel's opening line: the bytes against the limit, the wall and the binding occupancy limit; past
// the wall, the refusal.
TEST(AttentionStudy, NoticeSaysWhatToSee) {
  ParamValues p(params());
  const Result r = run(Backend::Cpu, p);
  EXPECT_EQ(r.notice, "all of K and V sit in shared memory: 7.0 KiB of the 227.0 KiB a block may have at Lk = 20; the "
                      "wall at d = 32 is Lk = 900. 4 blocks per SM, bound by registers");
  EXPECT_EQ(report(r).notice, r.notice);
  p.set("lk=1000");
  const Result past = run(Backend::Cpu, p);
  EXPECT_EQ(past.notice.rfind("Lk = 1000 needs 252.0 KiB of shared memory per block, past the 227.0 KiB limit: refused", 0),
            0u) << past.notice;
}

// P's colour scale at 64 x 900 (tour 10): most weights are near 1/900, the largest about 0.1, so a scale to
// the largest draws P uniformly dark; the top is the 99th percentile, and the label says what is clipped.
TEST(AttentionStudy, WeightScaleIsThe99thPercentileWhereTheMaxIsAnOutlier) {
  ParamValues p(params());
  p.set("lq=64");
  p.set("lk=900");
  const Result r = run(Backend::Cpu, p);
  ASSERT_TRUE(r.ran);
  EXPECT_LT(r.p_scale, 0.25 * r.pmax);
  EXPECT_GT(r.p_scale, 1.0 / 900);
  EXPECT_EQ(r.p_scale_label, "weight (p99 top)");
  EXPECT_NE(r.p_scale_note.find("the 99th percentile"), std::string::npos) << r.p_scale_note;
  EXPECT_NE(r.p_scale_note.find("clipped"), std::string::npos) << r.p_scale_note;
  const Result small = run(Backend::Cpu, ParamValues(params()));  // 12 x 20: no outliers to clip
  EXPECT_EQ(small.p_scale, small.pmax);
  EXPECT_TRUE(small.p_scale_note.empty());
  int64_t above = 0, cells = 0;
  for (size_t c = 0; c < r.hw.size(); c += 2) above += r.hw[c] > r.p_scale, ++cells;
  EXPECT_LE(double(above), 0.011 * double(cells));  // about 1 % of the cells reach the top colour
}

}  // namespace
}  // namespace kl::attention_study
