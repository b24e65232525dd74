// kernels/studies/flash_attention_backward_study.*: what the "6 · Backward" panel concludes, as numbers,
// on both backends: the saved-state bytes, the wall and its refusal, the causal skips, the recomputed P
// against the forward's, dS's signs, the partials converging; bad settings refused.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "kernels/studies/flash_attention_backward_study.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/registry.h"
#include "test_util.h"

namespace kl::flash_attention_backward_study {
namespace {

ParamValues settings(std::vector<std::string> kv) {
  ParamValues p(params());
  for (const std::string& s : kv) p.set(s);
  return p;
}

void expect_all_pass(const study::Report& rep) {
  for (const study::Check& c : rep.checks) EXPECT_TRUE(c.pass) << c.name << ": " << c.sentence;
}

TEST(FlashAttentionBackwardStudy, DefaultsPassEveryCheckOnEveryBackend) {
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const Result r = run(b, settings({}));
    const study::Report rep = report(r);
    EXPECT_EQ(rep.panel, "backward");
    EXPECT_EQ(rep.checks.size(), 6u);
    expect_all_pass(rep);
    // bytes: P is Lq x Lk floats, L one float per row, the naive backward holds P and dP
    EXPECT_EQ(r.p_bytes, 96u * 128u * 4u);
    EXPECT_EQ(r.lse_bytes, 96u * 4u);
    EXPECT_EQ(r.naive_bytes, 2 * r.p_bytes);
    EXPECT_EQ(rep.numbers["lse_bytes"].get<uint64_t>(), r.lse_bytes);
    // the wall: the largest square shape whose P and dP fit, and one past it refused
    EXPECT_LE(8.0 * double(r.wall_length) * double(r.wall_length), double(r.wall.available));
    EXPECT_GT(8.0 * double(r.wall_length + 1) * double(r.wall_length + 1), double(r.wall.available));
    EXPECT_TRUE(r.wall_refused) << r.wall_message;
    // causal at Lq = 96, Lk = 128, 32 x 32 tiles: K/V tile kb is seen by query tiles from kb - 1 on
    EXPECT_EQ(r.k_blocks, 4);
    EXPECT_EQ(r.q_blocks, 3);
    EXPECT_EQ(r.tiles_skipped, 3);  // (kb 2, qb 0), (kb 3, qb 0), (kb 3, qb 1)
    EXPECT_EQ(r.tiles_computed, 9);
    EXPECT_LT(r.p_max_abs_diff, 1e-6);
    EXPECT_EQ(r.ds_positive + r.ds_negative + r.ds_zero, 32 * 32);  // query tile 2 x K/V tile 1: all visible
    EXPECT_GT(r.ds_positive, 0);
    EXPECT_GT(r.ds_negative, 0);
    // dK_j converges: far from the reference before the last query tile it needs, within float32 after
    ASSERT_EQ(r.dk_err.size(), 3u);
    EXPECT_GT(r.dk_err[1], 1e-2);
    EXPECT_LT(r.dk_err.back(), r.tolerance);
    ASSERT_EQ(r.dq_err.size(), 4u);
    EXPECT_GT(r.dq_err[0], 1e-2);
    EXPECT_LT(r.dq_err.back(), r.tolerance);
  }
}

TEST(FlashAttentionBackwardStudy, NonCausalSkipsNothingAndTextAndJsonCarryTheChecks) {
  const Result r = run(Backend::Cpu, settings({"causal=0", "lq=50", "lk=70", "d=16", "block_m=16", "block_n=16",
                                               "kv_tile=4", "q_tile=3"}));
  EXPECT_EQ(r.tiles_skipped, 0);
  const study::Report rep = report(r);
  expect_all_pass(rep);
  const std::string text = study::to_text(rep);
  EXPECT_NE(text.find("recomputed P = exp(S - L) of query tile 3 x K/V tile 4"), std::string::npos) << text;
  EXPECT_NE(text.find("atomicAdd"), std::string::npos) << text;
  EXPECT_EQ(study::to_json(rep)["checks"].size(), 6u);
}

TEST(FlashAttentionBackwardStudy, TilesPastTheShapeAreRefused) {
  EXPECT_THROW(run(Backend::Cpu, settings({"kv_tile=4"})), InputError);  // Lk = 128: tiles 0..3
  EXPECT_THROW(run(Backend::Cpu, settings({"q_tile=3"})), InputError);
  EXPECT_THROW(settings({"d=48"}), InputError);
  try {
    run(Backend::Cpu, settings({"kv_tile=4"}));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kv_tile"), std::string::npos) << e.what();
  }
}

TEST(FlashAttentionBackwardStudy, IsInTheRegistry) {
  const study::Entry* e = study::find("backward");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->run(Backend::Cpu, settings({"lq=20", "lk=20", "q_tile=0", "kv_tile=0"})).panel, "backward");
}

// The panel's list is the kernel's specs (rung 5's through fab::param) plus declared overrides, and the
// study's own parameters (shape, tile shown, seed) that no kernel takes.
TEST(FlashAttentionBackwardStudy, ParamsAreTheKernelsSpecsOrDeclaredOverrides) {
  const KernelEntry* k = find_kernel("flash-attention-backward");
  ASSERT_NE(k, nullptr);
  int shared = 0;
  for (const ParamSpec& p : params()) {
    const ParamSpec* ks = nullptr;
    for (const ParamSpec& s : k->params) ks = s.name == p.name ? &s : ks;
    if (!ks) {
      EXPECT_FALSE(p.is_override()) << p.name;
      continue;
    }
    ++shared;
    if (!p.is_override()) {
      EXPECT_EQ(p.def, ks->def) << p.name;
      EXPECT_EQ(p.range_text(), ks->range_text()) << p.name;
      EXPECT_EQ(p.help, ks->help) << p.name;
      continue;
    }
    EXPECT_EQ(p.kernel_def, ks->def) << p.name;
    EXPECT_EQ(p.kernel_range, ks->range_text()) << p.name;
    EXPECT_EQ(p.help, ks->help) << p.name;
    EXPECT_NE(p.def, ks->def) << p.name;
  }
  EXPECT_EQ(shared, 3);  // causal, block_m, block_n (the panel keeps the default scale)
}

// Every line of the report, in the order of Line, so the panel draws each beside its view.
TEST(FlashAttentionBackwardStudy, LinesComeInTheOrderThePanelDrawsThem) {
  const Result r = run(Backend::Cpu, settings({"lq=40", "q_tile=1"}));
  const study::Report rep = report(r);
  ASSERT_EQ(rep.lines.size(), size_t(kLineCount));
  const std::vector<std::pair<Line, const char*>> starts = {
      {kLineSaved, "saved for the backward: "},      {kLineWall, "the naive backward holds P and dP: "},
      {kLineOrder, "tile order: "},                  {kLineDq, "dQ: "},
      {kLineDs, "dS of query tile 1 x K/V tile 1: "}, {kLineRefusal, "the refusal: "},
      {kLineDkErr, "dK_j error "},                   {kLineDvErr, "dV_j error "},
      {kLineDqErr, "dQ_i error "}};
  for (const auto& [line, start] : starts) EXPECT_EQ(rep.lines[line].rfind(start, 0), 0u) << rep.lines[line];
  // Q_i for dK's lineage: rows 32..39 of Q, zero past Lq = 40.
  ASSERT_EQ(r.q_rows.size(), size_t(r.block_m * r.d));
  float inside = 0, past = 0;
  for (int row = 0; row < r.block_m; ++row)
    for (int c = 0; c < r.d; ++c) (row < 8 ? inside : past) += std::abs(r.q_rows[size_t(row * r.d + c)]);
  EXPECT_GT(inside, 0.0f);
  EXPECT_EQ(past, 0.0f);
}

// The error curves as the panel draws them: x counts what is folded in from 1 (the old plot drew the error
// after one tile at x = 0), and dQ_i has its own axis (programs folded in) apart from dK_j and dV_j's
// (query tiles folded in).
TEST(FlashAttentionBackwardStudy, ErrorCurvesCountFromOneOnTheirOwnAxes) {
  const Result r = run(Backend::Cpu, settings({}));  // 3 query tiles, 4 programs; q_tile 2, kv_tile 1
  const Curve kv = dkdv_curve(r), q = dq_curve(r);
  EXPECT_EQ(kv.x, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(kv.x_label, "query tiles folded in");
  ASSERT_EQ(kv.y.size(), 2u);
  EXPECT_EQ(kv.y[0], r.dk_err);
  EXPECT_EQ(kv.y[1], r.dv_err);
  EXPECT_EQ(kv.now, 3.0);  // q_tile 2: three query tiles folded in
  EXPECT_EQ(q.x, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(q.x_label, "programs folded in");
  ASSERT_EQ(q.y.size(), 1u);
  EXPECT_EQ(q.y[0], r.dq_err);
  EXPECT_EQ(q.now, 2.0);  // kv_tile 1: programs 0 and 1
  EXPECT_NE(kv.x_label, q.x_label);
}

// The panel's opening line: what the backward saves (L against P), the naive wall, and the recomputation.
TEST(FlashAttentionBackwardStudy, NoticeSaysWhatTheBackwardSaves) {
  const Result r = run(Backend::Cpu, settings({}));
  EXPECT_EQ(r.lse_bytes, 96u * 4);
  EXPECT_EQ(r.p_bytes, 96u * 128 * 4);
  EXPECT_EQ(r.notice.rfind("the forward keeps L, " + mem::bytes_text(r.lse_bytes) + " (one float per query row), where a "
                           "naive backward keeps P, " + mem::bytes_text(r.p_bytes) + " (128x more), and dP beside it: "
                           "its wall is Lq = Lk = " + std::to_string(r.wall_length) + " in this memory", 0),
            0u) << r.notice;
  EXPECT_EQ(report(r).notice, r.notice);
  // The first view's curve: the naive P + dP is 8 L^2 bytes and crosses the memory available at the wall.
  const Curve c = saved_curve(r);
  ASSERT_EQ(c.y.size(), 3u);
  for (size_t i = 0; i < c.x.size(); ++i) {
    EXPECT_EQ(c.y[0][i], 8.0 * c.x[i] * c.x[i]);
    EXPECT_EQ(c.y[1][i], 4.0 * c.x[i]);
    EXPECT_EQ(c.y[0][i] <= double(r.wall.available), c.x[i] <= double(r.wall_length)) << c.x[i];
  }
  EXPECT_EQ(c.now, double(r.wall_length));
  EXPECT_GT(c.x.back(), 2.0 * r.wall_length);
}

}  // namespace
}  // namespace kl::flash_attention_backward_study
