// The timeline's data model (kernels/measure/timeline.h), on the CPU: the phase table, the JSON file round
// trip, a bad file refused with one line naming the field, the kernels' buffer read back (and refused where
// malformed), what the summaries add up to on a timeline computed by hand, the request's checks, and the
// summary's sentences held to the recording's numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "kernels/measure/timeline.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

using timeline::Event;
using timeline::Lane;
using timeline::Phase;
using timeline::Recording;

Event ev(Phase p, int step, int tile, double a, double b) {
  Event e;
  e.phase = p, e.step = step, e.tile = tile, e.start_ns = a, e.end_ns = b;
  return e;
}

// A small forward recording: 2 CTAs of 2 warpgroups and a producer.
Recording sample() {
  Recording r;
  r.kernel = timeline::kForward;
  r.path = "wgmma-persistent-q2-late";
  r.requested = "auto";
  r.launch = "flash_fwd_wgmma_persistent_d128_bf16_q2_late_traced";
  r.B = 1, r.H = 16, r.Hkv = 16, r.Lq = r.Lk = 4096, r.d = 128;  // Hkv as the reader gives it
  r.grid_ctas = 132, r.block_m = 128, r.block_n = 128;
  r.device = "NVIDIA H200", r.date = "2026-12-03", r.cuda = "13.0";
  r.clock_ghz = 1.755;
  r.plain_ms = 0.412, r.traced_ms = 0.425, r.iterations = 20, r.recorded_ms = 0.431;
  r.flops = 4.0 * 16 * 4096.0 * 4096 * 128;
  r.same_output = true;
  for (int c : {0, 131}) {
    timeline::Cta cta;
    cta.index = c, cta.sm = c / 2;
    Lane w0{"warpgroup 0", {ev(Phase::Setup, -1, -1, 0, 10.25), ev(Phase::Schedule, -1, c, 10.25, 12),
                            ev(Phase::IssueS, 0, c, 12, 14), ev(Phase::WaitS, 0, c, 14, 100.04),
                            ev(Phase::Softmax, 0, c, 100.04, 180)}};
    Lane w1{"warpgroup 1", {ev(Phase::Setup, -1, -1, 0.5, 11), ev(Phase::WaitTurn, 0, c, 11, 90)}};
    Lane pr{"producer", {ev(Phase::Setup, -1, -1, 1, 2), ev(Phase::LoadQ, -1, c, 2, 3), ev(Phase::LoadK, 0, c, 3, 4)}};
    cta.lanes = {w0, w1, pr};
    r.ctas.push_back(cta);
  }
  return r;
}

void expect_same(const Recording& a, const Recording& b) {
  EXPECT_EQ(a.kernel, b.kernel);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.requested, b.requested);
  EXPECT_EQ(a.launch, b.launch);
  EXPECT_EQ(a.B, b.B);
  EXPECT_EQ(a.H, b.H);
  EXPECT_EQ(a.Hkv, b.Hkv);
  EXPECT_EQ(a.Lq, b.Lq);
  EXPECT_EQ(a.Lk, b.Lk);
  EXPECT_EQ(a.d, b.d);
  EXPECT_EQ(a.causal, b.causal);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.grid_ctas, b.grid_ctas);
  EXPECT_EQ(a.block_m, b.block_m);
  EXPECT_EQ(a.block_n, b.block_n);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.date, b.date);
  EXPECT_EQ(a.cuda, b.cuda);
  EXPECT_DOUBLE_EQ(a.clock_ghz, b.clock_ghz);
  EXPECT_DOUBLE_EQ(a.plain_ms, b.plain_ms);
  EXPECT_DOUBLE_EQ(a.traced_ms, b.traced_ms);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_DOUBLE_EQ(a.recorded_ms, b.recorded_ms);
  EXPECT_DOUBLE_EQ(a.flops, b.flops);
  EXPECT_EQ(a.same_output, b.same_output);
  ASSERT_EQ(a.ctas.size(), b.ctas.size());
  for (size_t c = 0; c < a.ctas.size(); ++c) {
    EXPECT_EQ(a.ctas[c].index, b.ctas[c].index);
    EXPECT_EQ(a.ctas[c].sm, b.ctas[c].sm);
    ASSERT_EQ(a.ctas[c].lanes.size(), b.ctas[c].lanes.size());
    for (size_t l = 0; l < a.ctas[c].lanes.size(); ++l) {
      const Lane &x = a.ctas[c].lanes[l], &y = b.ctas[c].lanes[l];
      EXPECT_EQ(x.role, y.role);
      ASSERT_EQ(x.events.size(), y.events.size());
      for (size_t i = 0; i < x.events.size(); ++i) {
        EXPECT_EQ(x.events[i].phase, y.events[i].phase);
        EXPECT_EQ(x.events[i].step, y.events[i].step);
        EXPECT_EQ(x.events[i].tile, y.events[i].tile);
        EXPECT_NEAR(x.events[i].start_ns, y.events[i].start_ns, 0.051);  // written to 0.1 ns
        EXPECT_NEAR(x.events[i].end_ns, y.events[i].end_ns, 0.051);
      }
    }
  }
}

TEST(Timeline, EveryPhaseHasOneNameThatReadsBack) {
  std::set<std::string> names;
  for (int i = 0; i < int(Phase::Done); ++i) {
    const timeline::PhaseInfo& info = timeline::phase_info(Phase(i));
    EXPECT_EQ(int(info.phase), i);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    Phase back = Phase::Done;
    ASSERT_TRUE(timeline::phase_from_name(info.name, &back)) << info.name;
    EXPECT_EQ(back, Phase(i));
    EXPECT_NE(timeline::phase_names().find(info.name), std::string::npos);
  }
  Phase p;
  EXPECT_FALSE(timeline::phase_from_name("done", &p));  // the lane's end is no phase of the file
  EXPECT_THROW(timeline::phase_info(Phase::Done), RuntimeError);
  for (const timeline::Product& pr : timeline::products())
    EXPECT_EQ(timeline::phase_info(pr.issue).kind, timeline::PhaseKind::Issue) << pr.name;
}

TEST(Timeline, JsonRoundTrip) {
  timeline::File f;
  f.recordings = {sample(), sample(), sample()};
  Recording& b = f.recordings[1];
  b.kernel = timeline::kBackward, b.path = "wgmma", b.requested = "wgmma", b.dq = "atomic", b.causal = true;
  b.d = 64, b.same_output = false;
  f.recordings[2].Hkv = 2;  // grouped-query attention: 16 query heads over 2 K/V heads
  const std::string text = timeline::to_json(f);
  const timeline::File back = timeline::parse(text, "mem");
  ASSERT_EQ(back.recordings.size(), 3u);
  expect_same(f.recordings[0], back.recordings[0]);
  expect_same(f.recordings[1], back.recordings[1]);
  expect_same(f.recordings[2], back.recordings[2]);
  // "Hkv" is written only where K and V have fewer heads (the recordings before it read as they were); a
  // recording's Hkv of 0 means H.
  size_t hkv = 0;
  for (size_t at = text.find("\"Hkv\""); at != std::string::npos; at = text.find("\"Hkv\"", at + 1)) ++hkv;
  EXPECT_EQ(hkv, 1u);
  Recording zero = sample();
  zero.Hkv = 0;
  EXPECT_EQ(timeline::to_json(timeline::File{{zero}}), timeline::to_json(timeline::File{{sample()}}));
  // Through a file, and again: the text is stable.
  const std::string path = test::test_file("round.json");
  timeline::save(f, path);
  const timeline::File again = timeline::load(path);
  EXPECT_EQ(timeline::to_json(again), timeline::to_json(back));
}

TEST(Timeline, BadFilesAreRefusedNamingTheField) {
  const std::string good = timeline::to_json(timeline::File{{sample()}});
  ASSERT_NO_THROW(timeline::parse(good, "f.json"));
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {"{\"schema\": 1", "{\"schema\": 2", "f.json: schema: expected an integer in [1, 1], got 2"},
      {"{\"schema\": 1, ", "{", "f.json: top level: missing field \"schema\""},
      {"\"kernel\":\"flash-attention\"", "\"kernel\":\"matmul\"", "f.json: recordings[0].kernel: expected \"flash-attention\""},
      {"\"path\":\"wgmma-persistent-q2-late\",", "", "f.json: recordings[0]: missing field \"path\""},
      {"\"d\":128", "\"d\":96", "f.json: recordings[0].shape.d: expected 64 or 128, got 96"},
      {"\"H\":16", "\"H\":16,\"Hkv\":3", "f.json: recordings[0].shape.Hkv: expected a divisor of H = 16, got 3"},
      {"\"H\":16", "\"H\":16,\"Hkv\":32", "f.json: recordings[0].shape.Hkv: expected an integer in [1, 16], got 32"},
      {"\"date\":\"2026-12-03\"", "\"date\":\"03/12/2026\"", "f.json: recordings[0].date: expected YYYY-MM-DD"},
      {"\"plain_ms\":0.412", "\"plain_ms\":-1", "f.json: recordings[0].time.plain_ms: expected a positive number, got -1"},
      {"\"same_output\":true", "\"same_output\":1", "f.json: recordings[0].same_output: expected true or false, got 1"},
      {"{\"index\": 131", "{\"index\": 132", "f.json: recordings[0].ctas[1].index: expected an integer in [0, 131], got 132"},
      {"[\"softmax\", 0, 0, 100, 180]", "[\"sofmax\", 0, 0, 100, 180]",
       "f.json: recordings[0].ctas[0].lanes[0].events[4][0]: unknown phase \"sofmax\" (allowed: setup, schedule"},
      {"[\"softmax\", 0, 0, 100, 180]", "[\"softmax\", 0, 0, 100, 99]",
       "f.json: recordings[0].ctas[0].lanes[0].events[4][4]: ends (99 ns) before it starts"},
      {"[\"softmax\", 0, 0, 100, 180]", "[\"softmax\", 0, 0, 50, 180]",
       "f.json: recordings[0].ctas[0].lanes[0].events[4][3]: starts (50 ns) before the previous event ends"},
      {"[\"softmax\", 0, 0, 100, 180]", "[\"softmax\", 0, 0, 100]",
       "f.json: recordings[0].ctas[0].lanes[0].events[4]: expected [phase, step, tile, start_ns, end_ns]"},
      {"[\"softmax\", 0, 0, 100, 180]", "[\"softmax\", -2, 0, 100, 180]",
       "f.json: recordings[0].ctas[0].lanes[0].events[4][1]: expected an integer in [-1, "},
      {"{\"role\": \"producer\", \"events\": [", "{\"role\": \"producer\", \"events\": [], \"x\": [",
       "f.json: recordings[0].ctas[0].lanes[2].events: expected at least one entry"},
  };
  for (const Case& c : cases) {
    const std::string bad = test::replaced(good, c.from, c.to);
    try {
      timeline::parse(bad, "f.json");
      ADD_FAILURE() << "accepted: " << c.to;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.expected, 0), 0u) << e.what() << "\nexpected: " << c.expected;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    }
  }
  EXPECT_THROW(timeline::parse("{not json", "f.json"), InputError);
  try {
    timeline::load(test::tmp_dir() + "/no-such-timeline.json");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-timeline.json: cannot read the file"), std::string::npos) << e.what();
  }
}

// ---- the kernels' buffer ----
struct FakeBuffer {
  int lanes, capacity;
  std::vector<uint32_t> w;
  FakeBuffer(int slots, int lanes_, int cap) : lanes(lanes_), capacity(cap) {
    w.assign(size_t(slots) * lanes * (timeline::kHeaderRecords + cap) * 4, 0u);
  }
  size_t rec(int slot, int lane, int i) const { return (size_t(slot * lanes + lane) * (timeline::kHeaderRecords + capacity) + i) * 4; }
  void put64(size_t at, uint64_t v) {
    w[at] = uint32_t(v);
    w[at + 1] = uint32_t(v >> 32);
  }
  // A lane as the recorder writes it: events (phase, step, tile, clock), anchors, header.
  void lane(int slot, int l, uint32_t sm, uint64_t gt0, uint64_t clk0, uint64_t gt1, uint64_t clk1,
            const std::vector<std::tuple<Phase, int, int, uint64_t>>& events) {
    for (size_t i = 0; i < events.size(); ++i) {
      const size_t at = rec(slot, l, timeline::kHeaderRecords + int(i));
      put64(at, std::get<3>(events[i]));
      w[at + 2] = uint32_t(std::get<0>(events[i])) | (uint32_t(std::get<1>(events[i])) << 8);
      w[at + 3] = uint32_t(std::get<2>(events[i]));
    }
    put64(rec(slot, l, 1), gt0), put64(rec(slot, l, 1) + 2, clk0);
    put64(rec(slot, l, 2), gt1), put64(rec(slot, l, 2) + 2, clk1);
    w[rec(slot, l, 0)] = uint32_t(events.size()), w[rec(slot, l, 0) + 1] = sm;
    w[rec(slot, l, 0) + 2] = timeline::kLaneMagic, w[rec(slot, l, 0) + 3] = uint32_t(l);
  }
};

TEST(Timeline, DecodeAlignsEachCtaByItsTimerAndConvertsCycles) {
  // 2 GHz: 2000 cycles a microsecond. CTA 7 starts at global 1000 ns, CTA 9 at 1500 ns; each SM's clock64
  // has its own origin.
  FakeBuffer b(2, 2, 8);
  b.lane(0, 0, 3, 1000, 50000, 3000, 54000, {{Phase::Setup, -1, 7, 50000}, {Phase::IssueS, 0, 7, 50200},
                                             {Phase::WaitS, 0, 7, 50300}, {Phase::Done, -1, -1, 53000}});
  b.lane(0, 1, 3, 1000, 50010, 3000, 54010, {{Phase::Setup, -1, 7, 50010}, {Phase::Done, -1, -1, 50020}});
  b.lane(1, 0, 4, 1500, 900000, 3500, 904000, {{Phase::Setup, -1, 9, 900000}, {Phase::Done, -1, -1, 902000}});
  b.lane(1, 1, 4, 1500, 900000, 3500, 904000, {{Phase::Epilogue, -1, 9, 900100}, {Phase::Done, -1, -1, 900200}});
  double ghz = 0;
  const std::vector<timeline::Cta> ctas = timeline::decode(b.w, {{7, 9}, {"warpgroup 0", "producer"}, 8}, &ghz);
  EXPECT_DOUBLE_EQ(ghz, 2.0);
  ASSERT_EQ(ctas.size(), 2u);
  EXPECT_EQ(ctas[0].index, 7);
  EXPECT_EQ(ctas[0].sm, 3);
  EXPECT_EQ(ctas[1].sm, 4);
  const Lane& l = ctas[0].lanes[0];
  EXPECT_EQ(l.role, "warpgroup 0");
  ASSERT_EQ(l.events.size(), 3u);  // Done closes the last phase and is not one
  EXPECT_EQ(l.events[1].phase, Phase::IssueS);
  EXPECT_EQ(l.events[1].tile, 7);
  EXPECT_EQ(l.events[0].step, -1);
  EXPECT_DOUBLE_EQ(l.events[0].start_ns, 0.0);    // the earliest CTA's first stamp
  EXPECT_DOUBLE_EQ(l.events[1].start_ns, 100.0);  // 200 cycles
  EXPECT_DOUBLE_EQ(l.events[2].end_ns, 1500.0);   // 3000 cycles
  EXPECT_DOUBLE_EQ(ctas[0].lanes[1].events[0].start_ns, 5.0);
  EXPECT_DOUBLE_EQ(ctas[1].lanes[0].events[0].start_ns, 500.0);  // placed by its own timer reading
  EXPECT_DOUBLE_EQ(ctas[1].lanes[1].events[0].start_ns, 550.0);
}

TEST(Timeline, DecodeRefusesABufferTheKernelsDidNotWrite) {
  auto lane = [](FakeBuffer& b, std::vector<std::tuple<Phase, int, int, uint64_t>> ev) {
    b.lane(0, 0, 1, 0, 0, 1000, 2000, ev);
  };
  double ghz = 0;
  const timeline::BufferLayout layout{{0}, {"warpgroup 0"}, 2};
  FakeBuffer none(1, 1, 2);  // no header: the CTA did not record
  EXPECT_THROW(timeline::decode(none.w, layout, &ghz), RuntimeError);
  FakeBuffer no_done(1, 1, 2);
  lane(no_done, {{Phase::Setup, -1, 0, 10}, {Phase::Softmax, 0, 0, 20}});
  EXPECT_THROW(timeline::decode(no_done.w, layout, &ghz), RuntimeError);
  FakeBuffer overflow(1, 1, 2);
  lane(overflow, {{Phase::Setup, -1, 0, 10}, {Phase::Done, -1, 0, 20}});
  overflow.w[0] = 3;  // three events written, room for two
  EXPECT_THROW(timeline::decode(overflow.w, layout, &ghz), RuntimeError);
  FakeBuffer unknown(1, 1, 2);
  lane(unknown, {{Phase::Count, -1, 0, 10}, {Phase::Done, -1, 0, 20}});
  EXPECT_THROW(timeline::decode(unknown.w, layout, &ghz), RuntimeError);
  FakeBuffer good(1, 1, 2);
  lane(good, {{Phase::Setup, -1, 0, 10}, {Phase::Done, -1, 0, 20}});
  EXPECT_NO_THROW(timeline::decode(good.w, layout, &ghz));
  EXPECT_THROW(timeline::decode(std::vector<uint32_t>(4), layout, &ghz), RuntimeError);  // too short
}

// ---- summaries ----
TEST(Timeline, SummariesAddUpOnATimelineComputedByHand) {
  // Warpgroup 0: S issued at 0, retired by its wait ending at 20; softmax 20-60 while warpgroup 1's P V (issued
  // at 30, retired at 90) runs; rescale 60-100. Warpgroup 1 idles (waits for its turn) 0-30.
  timeline::Cta cta;
  cta.index = 5;
  cta.lanes.push_back(Lane{"warpgroup 0", {ev(Phase::IssueS, 0, 5, 0, 5), ev(Phase::WaitS, 0, 5, 5, 20),
                                           ev(Phase::Softmax, 0, 5, 20, 60), ev(Phase::Rescale, 0, 5, 60, 100)}});
  cta.lanes.push_back(Lane{"warpgroup 1", {ev(Phase::WaitTurn, 0, 5, 0, 30), ev(Phase::IssuePV, 0, 5, 30, 35),
                                           ev(Phase::Softmax, 1, 5, 35, 80), ev(Phase::WaitPV, 0, 5, 80, 90)}});
  cta.lanes.push_back(Lane{"producer", {ev(Phase::LoadK, 0, 5, 0, 10), ev(Phase::IssueS, 0, 5, 10, 100)}});
  Recording r = sample();
  r.ctas = {cta};
  const timeline::Summary s = timeline::summarize(r);
  ASSERT_EQ(s.ctas.size(), 1u);
  const timeline::CtaSummary& c = s.ctas[0];
  EXPECT_EQ(c.index, 5);
  EXPECT_DOUBLE_EQ(c.span_ns, 100.0);
  // In flight: [0, 20] (S) and [30, 90] (P V); the producer's lane does not count.
  EXPECT_DOUBLE_EQ(c.tensor_share, 0.8);
  // Compute: softmax 20-60 (covered 30-60: 30), rescale 60-100 (60-90: 30), softmax 35-80 (45): 105 of 125.
  EXPECT_DOUBLE_EQ(c.overlap, 105.0 / 125.0);
  ASSERT_EQ(c.lanes.size(), 3u);
  EXPECT_DOUBLE_EQ(c.lanes[0].span_ns, 100.0);
  EXPECT_DOUBLE_EQ(c.lanes[0].in_flight_share, 0.2);
  EXPECT_DOUBLE_EQ(c.lanes[0].share[int(timeline::PhaseKind::Compute)], 0.8);
  EXPECT_DOUBLE_EQ(c.lanes[0].share[int(timeline::PhaseKind::Wait)], 0.15);
  EXPECT_DOUBLE_EQ(c.lanes[1].share[int(timeline::PhaseKind::Wait)], 40.0 / 90.0);
  EXPECT_DOUBLE_EQ(c.lanes[1].in_flight_share, 60.0 / 90.0);
  EXPECT_DOUBLE_EQ(s.span_ns, 100.0);
  EXPECT_DOUBLE_EQ(s.tensor_share, 0.8);
  // An issue never retired (the lane ended first) is not counted.
  EXPECT_TRUE(timeline::in_flight(cta.lanes[2]).empty());
  const std::vector<timeline::Interval> m = timeline::merged({{5, 9}, {0, 2}, {1, 3}, {9, 10}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(timeline::length(m), 3.0 + 5.0);
}

TEST(Timeline, SummarySentencesQuoteTheRecording) {
  const Recording r = sample();
  const std::vector<std::string> lines = timeline::summary_lines(r);
  ASSERT_EQ(lines.size(), 3u + r.ctas.size());
  EXPECT_NE(lines[0].find("wgmma-persistent-q2-late (the by-shape default)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("B=1 H=16 L=4096 d=128 non-causal bf16, NVIDIA H200, 2026-12-03"), std::string::npos);
  char tf[32];
  std::snprintf(tf, sizeof tf, "%.1f TFLOP/s", r.tflops());
  EXPECT_NE(lines[1].find("plain 0.412 ms (" + std::string(tf) + ")"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("instrumented 0.425 ms (+3.2%)"), std::string::npos) << lines[1];  // 0.425 / 0.412
  EXPECT_NE(lines[1].find("bit-identical"), std::string::npos);
  EXPECT_NE(lines[2].find("recorded launch 0.431 ms"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("1.755 GHz"), std::string::npos) << lines[2];
  const timeline::Summary s = timeline::summarize(r);
  char cta[128];
  std::snprintf(cta, sizeof cta, "  CTA 131: %.1f us, 10 phases; a product in flight %.0f%%", s.ctas[1].span_ns * 1e-3,
                100 * s.ctas[1].tensor_share);
  EXPECT_EQ(lines[4].rfind(cta, 0), 0u) << lines[4] << "\n" << cta;
  Recording g = sample();
  g.Hkv = 4;
  EXPECT_NE(timeline::summary_lines(g)[0].find("B=1 H=16 Hkv=4 L=4096 d=128"), std::string::npos)
      << timeline::summary_lines(g)[0];
  EXPECT_EQ(timeline::kv_heads_text(sample()), "");
}

// ---- the request ----
TEST(Timeline, RequestsOutOfRangeAreRefusedNamingTheParameter) {
  auto refused = [](timeline::RecordRequest r, const std::string& expected) {
    try {
      timeline::validate(r);
      ADD_FAILURE() << "accepted; expected " << expected;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  timeline::RecordRequest ok;
  EXPECT_NO_THROW(timeline::validate(ok));
  timeline::RecordRequest r = ok;
  r.d = 256;
  refused(r, "d=256 is out of range: allowed {64, 128}");
  r = ok, r.L = 64;
  refused(r, "L=64 is out of range: allowed [128, 65536]");
  r = ok, r.path = "mma";
  refused(r, "--path=mma is out of range: allowed auto, wgmma, wgmma-late, wgmma-persistent");
  for (const char* removed : {"wgmma-cpasync", "wgmma-persistent-q2", "wgmma-persistent-q2-late-cross",
                              "wgmma-persistent-late-n176", "wgmma-persistent-m192-cross"}) {  // issue 29
    r = ok, r.path = removed;
    refused(r, std::string("--path=") + removed +
                   " is out of range: allowed auto, wgmma, wgmma-late, wgmma-persistent, "
                   "wgmma-persistent-q2-late, wgmma-persistent-late, wgmma-persistent-m192, "
                   "wgmma-persistent-q2-late-n160");
  }
  r = ok, r.kernel = timeline::kBackward, r.path = "auto";
  refused(r, "--path=auto is out of range: allowed wgmma, wgmma-tma");
  r = ok, r.deterministic = true;
  refused(r, "deterministic=1");
  r = ok, r.Hkv = 3;
  refused(r, "Hkv=3 is out of range: allowed 0 (as many as H) or a divisor of H = 16");
  r = ok, r.Hkv = 32;
  refused(r, "Hkv=32 is out of range");
  r = ok, r.kernel = timeline::kBackward, r.path = "wgmma-tma", r.Hkv = 2;
  refused(r, "Hkv=2 is out of range: allowed 0 or H = 16 (the backward's instrumented kernel");
  for (int hkv : {0, 1, 2, 8, 16}) {
    r = ok, r.Hkv = hkv;
    EXPECT_NO_THROW(timeline::validate(r)) << hkv;
  }
  r = ok, r.kernel = timeline::kBackward, r.path = "wgmma-tma", r.Hkv = 16;
  EXPECT_NO_THROW(timeline::validate(r));
  r = ok, r.ctas = {3, 3};
  refused(r, "each CTA once");
  r = ok, r.ctas.assign(33, 0);
  for (int i = 0; i < 33; ++i) r.ctas[size_t(i)] = i;
  refused(r, "at most 32, or all");
  r = ok, r.iterations = 0;
  refused(r, "iterations=0");

  timeline::RecordRequest c;
  timeline::parse_ctas("0,66,131", &c);
  EXPECT_EQ(c.ctas, (std::vector<int>{0, 66, 131}));
  EXPECT_FALSE(c.all_ctas);
  timeline::parse_ctas("all", &c);
  EXPECT_TRUE(c.all_ctas);
  EXPECT_TRUE(c.ctas.empty());
  for (const char* bad : {"", "x", "1,,2", "1,", "-1", "1.5", "12345678901"})
    EXPECT_THROW(timeline::parse_ctas(bad, &c), InputError) << bad;
}

}  // namespace
}  // namespace kl
