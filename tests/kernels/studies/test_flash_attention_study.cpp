// kernels/studies/flash_attention_study.*: what the FlashAttention panel concludes, asserted on numbers:
// the first step's alpha = 0 for every row (m_old = -inf) and the sentence that says so, the rows whose
// max moved at later steps against the trace, the stepper's step/tile numbering, the partial output (exact over the keys seen),
// the checks against float64 and rung 4, the counted traffic of standard attention, rung 4 and rung 5
// with the numbers the captions state, FlashAttention's Theorem 2 numbers, and the registry entry. The
// gallery's bugs (kernels/editable/gallery/flash_attention/), run as edited sources through the worker
// on the CPU backend, each show their symptom in these numbers, and the shipped source shows neither.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"
#include "kernels/rungs/attention.h"
#include "kernels/studies/flash_attention_study.h"
#include "kernels/studies/study.h"
#include "assets/embedded.h"
#include "test_util.h"

namespace kl::flash_attention_study {
namespace {

ParamValues settings(std::initializer_list<const char*> sets) {
  ParamValues p(params());
  for (const char* s : sets) p.set(s);
  return p;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(FlashAttentionStudy, DefaultsMatchReferenceAndRungFour) {
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const Result r = run(b, settings({}));
    EXPECT_EQ(r.steps, 6);
    EXPECT_EQ(r.q_blocks, 3);
    EXPECT_EQ(r.qblock, 1);
    EXPECT_EQ(r.nans, 0);
    EXPECT_LT(r.err, 2e-5);
    EXPECT_TRUE(r.check.ok);
    EXPECT_TRUE(r.rung4_ran);
    EXPECT_LT(r.rung4_diff, 1e-5);
    EXPECT_TRUE(r.rung4.ok);
    EXPECT_LT(r.converge.back(), 1e-5);  // after the last tile O / l is the output
    EXPECT_GT(r.converge.front(), 1e-3);  // after one tile of six it is not
    // ... and at every step O / l is the softmax over the keys seen so far, to float32 rounding
    ASSERT_EQ(r.step_error.size(), 6u);
    for (double e : r.step_error) EXPECT_LT(e, 1e-5);
    EXPECT_TRUE(r.wrong_rows.empty());
    EXPECT_FALSE(r.edited);
    EXPECT_GT(r.wmax, 0.0);
  }
}

TEST(FlashAttentionStudy, FirstStepEveryMaxMovesAndAlphaIsZero) {
  const Result r = run(Backend::Cpu, settings({}));
  const StepView v = step_view(r, 1);
  ASSERT_EQ(v.rows, 16);
  EXPECT_EQ(v.moved_count, 16);
  EXPECT_EQ(v.first_count, 16);
  for (int i = 0; i < v.rows; ++i) {
    EXPECT_EQ(v.alpha[size_t(i)], 0.0f) << "row " << i;  // exp(-inf - m_new)
    EXPECT_TRUE(v.moved[size_t(i)]);
  }
  EXPECT_TRUE(has(v.caption, "amber: the " + std::to_string(v.moved_count) + " rows whose running max moved")) << v.caption;
  EXPECT_TRUE(has(v.caption, "m_old = -inf")) << v.caption;
  EXPECT_TRUE(has(v.caption, "alpha = exp(-inf) = 0")) << v.caption;
  EXPECT_FALSE(has(v.caption, "< 1")) << v.caption;  // nothing was rescaled by alpha < 1 at step 1
}

TEST(FlashAttentionStudy, LaterStepsMovedRowsAreTheTracesAndTheSentenceCountsThem) {
  const Result r = run(Backend::Cpu, settings({}));
  for (int64_t step = 2; step <= r.steps; ++step) {
    const StepView v = step_view(r, step);
    int moved = 0;
    for (int i = 0; i < v.rows; ++i) {
      const size_t c = size_t((v.row0 + i) * r.steps + step - 1);
      const bool mv = r.hm[c] > r.hm_before[c];
      EXPECT_EQ(bool(v.moved[size_t(i)]), mv);
      if (mv) EXPECT_LT(v.alpha[size_t(i)], 1.0f);
      else EXPECT_EQ(v.alpha[size_t(i)], 1.0f);
      moved += mv;
    }
    EXPECT_EQ(v.moved_count, moved);
    EXPECT_EQ(v.first_count, 0);  // no mask: every row saw keys at step 1
    EXPECT_TRUE(has(v.caption, "amber: the " + std::to_string(moved) + (moved == 1 ? " row " : " rows "))) << v.caption;
    if (moved) EXPECT_TRUE(has(v.caption, std::to_string(moved) + " of them had seen keys before")) << v.caption;
  }
  EXPECT_EQ(step_view(r, 3).moved_count, 9);  // the tour's step3 picture: 9 amber rows
}

TEST(FlashAttentionStudy, CausalRowsThatFirstSeeKeysLaterAreSaid) {
  // Lq = 48, Lk = 40, causal: query i sees keys j <= i - 8. In query block 0 (rows 0..15), at step 1
  // rows 8..15 see their first keys and rows 0..7 none at all.
  const Result r = run(Backend::Cpu, settings({"causal=1", "lk=40", "qblock=0", "step=1"}));
  const StepView v = step_view(r, 1);
  // Row i sees keys j <= i - 8: rows 0..7 see nothing at all (m stays -inf, not moved).
  int unseen = 0;
  for (int i = 0; i < v.rows; ++i) unseen += std::isinf(v.m[size_t(i)]) ? 1 : 0;
  EXPECT_EQ(unseen, 8);
  EXPECT_EQ(v.moved_count, 8);
  EXPECT_EQ(v.first_count, 8);
  EXPECT_TRUE(has(v.caption, "8 saw their first key here")) << v.caption;
}

// Query blocks and K/V tiles count from 0 (as rung 6 counts them); the step counts the tiles folded in.
TEST(FlashAttentionStudy, StepperCountsTilesFromZeroAsQueryBlocksAndRungSix) {
  const Result r = run(Backend::Cpu, settings({}));
  EXPECT_EQ(step_view(r, 3).stepper_text, "step 3 of 6: K/V tile 2, keys 32..47");
  EXPECT_EQ(step_view(r, 3).tile, 2);
  EXPECT_EQ(step_view(r, 1).stepper_text, "step 1 of 6: K/V tile 0, keys 0..15");
  EXPECT_EQ(step_view(r, 3).title, "Query block 1 (rows 16..31) after step 3 of 6 (K/V tiles 0..2 folded in)");
  EXPECT_EQ(step_view(r, 1).title, "Query block 1 (rows 16..31) after step 1 of 6 (K/V tile 0 folded in)");
  const Result t = run(Backend::Cpu, settings({"lk=90"}));  // the last tile is short
  EXPECT_EQ(step_view(t, 6).stepper_text, "step 6 of 6: K/V tile 5, keys 80..89");
  // The panel's text says so, and no longer that tiles count from 1.
  const std::string text(assets::find("text/flash_attention.md"));
  EXPECT_TRUE(has(text, "Query blocks and K/V tiles count from 0, as on rung 6")) << text;
  EXPECT_TRUE(has(text, "folds in K/V tile t - 1")) << text;
  EXPECT_FALSE(has(text, "count from 1")) << text;
}

// O_t / l_t is exact attention over the keys seen so far: the study says so with its numbers, and calls the
// distance from the final output what it is (keys not yet folded in), not convergence of an approximation.
TEST(FlashAttentionStudy, PartialOutputIsExactOverTheKeysSeen) {
  const Result r = run(Backend::Cpu, settings({}));
  const StepView v = step_view(r, 3);
  EXPECT_GT(r.converge[2], 0.1);     // far from the final output at step 3 of 6 ...
  EXPECT_LT(r.step_error[2], 1e-5);  // ... yet exact over the keys it has seen
  char want[160];
  std::snprintf(want, sizeof want, "(%.2g from float64 over those keys); it is %.2g from the final output", r.step_error[2],
                r.converge[2]);
  EXPECT_TRUE(has(v.partial_line, "after step 3 is attention over keys 0..47 exactly")) << v.partial_line;
  EXPECT_TRUE(has(v.partial_line, want)) << v.partial_line;
  EXPECT_TRUE(has(v.partial_line, "keys 48..95 are not folded in yet")) << v.partial_line;
  EXPECT_TRUE(has(step_view(r, 6).partial_line, "attention over all 96 keys")) << step_view(r, 6).partial_line;
  for (const std::string& l : report(r, 3).lines) EXPECT_FALSE(has(l, "converging")) << l;
}

// The rung's kernel comment: the causal mask is bottom-right, as causal_lower_right; PyTorch's is_causal=True
// is top-left (the old comment called is_causal bottom-right).
TEST(FlashAttentionStudy, KernelCommentSaysIsCausalIsTopLeft) {
  const std::string src(assets::find("editable/flash_attention.cu"));
  ASSERT_FALSE(src.empty());
  EXPECT_FALSE(has(src, "PyTorch's is_causal with")) << "the comment calls is_causal bottom-right";
  EXPECT_TRUE(has(src, "PyTorch's is_causal=True aligns it top-left"));
  EXPECT_TRUE(has(src, "causal_lower_right"));
}

// Rung 4's wall comes from staging K and V in shared memory, not from the softmax: the text says a two-pass
// kernel has no wall and that online softmax buys one pass (the old text said rung 4 needed every key
// before it could normalise anything).
TEST(FlashAttentionStudy, TextPutsTheWallOnStagingNotOnTheSoftmax) {
  const std::string text(assets::find("text/flash_attention.md"));
  EXPECT_FALSE(has(text, "needed every key before it could normalise")) << text;
  EXPECT_TRUE(has(text, "two-pass")) << text;
  EXPECT_TRUE(has(text, "Online softmax buys the single pass")) << text;
}

TEST(FlashAttentionStudy, SettingsOutsideTheShapeAreMovedAndSaid) {
  const Result r = run(Backend::Cpu, settings({"step=40", "qblock=9"}));
  EXPECT_EQ(r.step, 6);
  EXPECT_EQ(r.qblock, 2);
  EXPECT_TRUE(has(r.adjust_note, "qblock moved to 2")) << r.adjust_note;
  EXPECT_TRUE(has(r.adjust_note, "step moved to 6")) << r.adjust_note;
}

TEST(FlashAttentionStudy, TrafficOfTheThreeAndTheCaptionsNumbers) {
  const Result r = run(Backend::Cpu, settings({}));
  const Traffic& t = r.mem;
  // Lq = 48, Lk = 96, d = 32, BLOCK_M = BLOCK_N = 16.
  EXPECT_EQ(t.unfused, 4.0 * (2 * 48 * 32 + 2 * 96 * 32 + 4 * 48 * 96));  // 108.0 KiB
  EXPECT_EQ(t.smem, 4.0 * (2 * 48 * 32 + 3 * 2 * 96 * 32));               // 84.0 KiB
  EXPECT_EQ(t.flash, 4.0 * (2 * 48 * 32) + 3.0 * 6 * 2 * 16 * 32 * 4);    // 84.0 KiB
  EXPECT_TRUE(has(t.caption, "= 72.0 KiB of its 108.0 KiB")) << t.caption;
  EXPECT_TRUE(has(t.caption, "3 programs of 16 queries")) << t.caption;
  EXPECT_TRUE(has(t.caption, "3 query blocks of BLOCK_M = 16")) << t.caption;
  // As Lk grows standard / rung 5 tends to (d + 2 Lq) / (d ceil(Lq / BLOCK_M)) = 128 / 96 at Lq = 48, not to
  // 2 BLOCK_M / d = 1 (that needs Lq >> d): the study's own ratio at Lk = 65536 says so.
  EXPECT_DOUBLE_EQ(t.long_lk_ratio, 128.0 / 96.0);
  EXPECT_EQ(t.long_lk_simple, 1.0);
  EXPECT_NEAR(t.unfused_kib.back() / t.flash_kib.back(), t.long_lk_ratio, 0.01 * t.long_lk_ratio);
  EXPECT_TRUE(has(t.caption, "(d + 2 Lq) / (d x ceil(Lq / BLOCK_M)) = 1.33 here")) << t.caption;
  EXPECT_TRUE(has(t.caption, "only where Lq >> d is that 2 x BLOCK_M / d (= 1)")) << t.caption;
  EXPECT_FALSE(has(t.caption, "tends to 2 x BLOCK_M / d")) << t.caption;
  // The plot over Lk: rung 4 stops at its wall, the others go on.
  ASSERT_EQ(t.lk.size(), 13u);
  for (size_t i = 0; i < t.lk.size(); ++i) {
    EXPECT_EQ(std::isfinite(t.smem_kib[i]), t.lk[i] <= 900) << t.lk[i];
    EXPECT_GT(t.unfused_kib[i], 0.0);
    EXPECT_GT(t.flash_kib[i], 0.0);
  }
  // Causal: rung 5 skips tiles, so it moves less than rung 4.
  const Result c = run(Backend::Cpu, settings({"causal=1"}));
  EXPECT_LT(c.mem.flash, c.mem.smem);
  // A larger BLOCK_M reads K and V fewer times: standard / rung 5 grows.
  const Result big = run(Backend::Cpu, settings({"block_m=64", "lk=4096", "lq=256", "step=1"}));
  EXPECT_DOUBLE_EQ(big.mem.long_lk_ratio, (32.0 + 2 * 256) / (32.0 * 4));  // 4.25
  EXPECT_EQ(big.mem.long_lk_simple, 4.0);
  EXPECT_GT(big.mem.unfused / big.mem.flash, 3.0);
}

// Theorem 2 needs d <= M <= N d. At the panel's shape M = 58112 floats and min(Lq, Lk) d = 1536: outside, so
// the bound (81 accesses, less than reading Q, K and V once) is not evaluated; nor at Lk = 16384 (13,858
// against the 3.1 M floats counted). Inside it (Lq = Lk = 512, d = 128: N d = 65536 >= M) it is.
TEST(FlashAttentionStudy, TheoremTwoOnlyInsideItsDomain) {
  const Result r = run(Backend::Cpu, settings({}));
  const Traffic& t = r.mem;
  EXPECT_EQ(t.sram_elements, 232448.0 / 4);
  EXPECT_EQ(t.theorem_nd, 48.0 * 32);
  EXPECT_FALSE(t.theorem_applies);
  EXPECT_EQ(t.paper_flash, 0.0);
  EXPECT_TRUE(has(t.paper_line, "Theta(N d + N^2)")) << t.paper_line;
  EXPECT_TRUE(has(t.paper_line, "Theta(N^2 d^2 / M)")) << t.paper_line;
  EXPECT_TRUE(has(t.paper_line, "d <= M <= N d")) << t.paper_line;
  EXPECT_TRUE(has(t.paper_line, "M = 58112 floats but min(Lq, Lk) x d = 1536: outside its domain")) << t.paper_line;
  EXPECT_TRUE(has(t.paper_line, "below reading Q, K and V once (7680 floats)")) << t.paper_line;
  EXPECT_FALSE(has(t.paper_line, "= 81")) << t.paper_line;
  EXPECT_FALSE(report(r, 3).numbers.contains("paper_flash_elements"));
  attention::Shape lo;
  lo.lq = 48, lo.lk = 16384, lo.d = 32;
  const Traffic far = traffic(Backend::Cpu, lo, false, 16, 16);
  EXPECT_FALSE(far.theorem_applies);
  EXPECT_FALSE(has(far.paper_line, "13858")) << far.paper_line;
  attention::Shape in;
  in.lq = in.lk = 512, in.d = 128;
  const Traffic inside = traffic(Backend::Cpu, in, false, 16, 16);
  EXPECT_TRUE(inside.theorem_applies);
  EXPECT_EQ(inside.paper_standard, 512.0 * 128 * 2 + 512.0 * 512);
  EXPECT_NEAR(inside.paper_flash, 512.0 * 512 * 128 * 128 / 58112.0, 1e-6);  // 73,908
  EXPECT_TRUE(has(inside.paper_line, "inside its domain: Lq d + Lk d + Lq Lk = 393216 against Lq Lk d^2 / M = 73908"))
      << inside.paper_line;
}

// The IO view: rung 5's counted bytes against BLOCK_M (rung 4 is rung 5 at 16, standard attention flat) and
// against M (the largest square tile that fits; Theorem 2's curve only inside its domain).
TEST(FlashAttentionStudy, IoViewAgainstBlockMAndAgainstM) {
  const Result r = run(Backend::Cpu, settings({}));
  const IoView& v = r.io;
  ASSERT_EQ(v.block_m, (std::vector<double>{16, 32, 64, 128}));
  attention::Shape s = r.shape;
  for (size_t i = 0; i < v.block_m.size(); ++i)
    EXPECT_EQ(v.flash_by_bm_kib[i], traffic_bytes_flash(s, false, int(v.block_m[i]), 16) / 1024.0);
  EXPECT_EQ(v.flash_by_bm_kib[0], v.smem_kib);  // 84 KiB: rung 4 reads K and V once per 16 rows, as rung 5 at 16
  EXPECT_EQ(v.smem_kib, 84.0);
  EXPECT_EQ(v.unfused_kib, 108.0);
  EXPECT_EQ(v.flash_by_bm_kib[2], v.flash_by_bm_kib[3]);  // BLOCK_M >= Lq = 48: K and V read once
  EXPECT_TRUE(has(v.caption_bm, "84.0 KiB at BLOCK_M = 16, 36.0 KiB at BLOCK_M = 128")) << v.caption_bm;
  EXPECT_TRUE(has(v.caption_bm, "Standard attention: 108.0 KiB")) << v.caption_bm;
  ASSERT_EQ(v.m_kib.size(), v.m_flash_kib.size());
  for (size_t i = 0; i < v.m_kib.size(); ++i) {
    const double m = v.m_kib[i] * 1024.0 / 4.0;
    EXPECT_EQ(std::isfinite(v.m_theorem_kib[i]), m <= 48.0 * 32) << m;  // only where M <= min(Lq, Lk) d
    if (i) EXPECT_LE(v.m_flash_kib[i], v.m_flash_kib[i - 1]) << m;     // more M, a larger tile, fewer bytes
    EXPECT_LE(double(fa::smem_bytes(int(v.m_tile[i]), int(v.m_tile[i]), 32)), 4.0 * m);
    EXPECT_EQ(std::isfinite(v.m_smem_kib[i]), double(attention::smem_bytes(96, 32)) <= 4.0 * m) << m;
  }
  EXPECT_EQ(v.domain_end_kib, 6.0);
  EXPECT_EQ(v.device_m_kib, 227.0);
  EXPECT_EQ(v.device_bc, 454.0);  // floor(58112 / 128)
  EXPECT_GT(v.full_tile_kib, 0.0);
  EXPECT_TRUE(has(v.caption_m, "M <= min(Lq, Lk) d = 6.0 KiB")) << v.caption_m;
  // Past the wall rung 4 is absent, not drawn.
  const Result past = run(Backend::Cpu, settings({"lk=4096", "lq=32", "block_n=64", "step=40"}));
  EXPECT_TRUE(std::isnan(past.io.smem_kib));
  EXPECT_TRUE(has(past.io.caption_bm, "refused here")) << past.io.caption_bm;
}

TEST(FlashAttentionStudy, PastRungFoursWallRungFourIsRefusedAndSaid) {
  const Result r = run(Backend::Cpu, settings({"lk=4096", "lq=32", "block_n=64", "step=40"}));
  EXPECT_FALSE(r.rung4_ran);
  EXPECT_TRUE(r.mem.smem_refused);
  EXPECT_TRUE(has(r.rung4.text, "Lk=4096 is past its wall of 900 at d=32")) << r.rung4.text;
  EXPECT_TRUE(r.check.ok);
  EXPECT_TRUE(has(r.mem.caption, "refused here")) << r.mem.caption;
}

// The shared-memory budget bars follow the fast kernel the default takes at the shape (the panel's line under the
// bars names the same one). At d = 256 the tiles d = 128 uses do not fit (teaching 64 x 64: 279296 bytes; the d =
// 128 default without the mask, wgmma-persistent-q2-late, 128 x 128 in 2 stages with 2 Q tiles: 384 KiB + 1 KiB +
// 12 mbarriers), the ones taken do (64 x 32 is the default; wgmma-persistent-late's 128 x 80 in 2 stages: 224 KiB
// + 1 KiB + 10 mbarriers; past L = 2048 without the mask wgmma-late's, 9 mbarriers), each bar the sum of its parts.
attention::Shape shape_d(int d, int64_t l = 48) {
  attention::Shape s;
  s.lq = s.lk = l;
  s.d = d;
  return s;
}

TEST(FlashAttentionStudy, BudgetBarsSayWhyTheTilesShrinkAtD256) {
  const int64_t limit = 227 * 1024;
  const std::vector<Budget> v = budgets(shape_d(256), false, 16, 16, limit);
  ASSERT_EQ(v.size(), 4u);
  for (const Budget& b : v) {
    int64_t sum = 0;
    for (const BudgetPart& p : b.parts) sum += p.bytes;
    EXPECT_EQ(sum, b.total) << b.label;
    EXPECT_EQ(b.limit, limit);
    EXPECT_EQ(b.fits, b.total <= limit) << b.label;
  }
  EXPECT_EQ(v[0].total, flash_attention::smem_bytes(16, 16, 256));
  EXPECT_TRUE(v[0].fits);
  EXPECT_TRUE(has(v[1].label, "64 x 64"));
  EXPECT_EQ(v[1].total, 279296);
  EXPECT_FALSE(v[1].fits);
  EXPECT_TRUE(has(v[2].label, "fast wgmma-persistent-late 128 x 80, 2 stages (the H100/H200 default at this shape)"))
      << v[2].label;
  EXPECT_EQ(v[2].total, 224 * 1024 + 1024 + 8 * 10);  // its own mbarriers: an empty Q one besides the full
  EXPECT_TRUE(v[2].fits);
  EXPECT_EQ(v[2].parts[0].bytes, 64 * 1024);   // Q: 128 rows x 256 x 2 bytes
  EXPECT_EQ(v[2].parts[1].bytes, 80 * 1024);   // K: 2 stages x 80 keys x 256 x 2 bytes
  EXPECT_TRUE(has(v[3].label, "wgmma-persistent-q2-late 128 x 128, 2 stages, 2 Q tiles")) << v[3].label;
  EXPECT_EQ(v[3].parts[0].name, "Q x 2");
  EXPECT_EQ(v[3].parts[3].name, "O");  // its O tile for the bulk tensor stores
  EXPECT_EQ(v[3].total, 448 * 1024 + 1024 + 8 * 12);
  EXPECT_FALSE(v[3].fits);
  const std::string c = budget_caption(shape_d(256), false, limit);
  EXPECT_TRUE(has(c, "272.8 KiB")) << c;  // 279296 bytes
  EXPECT_TRUE(has(c, "449.1 KiB")) << c;  // 448 KiB + 1 KiB + 96 bytes
  EXPECT_TRUE(has(c, "64 x 32")) << c;
  EXPECT_TRUE(has(c, "(wgmma-persistent-late) keeps 128 x 80 in 2 stages with one Q tile (225.1 KiB)")) << c;
  // The same with the mask (up to L = 4096); without it past L = 2048 the one-block-per-tile kernel, one mbarrier
  // fewer.
  const std::vector<Budget> causal = budgets(shape_d(256), true, 16, 16, limit);
  EXPECT_TRUE(has(causal[2].label, "fast wgmma-persistent-late 128 x 80")) << causal[2].label;
  EXPECT_EQ(causal[2].total, 224 * 1024 + 1024 + 8 * 10);
  const std::vector<Budget> long_rows = budgets(shape_d(256, 4096), false, 16, 16, limit);
  EXPECT_TRUE(has(long_rows[2].label, "fast wgmma-late 128 x 80")) << long_rows[2].label;
  EXPECT_EQ(long_rows[2].total, 224 * 1024 + 1024 + 8 * 9);
  // At d = 128: the teaching tile and the default's (two Q tiles and the O tile), both fitting; no carried-over
  // bars.
  const std::vector<Budget> w = budgets(shape_d(128), false, 64, 64, limit);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].fits);
  EXPECT_TRUE(w[1].fits);
  EXPECT_EQ(w[1].total, 224 * 1024 + 1024 + 8 * 12);
  EXPECT_EQ(budgets(shape_d(32), false, 16, 16, limit).size(), 1u);  // no fast kernel at d = 32
  // The caption says what the O part is where the default's bar has one (d = 64 on 192 rows, d = 128), and only
  // there.
  const std::string o_line = "O: the fast kernel writes its output tile here first";
  for (const int d : {64, 128})
    EXPECT_TRUE(has(budget_caption(shape_d(d), false, limit), o_line)) << budget_caption(shape_d(d), false, limit);
  EXPECT_FALSE(has(budget_caption(shape_d(32), false, limit), o_line)) << budget_caption(shape_d(32), false, limit);
}

// The IO caption's register cap names the fast kernel the default takes at the shape and that kernel's tile (it
// once gave the plain wgmma baseline's at every shape).
TEST(FlashAttentionStudy, IoCaptionNamesTheDefaultsTile) {
  const Result d64 = run(Backend::Cpu, settings({"d=64"}));
  EXPECT_TRUE(has(d64.io.caption_m, "(the fast kernel, wgmma-persistent-m192 here, keeps 192 x ")) << d64.io.caption_m;
  const Result d128 = run(Backend::Cpu, settings({"d=128", "causal=1"}));
  EXPECT_TRUE(has(d128.io.caption_m, "(the fast kernel, wgmma-persistent-q2-late here, keeps 128 x 128 at d = 128"))
      << d128.io.caption_m;
}

// The panel's d = 256 runs on both backends: the check against float64 holds, rung 4 is refused for its
// head dims (not for a wall), and the report carries the budget.
TEST(FlashAttentionStudy, HeadDim256Runs) {
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const Result r = run(b, settings({"d=256", "lq=40", "lk=70", "causal=1"}));
    EXPECT_EQ(r.nans, 0);
    EXPECT_TRUE(r.check.ok) << r.check.text;
    EXPECT_FALSE(r.rung4_ran);
    EXPECT_TRUE(has(r.rung4.text, "it takes d in 16, 32, 64, 128")) << r.rung4.text;
    EXPECT_EQ(r.budget.size(), 4u);
    const study::Report rep = report(r, r.step);
    EXPECT_EQ(rep.numbers.count("budget_bytes_1"), 1u);
  }
}

TEST(FlashAttentionStudy, ReportAndRegistry) {
  const study::Entry* e = study::find("flash-attention");
  ASSERT_NE(e, nullptr);
  ParamValues p(e->params());
  p.set("step=1");
  const study::Report rep = e->run(Backend::Cpu, p);
  ASSERT_EQ(rep.checks.size(), 2u);
  for (const study::Check& c : rep.checks) EXPECT_TRUE(c.pass) << c.sentence;
  EXPECT_EQ(rep.numbers["moved_rows"].get<int>(), 16);
  EXPECT_EQ(rep.numbers["first_tile_rows"].get<int>(), 16);
  ASSERT_EQ(rep.numbers["alpha"].size(), 16u);
  for (const auto& a : rep.numbers["alpha"]) EXPECT_EQ(a.get<double>(), 0.0);
  EXPECT_EQ(rep.numbers["traffic_bytes_unfused"].get<double>(), 110592.0);
  EXPECT_NE(study::to_text(rep).find("row 16: m = "), std::string::npos);
}

// [SECTION] The gallery ------------------------------------------------------------------------------------

class FlashAttentionGallery : public ::testing::Test {
 protected:
  void SetUp() override { editable::worker::set_program(KL_BINARY); }
  static editable::Source bug(const std::string& name) {
    for (const editable::GalleryBug& b : editable::gallery("flash-attention"))
      if (b.name == name) return {"flash-attention", b.file, b.text};
    ADD_FAILURE() << "no gallery bug " << name;
    return {};
  }
};

TEST_F(FlashAttentionGallery, ListsItsBugsWithTheirSentences) {
  const std::vector<editable::GalleryBug> bugs = editable::gallery("flash-attention");
  ASSERT_EQ(bugs.size(), 2u);
  for (const editable::GalleryBug& b : bugs) {
    EXPECT_FALSE(b.sentence.empty()) << b.file;
    EXPECT_NE(b.text.find("__global__ void flash_teaching("), std::string::npos) << b.file;
  }
}

// Without alpha, l and O keep what earlier tiles added under an older max: after tile 1 (nothing to
// rescale yet) the partial output is the softmax over the keys seen, to float32 rounding; from the first
// step where a row that had seen keys moved its max it is off, and further off as later tiles move it.
TEST_F(FlashAttentionGallery, NoAlphaRescaleErrorGrowsTileByTile) {
  const editable::Source src = bug("no alpha rescale");
  const Result shipped = run(Backend::Cpu, settings({}), nullptr);
  const Result r = run(Backend::Cpu, settings({}), &src);
  EXPECT_TRUE(r.edited);
  EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
  ASSERT_EQ(r.step_error.size(), 6u);
  EXPECT_LT(r.step_error[0], 1e-5);
  // The first step at which the shipped kernel rescaled a row of the block (alpha < 1 with l_old > 0).
  int64_t first_rescale = -1;
  for (int64_t t = 1; t < shipped.steps && first_rescale < 0; ++t)
    for (int rr = 0; rr < shipped.bm; ++rr) {
      const size_t c = size_t((shipped.qblock * shipped.bm + rr) * shipped.steps + t);
      if (shipped.halpha[c] < 1.0f && shipped.hl[c] > 0) first_rescale = t;
    }
  ASSERT_EQ(first_rescale, 1);  // at these settings the max moves in tile 2 already
  // Off from tile 2 on (1e4 times the shipped kernel's rounding), and growing while later tiles keep
  // moving the max: at these settings 0.41, 0.53, 0.54 after tiles 2..4, then it settles about 0.5.
  for (size_t t = 1; t < r.step_error.size(); ++t) {
    EXPECT_GT(r.step_error[t], 1e-3) << "step " << t + 1;
    EXPECT_LT(shipped.step_error[t], 1e-5) << "step " << t + 1;
  }
  EXPECT_LT(r.step_error[1], r.step_error[2]);
  EXPECT_LT(r.step_error[2], r.step_error[3]);
  EXPECT_GT(r.step_error.back(), r.step_error[1]);
  EXPECT_FALSE(r.check.ok) << r.check.text;
  EXPECT_GT(r.err, 1e-2);
  const study::Report rep = report(r, r.step);
  ASSERT_EQ(rep.numbers["step_error"].size(), 6u);
  EXPECT_EQ(rep.numbers["fault"].get<int>(), 0);
  EXPECT_TRUE(has(study::to_text(rep), "kernel: no_alpha_rescale.cu (edited)")) << study::to_text(rep);
}

// Top-left alignment: with causal on and Lq != Lk rows see the wrong keys; the check fails and names
// exactly the rows whose visible keys differ between the two alignments. With Lq = Lk nothing changes.
TEST_F(FlashAttentionGallery, CausalTopLeftNamesTheRowsThatSeeTheWrongKeys) {
  const editable::Source src = bug("causal top left");
  struct Case {
    int64_t lq, lk;
    const char* rows;
  };
  for (const Case& c : {Case{48, 96, "rows 0..47 of 48 differ"}, Case{96, 48, "rows 0..94 of 96 differ"},
                        Case{48, 48, ""}}) {
    SCOPED_TRACE(std::to_string(c.lq) + " x " + std::to_string(c.lk));
    const std::string lq = "lq=" + std::to_string(c.lq), lk = "lk=" + std::to_string(c.lk);
    const Result shipped = run(Backend::Cpu, settings({"causal=1", lq.c_str(), lk.c_str()}), nullptr);
    EXPECT_TRUE(shipped.check.ok) << shipped.check.text;
    EXPECT_TRUE(shipped.wrong_rows.empty());
    const Result r = run(Backend::Cpu, settings({"causal=1", lq.c_str(), lk.c_str()}), &src);
    EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
    std::vector<int64_t> want;
    for (int64_t i = 0; i < c.lq; ++i)
      if (attention::visible_keys(i, c.lq, c.lk, true) != std::min<int64_t>(i + 1, c.lk)) want.push_back(i);
    EXPECT_EQ(r.wrong_rows, want);
    EXPECT_EQ(r.check.ok, want.empty()) << r.check.text;
    if (*c.rows) EXPECT_TRUE(has(r.check.text, c.rows)) << r.check.text;
    const study::Report rep = report(r, r.step);
    EXPECT_EQ(rep.numbers["wrong_rows"].get<int64_t>(), int64_t(want.size()));
  }
  // Unmasked the alignment does not matter.
  const Result open = run(Backend::Cpu, settings({}), &src);
  EXPECT_TRUE(open.check.ok) << open.check.text;
}

// The panel's opening line (the issue's own example): K and V read once per query block, the bytes against
// standard attention's, and what saves more.
TEST(FlashAttentionStudy, NoticeSaysWhatToSee) {
  const Result r = run(Backend::Cpu, settings({}));
  EXPECT_EQ(r.notice, "Rung 5 reads K and V once per 16-row query block (3 times): 84.0 KiB here against standard "
                      "attention's 108.0 KiB; raise BLOCK_M to save more");
  EXPECT_EQ(report(r, 3).notice, r.notice);
  const Result one = run(Backend::Cpu, settings({"block_m=64"}));
  EXPECT_EQ(one.notice, "Rung 5 reads K and V once (one query block of BLOCK_M = 64 holds all 48 queries): 36.0 KiB here "
                        "against standard attention's 108.0 KiB");
  // Where rung 5 moves more than standard attention (few queries, wide rows) the line does not promise a saving.
  const Result wide = run(Backend::Cpu, settings({"d=256"}));
  EXPECT_GT(wide.mem.flash, wide.mem.unfused);
  EXPECT_EQ(wide.notice, "Rung 5 reads K and V once per 16-row query block (3 times): 672.0 KiB here, more than standard "
                         "attention's 360.0 KiB: at Lq = 48 and d = 256, S and P (Lq x Lk) cost less than reading K and V "
                         "(Lk x d each) 3 times; raise BLOCK_M to read them fewer times");
}

}  // namespace
}  // namespace kl::flash_attention_study
