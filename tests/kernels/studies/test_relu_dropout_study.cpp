// kernels/studies/relu_dropout_study.*: what the ReLU + dropout panel concludes, asserted on numbers.
// Every sentence that states a number is checked against that number computed here, independently, from
// the study's own arrays (inputs, output, keep mask) or from Philox directly.
#include <gtest/gtest.h>

#include <algorithm>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/runtime/errors.h"
#include "kernels/rungs/philox.h"
#include "kernels/studies/relu_dropout_study.h"
#include "kernels/measure/peers.h"
#include "kernels/studies/gpu_expectation.h"
#include "test_util.h"

namespace kl {
namespace {

namespace rd = relu_dropout;

ParamValues settings(int64_t n, double p, uint64_t seed, int block = 1024) {
  ParamValues v(study::relu_dropout_params());
  v.set("n", std::to_string(n));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", p);
  v.set("p", buf);
  v.set("seed", std::to_string(seed % 4294967295u));
  v.set("block_size", std::to_string(block));
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The survivor caption states the spike's count and the count elsewhere: both computed here from the
// output and inputs, with the 1-ulp tolerance the check line states. At p = 0.9 some float32 ratios land
// just under 10, the case a bin with its edge on the scale split off.
TEST(ReluDropoutStudy, SurvivorCaptionMatchesTheHistogramAndTheTolerance) {
  for (Backend b : test::backends())
    for (double p : {0.1, 0.2, 0.5, 0.9}) {
      const uint64_t seed = test::next_seed();
      SCOPED_TRACE("p " + std::to_string(p) + " seed " + std::to_string(seed));
      const study::ReluDropoutResult r = study::run_relu_dropout(b, settings(int64_t(1) << 18, p, seed));
      const std::vector<float> out = r.out.to_host();
      const std::vector<uint8_t> keep = r.trace.keep.to_host();
      int64_t survivors = 0, near_scale = 0, below_scale = 0;
      for (int64_t i = 0; i < r.n; ++i) {
        if (keep[size_t(i)] != rd::kKept || !(r.x[size_t(i)] > 0.0f)) continue;
        ++survivors;
        const double want = double(r.x[size_t(i)]) / (1.0 - p);
        near_scale += std::fabs(double(out[size_t(i)]) - want) <= want * 1.2e-7;
        below_scale += out[size_t(i)] / r.x[size_t(i)] < r.scale;
      }
      EXPECT_EQ(r.survivors, survivors);
      EXPECT_EQ(r.within_1ulp, survivors);
      EXPECT_EQ(near_scale, survivors);
      EXPECT_EQ(r.in_spike, survivors) << "every survivor within 1 ulp must count in the spike";
      EXPECT_EQ(r.elsewhere, 0);
      if (p == 0.9) EXPECT_GT(below_scale, 0) << "no ratio under the scale: the bin-edge case is not exercised";
      EXPECT_TRUE(contains(r.hist_title, "= " + fmt("%.4g", 1.0 / (1.0 - p)) + ": " + std::to_string(survivors) +
                                             " of " + std::to_string(survivors) + " survivors"))
          << r.hist_title;
      EXPECT_TRUE(contains(r.hist_title, ", 0 elsewhere")) << r.hist_title;
      EXPECT_TRUE(r.matches_reference.pass);
    }
}

// The spike's bin is centred on 1/(1-p), and each label reads back as its bin's centre (1.25 is "1.25").
TEST(ReluDropoutStudy, BinsCentreOnTheScaleAndLabelsReadBackTheirCentres) {
  for (double p : {0.1, 0.2, 0.5, 0.75, 0.9, 0.99}) {
    const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cpu, settings(4096, p, 7));
    ASSERT_EQ(r.bin_centres.size(), size_t(study::kDropoutBins));
    ASSERT_EQ(r.bin_labels.size(), size_t(study::kDropoutBins));
    EXPECT_NEAR(r.bin_centres[size_t(r.spike_bin)], 1.0 / (1.0 - p), 1e-12);
    EXPECT_NEAR(r.bin_width, 0.25 / (1.0 - p), 1e-12);
    for (size_t k = 0; k < r.bin_labels.size(); ++k) {
      const double back = std::strtod(r.bin_labels[k].c_str(), nullptr);
      EXPECT_NEAR(back, r.bin_centres[k], 5e-4 * std::max(1.0, r.bin_centres[k])) << r.bin_labels[k];
    }
  }
  const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cpu, settings(4096, 0.2, 7));
  EXPECT_EQ(r.bin_labels[5], "1.562");  // 5 * 1.25 / 4 = 1.5625: four significant digits
  EXPECT_EQ(r.bin_labels[4], "1.25");
}

// The drop-rate sentences: the count from the reference's own mask, the interval's ends, the seeds inside.
TEST(ReluDropoutStudy, RateSentencesStateTheCountsAndTheInterval) {
  for (Backend b : test::backends()) {
    const uint64_t seed = test::next_seed();
    const double p = 0.3;
    const int64_t n = 50000;
    const study::ReluDropoutResult r = study::run_relu_dropout(b, settings(n, p, seed, 256));
    SCOPED_TRACE("seed " + std::to_string(r.seed));
    std::vector<float> ref(static_cast<size_t>(n));
    std::vector<uint8_t> keep(static_cast<size_t>(n));
    rd::reference(r.x.data(), ref.data(), keep.data(), n, p, r.seed);
    int64_t dropped = 0;
    for (uint8_t k : keep) dropped += k == rd::kDropped;
    EXPECT_EQ(r.dropped, dropped);
    const double sigma = std::sqrt(p * (1 - p) / double(n));
    const std::string want = "dropped " + std::to_string(dropped) + " of " + std::to_string(n) + " = " +
                             fmt("%.4f", double(dropped) / n) + ";  99% binomial interval p +- 2.576 sqrt(p(1-p)/n) = [" +
                             fmt("%.4f", p - 2.5758 * sigma) + ", " + fmt("%.4f", p + 2.5758 * sigma) + "]";
    EXPECT_EQ(r.rate_line, want);
    ASSERT_EQ(r.seed_rates.size(), size_t(study::kDropoutSeeds));
    EXPECT_DOUBLE_EQ(r.seed_rates[0], double(dropped) / n);
    int inside = 0;
    for (double x : r.seed_rates) inside += std::fabs(x - p) <= 2.5758 * sigma + 1e-12;
    EXPECT_EQ(r.seeds_inside, inside);
    EXPECT_TRUE(contains(r.seeds_line, "(" + std::to_string(inside) + " of 25 seeds inside")) << r.seeds_line;
    EXPECT_EQ(r.rate_title, "empirical drop rate, seeds " + std::to_string(r.seed) + ".." + std::to_string(r.seed + 24));
  }
}

// keep = u >= p: the tie check runs at p = an element's own u, where a u > p kernel drops it. The
// statistics cannot tell the two apart (one tie in 2^24 draws), which is why the check exists.
TEST(ReluDropoutStudy, TieCheckCatchesAStrictComparison) {
  for (Backend b : test::backends()) {
    const uint64_t seed = test::next_seed();
    const study::ReluDropoutResult r = study::run_relu_dropout(b, settings(1000, 0.5, seed, 64));
    SCOPED_TRACE("seed " + std::to_string(r.seed));
    const uint32_t w = philox::element_word(r.seed, uint64_t(r.tie_element));
    EXPECT_EQ(r.tie_p, double(philox::uniform(w)));
    EXPECT_GT(r.x[size_t(r.tie_element)], 0.0f);
    const uint32_t thr = philox::drop_threshold(r.tie_p);
    EXPECT_FALSE(philox::dropped(w, thr)) << "u >= p keeps the tie";
    EXPECT_TRUE((w >> 8) <= thr) << "a <= drop test (keep u > p) would drop it";
    EXPECT_TRUE(r.tie_kept_traced && r.tie_kept_fused && r.tie_kept_unfused);
    EXPECT_TRUE(r.tie_kept.pass);
    // The sentence says the check is a separate run at another p than the panel's, and that u > p would drop
    // the tie (the old "(u > p would drop it)" after "kept at p = u" read as a contradiction).
    EXPECT_TRUE(contains(r.tie_kept.sentence, "a separate run at " + fmt("p = %.9g", r.tie_p) + ", element " +
                                                  std::to_string(r.tie_element) + "'s own u"))
        << r.tie_kept.sentence;
    EXPECT_TRUE(contains(r.tie_kept.sentence, "the panel's p is 0.5")) << r.tie_kept.sentence;
    EXPECT_TRUE(contains(r.tie_kept.sentence, "as keep = u >= p must; a kernel testing u > p would drop it"))
        << r.tie_kept.sentence;
    EXPECT_FALSE(contains(r.tie_kept.sentence, "(u > p would drop it)")) << r.tie_kept.sentence;
    // The rate moves by P(u == p) = 2^-24 under the swap: far inside the 99% interval.
    EXPECT_LT(std::ldexp(1.0, -24), 0.01 * r.sigma);
  }
}

// The Philox sentence says what the code does: element i's u is from word i % 4 of Philox-4x32-10 at
// counter i / 4 keyed by the seed (computed here from philox4x32_10 itself), which is not tl.rand's
// word 0 at counter i.
TEST(ReluDropoutStudy, PhiloxSentenceIsWhatTheMaskUses) {
  const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cpu, settings(4096, 0.5, 99));
  EXPECT_TRUE(contains(r.formula_line, "keep = u(Philox(seed, i)) >= p")) << r.formula_line;
  EXPECT_TRUE(contains(r.philox_line, "word i % 4 of Philox-4x32-10(seed, counter i / 4)")) << r.philox_line;
  EXPECT_TRUE(contains(r.philox_line, "not Triton's tl.rand mask (word 0 of Philox(seed, counter i))")) << r.philox_line;
  const std::vector<uint8_t> keep = r.trace.keep.to_host();
  const uint32_t thr = philox::drop_threshold(r.p);
  const philox::U32x2 key{{uint32_t(r.seed), uint32_t(r.seed >> 32)}};
  int64_t same = 0, same_as_word0 = 0;
  for (int64_t i = 0; i < r.n; ++i) {
    const philox::U32x4 g = philox::philox4x32_10(philox::U32x4{{uint32_t(i / 4), 0u, 0u, 0u}}, key);
    const philox::U32x4 t = philox::philox4x32_10(philox::U32x4{{uint32_t(i), 0u, 0u, 0u}}, key);
    const bool kept = keep[size_t(i)] == rd::kKept;
    same += kept == !philox::dropped(g.v[i % 4], thr);
    same_as_word0 += kept == !philox::dropped(t.v[0], thr);
  }
  EXPECT_EQ(same, r.n);
  EXPECT_LT(same_as_word0, r.n * 3 / 4) << "the tl.rand scheme should agree only by chance (about half)";
}

// The fusion sentence on a GPU: which regime it names follows from the two measured times it states.
TEST(ReluDropoutStudy, FusionSentenceNamesTheRegimeItsNumbersShow) {
  KL_REQUIRE_CUDA();
  const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cuda, settings(65536, 0.5, 1));
  EXPECT_GT(r.big_n, r.n);
  EXPECT_NEAR(r.bytes_time_us, r.t_fused_big_ms * 1e3 * double(r.n) / double(r.big_n), 1e-9);
  EXPECT_EQ(r.launch_bound, r.t_fused_ms * 1e3 > 2.0 * r.bytes_time_us);
  EXPECT_EQ(r.fusion_line.rfind(r.launch_bound ? "launch-bound" : "not launch-bound", 0), 0u) << r.fusion_line;
  EXPECT_TRUE(contains(r.fusion_line, fmt("%.2fx", r.t_unfused_ms / r.t_fused_ms))) << r.fusion_line;
  EXPECT_TRUE(contains(r.fusion_line, fmt("%.2fx", r.t_unfused_big_ms / r.t_fused_big_ms))) << r.fusion_line;
  EXPECT_TRUE(r.gpu_line.empty()) << r.gpu_line;
}

// On the CPU there is no launch to be bound by, and the CPU's 0.9x-1.3x fusion ratios teach nothing about a
// GPU: the study says what it measured, that CPU timings do not show what a GPU does, the bytes' ratio
// (16 against 8 per element: about 2x) and the H200's recorded figure (docs/perf/h200.json).
TEST(ReluDropoutStudy, CpuTimingsSayWhatAGpuDoesInstead) {
  const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cpu, settings(65536, 0.5, 1));
  EXPECT_FALSE(r.launch_bound);
  EXPECT_EQ(r.fusion_line.find("launch-bound"), std::string::npos) << r.fusion_line;
  EXPECT_EQ(r.fusion_line.rfind("measured on this CPU", 0), 0u) << r.fusion_line;
  EXPECT_TRUE(contains(r.fusion_line, fmt("%.2fx", r.t_unfused_ms / r.t_fused_ms))) << r.fusion_line;
  EXPECT_TRUE(contains(r.fusion_line, fmt("%.2fx", r.t_unfused_big_ms / r.t_fused_big_ms))) << r.fusion_line;
  const double q = r.t_unfused_ms / r.t_fused_ms;
  EXPECT_TRUE(contains(r.time_title, q >= 1 ? fmt("fused %.2fx faster", q) : fmt("fused %.2fx slower", 1 / q))) << r.time_title;
  EXPECT_FALSE(contains(r.time_title, "unfused / fused")) << r.time_title;  // the bars read fused first
  EXPECT_EQ(r.big_fused_label, fmt("fused, %.0f MB", 8.0 * double(r.big_n) / 1e6));
  const study::GpuExpectation g = study::relu_dropout_on_gpu();
  EXPECT_EQ(r.gpu_line, g.sentence);
  EXPECT_EQ(g.bytes_ratio, 2.0);
  EXPECT_TRUE(contains(g.sentence, "CPU timings do not show what a GPU does")) << g.sentence;
  EXPECT_TRUE(contains(g.sentence, "8 bytes per element against 16 should take about 2x less time")) << g.sentence;
  // The recorded figure, from the embedded file itself.
  const peers::Section* mem = peers::embedded().find("memory");
  ASSERT_NE(mem, nullptr);
  for (const peers::Row& row : mem->rows)
    if (row.name == "ReLU + dropout fused") {
      EXPECT_EQ(g.recorded_gbs, *row.gbs[0]);
      EXPECT_TRUE(contains(g.sentence, fmt("%.0f GB/s", *row.gbs[0]) + fmt(" (%.2f of a copy)", *row.values[0])))
          << g.sentence;
    }
  EXPECT_GT(g.recorded_gbs, 0.0);
  EXPECT_TRUE(contains(g.sentence, "torch's relu then F.dropout (unfused)")) << g.sentence;
  const std::vector<std::string> lines = study::relu_dropout_report(r).lines;
  EXPECT_NE(std::find(lines.begin(), lines.end(), r.gpu_line), lines.end());
}

TEST(ReluDropoutStudy, CpuAndCudaDrawTheSameMaskAndCounts) {
  KL_REQUIRE_CUDA();
  const ParamValues v = settings(100003, 0.37, test::next_seed(), 512);
  const study::ReluDropoutResult c = study::run_relu_dropout(Backend::Cpu, v);
  const study::ReluDropoutResult g = study::run_relu_dropout(Backend::Cuda, v);
  EXPECT_EQ(c.trace.keep.to_host(), g.trace.keep.to_host());
  EXPECT_EQ(c.hist, g.hist);
  EXPECT_EQ(c.seed_rates, g.seed_rates);
  EXPECT_EQ(c.hist_title, g.hist_title);
  EXPECT_TRUE(g.matches_reference.pass && g.bit_for_bit.pass && g.tie_kept.pass);
}

TEST(ReluDropoutStudy, OutOfRangeSettingsAreInputErrors) {
  ParamValues v(study::relu_dropout_params());
  EXPECT_THROW(v.set("p", "1"), InputError);
  EXPECT_THROW(v.set("n", "2000000"), InputError);
}

TEST(ReluDropoutStudy, RegistryEntryReportsChecksAndNumbers) {
  const study::Entry* e = study::find("relu-dropout");
  ASSERT_NE(e, nullptr);
  ParamValues v(e->params());
  v.set("n", "10000");
  const study::Report rep = e->run(Backend::Cpu, v);
  ASSERT_EQ(rep.checks.size(), 4u);
  // The exact checks pass; whether this seed's rate is inside its 99% interval is a 1-in-100 event.
  for (const study::Check& c : rep.checks)
    if (c.name != "rate_inside_interval") EXPECT_TRUE(c.pass) << c.sentence;
  EXPECT_EQ(rep.checks[2].name, "rate_inside_interval");
  EXPECT_EQ(rep.checks[2].pass, rep.numbers["rate"] >= rep.numbers["interval_99"][0] &&
                                    rep.numbers["rate"] <= rep.numbers["interval_99"][1]);
  EXPECT_EQ(rep.numbers["n"], 10000);
  EXPECT_EQ(rep.numbers["in_spike"], rep.numbers["survivors"]);
  EXPECT_EQ(study::registry()[0].panel, "vector-add");
}

// The panel's opening line: the rate inside its interval and the one spike, with the study's numbers.
TEST(ReluDropoutStudy, NoticeStatesTheRateAndTheSpike) {
  const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cpu, settings(65536, 0.5, 1234));
  EXPECT_EQ(r.notice, "dropped " + std::to_string(r.dropped) + " of 65536 = " + fmt("%.4f", r.rate) +
                          ", inside the 99% interval [" + fmt("%.4f", r.lo99) + ", " + fmt("%.4f", r.hi99) +
                          "] around p = 0.5, and every survivor is exactly x / (1 - p) = 2x: a random kernel is "
                          "checked by its distribution");
  EXPECT_EQ(study::relu_dropout_report(r).notice, r.notice);
}

}  // namespace
}  // namespace kl
