// What the "Inside the fast kernel" view concludes (kernels/studies/timeline_study.*), on the CPU: the recording
// embedded at build time is docs/perf/timeline-h200.json and loads; its summaries are what docs/perf-log.md
// says of it (the share of time a product was in flight per CTA, the TFLOP/s, the cost of recording); the facts
// on a timeline computed by hand; the "Notice: ..." line held to the numbers it quotes; the names, titles,
// provenance and windows the view uses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "kernels/runtime/errors.h"
#include "kernels/studies/timeline_study.h"
#include "test_util.h"

namespace kl {
namespace {

namespace ts = timeline_study;
using timeline::Event;
using timeline::Lane;
using timeline::Phase;
using timeline::Recording;

std::string source_root() {
  const std::string here = __FILE__;  // .../tests/kernels/studies/test_timeline_study.cpp
  std::string root = here.substr(0, here.rfind("/tests/"));
  if (root.empty() || root[0] != '/') {
    const std::string bin = KL_BINARY;
    root = bin.substr(0, bin.rfind('/')) + "/" + root;
  }
  return root;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
std::string pct(double share) { return fixed(100.0 * share, 0) + "%"; }

TEST(TimelineStudy, TheEmbeddedRecordingIsTheDocsFileAndLoads) {
  const timeline::File disk = timeline::load(source_root() + "/" + ts::kSourcePath);
  const timeline::File& f = ts::embedded();
  ASSERT_EQ(f.recordings.size(), disk.recordings.size()) << "rebuild: the embedded copy is stale";
  ASSERT_EQ(f.recordings.size(), 6u);
  for (size_t i = 0; i < f.recordings.size(); ++i) {
    const Recording &a = f.recordings[i], &b = disk.recordings[i];
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.date, b.date);
    EXPECT_DOUBLE_EQ(a.plain_ms, b.plain_ms);
    ASSERT_EQ(a.ctas.size(), b.ctas.size());
    for (size_t c = 0; c < a.ctas.size(); ++c)
      for (size_t l = 0; l < a.ctas[c].lanes.size(); ++l)
        EXPECT_EQ(a.ctas[c].lanes[l].events.size(), b.ctas[c].lanes[l].events.size());
    EXPECT_EQ(a.device, f.recordings[0].device) << "one machine made them all";
    EXPECT_TRUE(a.device.find("H100") != std::string::npos || a.device.find("H200") != std::string::npos) << a.device;
    EXPECT_TRUE(a.same_output) << i;
  }
  // What the view lists: the forward's four recordings by name, the backward's two (its default, and the wgmma
  // kernel with per-thread dQ atomics and cp.async loads it is compared with).
  std::vector<std::string> fwd, bwd;
  for (const ts::Named& n : ts::named(f, timeline::kForward)) fwd.push_back(n.name);
  for (const ts::Named& n : ts::named(f, timeline::kBackward)) bwd.push_back(n.name);
  EXPECT_EQ(fwd, (std::vector<std::string>{"d64", "d128", "d128-causal", "d128-wgmma"}));
  EXPECT_EQ(bwd, (std::vector<std::string>{"d128", "d128-wgmma"}));
}

// docs/perf-log.md's table of these recordings (its last "## Inside the fast kernel" section: the recordings
// are made again as the kernels change): "| forward d = 64 | ... | 0.157 ms, 438.7 TFLOP/s | +22.1% |
// 93%, 91%, 92% |", one row per recording in the file's order.
struct LogRow {
  double ms = 0, tflops = 0, overhead = 0;
  std::vector<int> shares;
};
std::vector<LogRow> perf_log_rows() {
  const std::string log = read_file(source_root() + "/docs/perf-log.md");
  const size_t at = log.rfind("## Inside the fast kernel");
  EXPECT_NE(at, std::string::npos);
  std::istringstream in(log.substr(at));
  std::string line;
  std::vector<LogRow> rows;
  const std::regex row(R"(\| (?:forward|backward)[^|]*\|[^|]*\| ([0-9.]+) ms, ([0-9.]+) TFLOP/s \| \+([0-9.]+)% \| ([0-9%, ]+) \|)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    LogRow r;
    r.ms = std::stod(m[1]), r.tflops = std::stod(m[2]), r.overhead = std::stod(m[3]);
    std::istringstream shares(m[4].str());
    std::string s;
    while (std::getline(shares, s, ',')) r.shares.push_back(std::stoi(s));
    rows.push_back(r);
  }
  return rows;
}

TEST(TimelineStudy, SummariesAreWhatThePerfLogSaysOfTheRecording) {
  const timeline::File& f = ts::embedded();
  const std::vector<LogRow> rows = perf_log_rows();
  ASSERT_EQ(rows.size(), f.recordings.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Recording& r = f.recordings[i];
    const ts::Facts x = ts::facts(r);
    EXPECT_EQ(fixed(x.plain_ms, 3), fixed(rows[i].ms, 3)) << i;
    EXPECT_EQ(fixed(x.tflops, 1), fixed(rows[i].tflops, 1)) << i;
    EXPECT_EQ(fixed(100 * x.overhead, 1), fixed(rows[i].overhead, 1)) << i;
    ASSERT_EQ(x.ctas.size(), rows[i].shares.size()) << i;
    for (size_t c = 0; c < x.ctas.size(); ++c)
      EXPECT_EQ(pct(x.ctas[c].tensor_share), std::to_string(rows[i].shares[c]) + "%") << i << " CTA " << c;
    // The facts agree with the data model's own summary.
    const timeline::Summary s = timeline::summarize(r);
    EXPECT_DOUBLE_EQ(x.tensor_share, s.tensor_share);
    EXPECT_DOUBLE_EQ(x.overlap, s.overlap);
    double idle = 0;
    for (const ts::IdleShare& k : x.idle) idle += k.share;
    EXPECT_NEAR(idle, 1.0, 1e-9) << i;
  }
}

Event ev(Phase p, int step, int tile, double a, double b) {
  Event e;
  e.phase = p, e.step = step, e.tile = tile, e.start_ns = a, e.end_ns = b;
  return e;
}

// One CTA, two warpgroups and a producer, worked out by hand:
//   warpgroup 0: setup 0-10, issue-s 10-20, wait-s 20-40 (S in flight 10-40), softmax 40-100, epilogue 100-120
//   warpgroup 1: setup 0-10, wait-turn 10-40, issue-s 40-50, wait-s 50-90 (in flight 40-90), softmax 90-130
// Some product in flight: 10-90 (80 of the CTA's 130 ns). With none: 0-10 (both setups, 20 lane-ns), 90-130
// (warpgroup 0: softmax 90-100 and the epilogue 100-120 = 30; warpgroup 1: softmax 90-130 = 40): 90 lane-ns.
Recording by_hand(const std::string& path, int tiles) {
  Recording r;
  r.kernel = timeline::kForward;
  r.path = path;
  r.requested = path == "wgmma-persistent-q2-late" ? "auto" : path;
  r.launch = "x";
  r.B = 1, r.H = 1, r.Lq = r.Lk = 1024, r.d = 128;
  r.grid_ctas = 4, r.block_m = 128, r.block_n = 128;
  r.device = "NVIDIA H200", r.date = "2026-12-02", r.cuda = "13.0";
  r.clock_ghz = 1.7;
  r.plain_ms = 0.5, r.traced_ms = 0.55, r.iterations = 20, r.recorded_ms = 0.6, r.flops = 1e9;
  r.same_output = true;
  timeline::Cta cta;
  cta.index = 0, cta.sm = 3;
  Lane w0{"warpgroup 0", {ev(Phase::Setup, -1, -1, 0, 10), ev(Phase::IssueS, 0, 0, 10, 20), ev(Phase::WaitS, 0, 0, 20, 40),
                          ev(Phase::Softmax, 0, tiles > 1 ? 7 : 0, 40, 100), ev(Phase::Epilogue, -1, 0, 100, 120)}};
  Lane w1{"warpgroup 1", {ev(Phase::Setup, -1, -1, 0, 10), ev(Phase::WaitTurn, 0, 0, 10, 40), ev(Phase::IssueS, 0, 0, 40, 50),
                          ev(Phase::WaitS, 0, 0, 50, 90), ev(Phase::Softmax, 0, 0, 90, 130)}};
  Lane pr{"producer", {ev(Phase::Setup, -1, -1, 0, 2), ev(Phase::LoadK, 0, 0, 2, 5)}};
  cta.lanes = {w0, w1, pr};
  r.ctas.push_back(cta);
  return r;
}

TEST(TimelineStudy, FactsOnATimelineWorkedOutByHand) {
  const ts::Facts f = ts::facts(by_hand("wgmma", 1));
  ASSERT_EQ(f.ctas.size(), 1u);
  const ts::CtaFacts& c = f.ctas[0];
  EXPECT_DOUBLE_EQ(c.span_ns, 130);
  EXPECT_DOUBLE_EQ(c.tensor_share, 80.0 / 130);
  EXPECT_DOUBLE_EQ(c.before_first_ns, 10);
  EXPECT_DOUBLE_EQ(c.after_last_ns, 40);
  EXPECT_EQ(c.tiles, 1);
  ASSERT_EQ(c.lanes.size(), 2u);  // the consumers only
  EXPECT_EQ(c.lanes[0].role, "warpgroup 0");
  EXPECT_DOUBLE_EQ(c.lanes[0].in_flight, 30.0 / 120);
  EXPECT_DOUBLE_EQ(c.lanes[1].in_flight, 50.0 / 130);
  // The softmax and the epilogue (warpgroup 0: 40-120, warpgroup 1: 90-130) under a product: 40-90 of it.
  EXPECT_DOUBLE_EQ(c.overlap, 50.0 / 120);
  EXPECT_DOUBLE_EQ(f.ramp_ns, 50);
  // No product in flight: softmax 50 lane-ns (10 + 40), setup 20, epilogue 20, of 90.
  ASSERT_EQ(f.idle.size(), 3u);
  EXPECT_EQ(f.idle[0].phase, Phase::Softmax);
  EXPECT_DOUBLE_EQ(f.idle[0].share, 50.0 / 90);
  EXPECT_DOUBLE_EQ(f.idle[1].share, 20.0 / 90);
  EXPECT_DOUBLE_EQ(f.idle[2].share, 20.0 / 90);
  EXPECT_EQ(ts::facts(by_hand("wgmma-persistent-q2-late", 2)).tiles_max, 2);
}

TEST(TimelineStudy, TheNoticeQuotesItsNumbers) {
  // Without a counterpart: the share, what the warpgroups did with none in flight, the TFLOP/s.
  const std::vector<Recording> one = {by_hand("wgmma", 1)};
  const ts::Facts f = ts::facts(one[0]);
  EXPECT_EQ(ts::notice(one, 0), "wgmma (one CTA per tile) has a tensor-core product in flight " +
                                    pct(f.tensor_share) + " of the time; with none in flight its warpgroups are mostly " +
                                    "in the softmax (" + pct(50.0 / 90) + "), starting the CTA (" + pct(20.0 / 90) +
                                    ") and writing the output (" + pct(20.0 / 90) + "). Measured: " +
                                    fixed(f.tflops, 0) + " TFLOP/s.");
  // Against the persistent kernel of the same shape: both shares, the one-tile CTA's ramp against the
  // persistent CTA's, both TFLOP/s.
  std::vector<Recording> two = {by_hand("wgmma-persistent-q2-late", 2), by_hand("wgmma", 1)};
  two[0].plain_ms = 0.4;
  const ts::Facts p = ts::facts(two[0]), w = ts::facts(two[1]);
  EXPECT_EQ(ts::counterpart(two, 0), 1);
  EXPECT_EQ(ts::counterpart(two, 1), 0);
  EXPECT_EQ(ts::notice(two, 0),
            "wgmma-persistent-q2-late (the by-shape default) has a tensor-core product in flight " +
                pct(p.tensor_share) + " of the time, wgmma (one CTA per tile) " + pct(w.tensor_share) +
                ": a wgmma CTA spends 0.1 µs of its 0.1 µs (" + pct(50.0 / 130) +
                ") before its first product and after its last, for one tile; a wgmma-persistent-q2-late CTA 0.1 µs "
                "for its 2 tiles. Measured: " + fixed(p.tflops, 0) + " against " + fixed(w.tflops, 0) + " TFLOP/s.");
  // Another shape is no counterpart.
  two[1].causal = true;
  EXPECT_EQ(ts::counterpart(two, 0), -1);
}

TEST(TimelineStudy, TheEmbeddedNoticeComparesTheDefaultWithOneCtaPerTile) {
  const timeline::File& f = ts::embedded();
  const std::vector<Recording>& all = f.recordings;
  ASSERT_EQ(all[1].path, "wgmma-persistent-q2-late");
  ASSERT_EQ(all[3].path, "wgmma");
  EXPECT_EQ(ts::counterpart(all, 1), 3);
  EXPECT_EQ(ts::counterpart(all, 3), 1);
  EXPECT_EQ(ts::counterpart(all, 0), -1);  // d = 64: only its default was recorded
  const ts::Facts p = ts::facts(all[1]), w = ts::facts(all[3]);
  auto us = [](double ns) { return fixed(ns * 1e-3, 1) + " µs"; };
  const std::string n = ts::notice(all, 1);
  for (const std::string& part :
       {"wgmma-persistent-q2-late (the by-shape default) has a tensor-core product in flight " + pct(p.tensor_share),
        "wgmma (one CTA per tile) " + pct(w.tensor_share), "a wgmma CTA spends " + us(w.ramp_ns) + " of its " + us(w.span_ns),
        "(" + pct(w.ramp_ns / w.span_ns) + ")", "a wgmma-persistent-q2-late CTA " + us(p.ramp_ns) + " for its " +
            std::to_string(p.tiles_min) + "-" + std::to_string(p.tiles_max) + " tiles",
        "Measured: " + fixed(p.tflops, 0) + " against " + fixed(w.tflops, 0) + " TFLOP/s."})
    EXPECT_NE(n.find(part), std::string::npos) << "'" << part << "' not in: " << n;
  // The recording's numbers as the perf log states them (the tenth session of 2026-12-06, on an H200): 92%
  // against 86%, 622 against 574 TFLOP/s.
  EXPECT_EQ(pct(p.tensor_share), "92%");
  EXPECT_EQ(pct(w.tensor_share), "86%");
  EXPECT_LT(w.tflops, p.tflops);
  // The backward: its default (wgmma-tma) against the wgmma kernel it replaced, and what the default's
  // warpgroups still do while no product is in flight, largest first.
  ASSERT_EQ(all[4].path, "wgmma-tma");
  ASSERT_EQ(all[5].path, "wgmma");
  EXPECT_EQ(ts::counterpart(all, 4), 5);
  const ts::Facts b = ts::facts(all[4]), bw = ts::facts(all[5]);
  const std::string nb = ts::notice(all, 4);
  for (const std::string& part :
       {"wgmma-tma (the default) has a tensor-core product in flight " + pct(b.tensor_share) + " of the time",
        "wgmma " + pct(bw.tensor_share), std::string(ts::prose(b.idle[0].phase)) + " (" + pct(b.idle[0].share) + ")",
        "Measured: " + fixed(b.tflops, 0) + " against " + fixed(bw.tflops, 0) + " TFLOP/s."})
    EXPECT_NE(nb.find(part), std::string::npos) << "'" << part << "' not in: " << nb;
  EXPECT_GT(b.tensor_share, bw.tensor_share);
  // The lesson of the pair: the wgmma kernel's largest idle part, adding dQ with per-thread atomics, is a
  // smaller share of a smaller idle time in the default.
  EXPECT_EQ(bw.idle[0].phase, Phase::AddDQ) << ts::notice(all, 5);
  auto add_dq = [](const ts::Facts& x) {
    for (const ts::IdleShare& k : x.idle)
      if (k.phase == Phase::AddDQ) return k.share * (1 - x.tensor_share);
    return 0.0;
  };
  EXPECT_LT(add_dq(b), add_dq(bw));
}

TEST(TimelineStudy, NamesTitlesAndProvenance) {
  const Recording r = by_hand("wgmma-persistent-q2-late", 2);
  EXPECT_EQ(ts::short_name(r), "d128");
  Recording c = r;
  c.causal = true;
  EXPECT_EQ(ts::short_name(c), "d128-causal");
  EXPECT_EQ(ts::short_name(by_hand("wgmma", 1)), "d128-wgmma");
  Recording b = r;
  b.kernel = timeline::kBackward, b.path = "wgmma", b.requested = "wgmma", b.dq = "deterministic";
  EXPECT_EQ(ts::short_name(b), "d128-wgmma-deterministic");  // wgmma's dK/dV kernel (cp.async loads)
  EXPECT_EQ(ts::path_note(b), "");
  b.path = b.requested = "wgmma-tma";  // the default path's dK/dV kernel (bulk-copy loads)
  EXPECT_EQ(ts::short_name(b), "d128-deterministic");
  EXPECT_EQ(ts::path_note(b), "the default");
  b.dq = "atomic", b.path = b.requested = "wgmma-tma";  // the backward's default in the atomic mode
  EXPECT_EQ(ts::short_name(b), "d128");
  EXPECT_EQ(ts::path_note(b), "the default");
  b.path = b.requested = "wgmma";
  EXPECT_EQ(ts::short_name(b), "d128-wgmma");
  EXPECT_EQ(ts::path_note(b), "");
  timeline::File f;
  f.recordings = {r, r, by_hand("wgmma", 1)};
  const std::vector<ts::Named> n = ts::named(f, timeline::kForward);
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(n[1].name, "d128-2");  // repeated names stay unique
  EXPECT_EQ(ts::title(r), "forward, d = 128, wgmma-persistent-q2-late (the by-shape default), B=1 H=1 L=1024");
  EXPECT_EQ(ts::provenance(r), "recorded on NVIDIA H200, 2026-12-02 (CUDA 13.0)");
  for (int p = 0; p < int(Phase::Done); ++p) {
    EXPECT_NE(std::string(ts::short_label(Phase(p))), "");
    EXPECT_NE(std::string(ts::prose(Phase(p))), "");
  }
  EXPECT_THROW(ts::short_label(Phase::Done), RuntimeError);
}

// A recording of the backward's default kernel (wgmma-tma, dQ atomic) on the steps it took before it took 80 query
// rows a step at d = 128 (fast_backward_steps80) says so where it says when it was made; one on the steps the kernel
// takes, another path, the deterministic mode or d = 64 says only when.
TEST(TimelineStudy, ProvenanceSaysWhereTheKernelHasChangedSince) {
  Recording b = by_hand("wgmma-tma", 1);
  b.kernel = timeline::kBackward, b.requested = "wgmma-tma", b.dq = "atomic";
  b.B = 2, b.H = 16, b.Lq = b.Lk = 2048, b.block_m = 64;
  const std::string when = "recorded on NVIDIA H200, 2026-12-02 (CUDA 13.0)";
  EXPECT_EQ(ts::provenance(b), when + ", when this kernel took 64 query rows a step (it takes 80 at this shape now)");
  EXPECT_NE(ts::summary_lines(b, ts::facts(b))[0].find("CTAs of 64 x 128 tiles (the kernel takes 80 query rows a step "
                                                       "here now)"),
            std::string::npos);
  b.causal = true;  // under the mask too
  EXPECT_EQ(ts::provenance(b), when + ", when this kernel took 64 query rows a step (it takes 80 at this shape now)");
  for (auto change : std::vector<void (*)(Recording&)>{
           [](Recording& x) { x.block_m = 80; }, [](Recording& x) { x.path = x.requested = "wgmma"; },
           [](Recording& x) { x.dq = "deterministic"; }, [](Recording& x) { x.d = 64, x.block_m = 128; },
           [](Recording& x) { x.Hkv = 2; }}) {
    Recording x = b;
    change(x);
    EXPECT_EQ(ts::provenance(x), when) << x.path << " " << x.dq << " d " << x.d << " Hkv " << x.Hkv;
    EXPECT_EQ(ts::summary_lines(x, ts::facts(x))[0].find("now)"), std::string::npos);
  }
}

TEST(TimelineStudy, TheViewOpensOnFourStepsOfTheFirstTile) {
  const timeline::File& f = ts::embedded();
  const timeline::Cta& cta = f.recordings[1].ctas[0];
  const ts::Window w = ts::steady(cta, false), a = ts::steady(cta, true);
  // From the first warpgroup's third S product (K/V step 2) to its seventh (step 6).
  std::vector<double> issues;
  for (const Event& e : cta.lanes[0].events)
    if (e.phase == Phase::IssueS && issues.size() < 7) issues.push_back(e.start_ns);
  ASSERT_EQ(issues.size(), 7u);
  EXPECT_DOUBLE_EQ(w.t0, issues[2]);
  EXPECT_DOUBLE_EQ(w.t1, issues[6]);
  EXPECT_DOUBLE_EQ(a.t0, issues[2] - ts::cta_start(cta));
  const ts::Window all = ts::whole(cta, true);
  EXPECT_DOUBLE_EQ(all.t0, 0);
  EXPECT_GT(all.t1, w.t1 - ts::cta_start(cta));
  // A tile of fewer steps: the whole span.
  const Recording r = by_hand("wgmma", 1);
  EXPECT_DOUBLE_EQ(ts::steady(r.ctas[0], false).t1, ts::whole(r.ctas[0], false).t1);
}

}  // namespace
}  // namespace kl
