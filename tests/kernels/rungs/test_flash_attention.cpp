// Rung 5 (kernels/flash_attention.*): the teaching variant on both backends against the float64
// reference of rung 4 (kernels/rungs/attention.h). Shapes: rung 4's, plus Lk = 65536 at d = 128, every tile
// size offered, causal with Lq < Lk, = and >. The trace: the recurrence l_after = alpha * l_before +
// rowsum(P), m never decreasing, alpha = exp(m_before - m_after), steps chained, skipped tiles exactly
// those past the causal diagonal; CPU and CUDA traces agree to float32 rounding. Grouped-query attention
// (k and v with Hkv heads dividing q's Hq): the index map against brute force, the float64 reference
// against rung 4's on k and v repeated per query head, both backends over ratios 1, 2, 4, 8 with odd
// lengths, Lq != Lk and causal, the trace's recurrence, `run`, and the one-line refusal. The editable
// source (kernels/editable/sources/flash_attention.cu): compiled at run time it reproduces the shipped
// build's output and trace bit for bit on the CPU; on a GPU, CPU and CUDA agree for it and for an edit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"

#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/attention_inputs.h"
#include "test_util.h"

namespace kl::flash_attention {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

using Inputs = test::AttentionInputs;

Shape shape(int64_t lq, int64_t lk, int d, int64_t batch = 1, int64_t heads = 1) {
  return test::attention_shape<Shape>(lq, lk, d, batch, heads);
}

// A trace copied to the host.
struct HostTrace {
  std::vector<float> m0, m1, alpha, l0, l1, rowsum, o_partial, s_tile, p_tile;
  std::vector<uint8_t> state;
  int64_t rows = 0, steps = 0, q_blocks = 0;
};

// How run_on launches the kernel: run_teaching (the shipped build, or `src` in the worker), or with
// `in_process` the edited source compiled and run in this process (the worker's own path).
struct Via {
  const editable::Source* src = nullptr;
  bool in_process = false;
};

// Runs the teaching kernel on b, output poisoned; optionally traced (query block `chosen` of bh 0).
std::vector<float> run_on(Backend b, const Inputs& in, const Shape& s, const Options& o, int bm, int bn,
                          HostTrace* ht = nullptr, int64_t chosen = -1, Via via = {}) {
  Buffer<float> q(b, in.q.size()), k(b, in.k.size()), v(b, in.v.size()), out(b, in.q.size());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  out.fill_bytes(0xFF);
  FlashTrace t;
  FlashTraceView tv;
  if (ht) {
    t.reset(b, s, bm, bn, 0, chosen);
    tv = t.view();
  }
  if (via.in_process) {
    const editable::Fault f = editable::run_in_process(
        b, via.src,
        detail::teaching_launch(q.data(), k.data(), v.data(), out.data(), s, o.resolved_scale(s.d), o.causal, bm, bn,
                                ht ? &tv : nullptr));
    EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
  } else {
    const editable::Fault f = run_teaching(b, q.data(), k.data(), v.data(), out.data(), s, o, bm, bn, ht ? &tv : nullptr, via.src);
    EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
  }
  mem::synchronize(b);
  if (ht) {
    ht->m0 = t.m_before.to_host();
    ht->m1 = t.m_after.to_host();
    ht->alpha = t.alpha.to_host();
    ht->l0 = t.l_before.to_host();
    ht->l1 = t.l_after.to_host();
    ht->rowsum = t.rowsum.to_host();
    ht->o_partial = t.o_partial.to_host();
    ht->s_tile = t.s_tile.to_host();
    ht->p_tile = t.p_tile.to_host();
    ht->state = t.tile_state.to_host();
    ht->rows = t.rows;
    ht->steps = t.steps;
    ht->q_blocks = t.q_blocks;
  }
  return out.to_host();
}

using test::nan_count;
using test::rel_err;

// float32 accumulation over up to 65536 keys, scores of order 1; large-magnitude cases scale it.
double tolerance(const Shape& s, float magnitude) {
  const double base = s.lk > 4096 ? 2e-5 : 2e-6;
  return base * std::max(1.0, double(magnitude) * magnitude * std::sqrt(double(s.d)));
}

void check(const Shape& s, const Options& o, int bm = kDefaultBlockM, int bn = kDefaultBlockN,
           float magnitude = 1.0f, const std::vector<Backend>& bs = test::backends()) {
  const Inputs in = test::random_attention_inputs(s, magnitude);
  std::vector<double> ref(in.q.size());
  attention::reference(in.q.data(), in.k.data(), in.v.data(), s, o, ref.data());
  for (Backend b : bs) {
    SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text() + " block_m=" + std::to_string(bm) +
                 " block_n=" + std::to_string(bn) + (o.causal ? " causal" : ""));
    const std::vector<float> got = run_on(b, in, s, o, bm, bn);
    EXPECT_EQ(nan_count(got), 0u);
    EXPECT_LT(rel_err(got, ref), tolerance(s, magnitude));
  }
}

// [SECTION] Rung 4's shapes -------------------------------------------------------------------------------

TEST(FlashAttention, WriteUpShapes) {
  check(shape(5, 15, 32), {});
  check(shape(1, 10, 64), {});
}

TEST(FlashAttention, SingleQuerySingleKeyEveryD) {
  for (int d : {16, 32, 64, 128}) check(shape(1, 1, d), {});
}

TEST(FlashAttention, LengthsAroundTheTiles) {
  // block_m = block_n = 16: lengths 15, 16, 17, 33 on both sides.
  for (int64_t lq : {15, 16, 17, 33})
    for (int64_t lk : {1, 15, 16, 17, 33}) check(shape(lq, lk, 32), {}, 16, 16);
}

TEST(FlashAttention, EveryHeadDim) {
  for (int d : {16, 32, 64, 128}) check(shape(37, 53, d), {});
}

TEST(FlashAttention, BatchAndHeads) {
  check(shape(19, 23, 64, 2, 3), {}, 16, 16);
  Options c;
  c.causal = true;
  check(shape(19, 23, 16, 3, 2), c, 16, 32);
}

TEST(FlashAttention, CausalShorterEqualLongerQueries) {
  Options o;
  o.causal = true;
  for (auto [bm, bn] : {std::pair<int, int>{16, 16}, {32, 16}, {16, 64}}) {
    check(shape(5, 15, 32), o, bm, bn);
    check(shape(40, 40, 64), o, bm, bn);
    check(shape(45, 20, 16), o, bm, bn);  // rows 0..24 see nothing
  }
}

TEST(FlashAttention, RowsThatSeeNothingAreExactlyZero) {
  Options o;
  o.causal = true;
  const Shape s = shape(45, 20, 16);  // row i sees i - 24 keys
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const Inputs in = test::random_attention_inputs(s);
    const std::vector<float> got = run_on(b, in, s, o, 16, 16);
    for (int64_t i = 0; i < s.lq; ++i) {
      const bool empty = attention::visible_keys(i, s.lq, s.lk, true) == 0;
      EXPECT_EQ(empty, i < 25);
      for (int c = 0; c < s.d; ++c) {
        ASSERT_FALSE(std::isnan(got[size_t(i * s.d + c)])) << "row " << i;
        if (empty) ASSERT_EQ(got[size_t(i * s.d + c)], 0.0f) << "row " << i;
      }
    }
  }
}

TEST(FlashAttention, LargeMagnitudeScores) {
  check(shape(13, 29, 32), {}, 16, 16, 30.0f);
  Options o;
  o.causal = true;
  check(shape(13, 29, 32), o, 16, 16, 30.0f);
}

// [SECTION] Tiles --------------------------------------------------------------------------------------------

TEST(FlashAttention, EveryTileSizeOffered) {
  for (int d : {32, 128}) {
    const auto tiles = offered_tiles(d, device_info(Backend::Cpu).smem_per_block_optin);
    EXPECT_EQ(tiles.size(), d == 32 ? 16u : 15u);  // at d=128, 128 x 128 does not fit
    for (auto [bm, bn] : tiles) {
      check(shape(37, 45, d), {}, bm, bn);
      Options o;
      o.causal = true;
      check(shape(37, 45, d), o, bm, bn);
    }
  }
}

TEST(FlashAttention, TilesOutsideTheRangeOrTheSmemAreRefused) {
  const Shape s = shape(4, 4, 128);
  std::vector<float> q(size_t(4 * 128), 0.5f), k = q, v = q, out(q.size());
  for (auto [bm, bn] : {std::pair<int, int>{8, 16}, {16, 256}, {24, 16}, {16, 48}})
    EXPECT_THROW(run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}, bm, bn), InputError);
  try {
    run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}, 128, 128);
    ADD_FAILURE() << "128 x 128 at d=128 was not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(smem_bytes(128, 128, 128))), std::string::npos) << e.what();
  }
}

// [SECTION] No wall ------------------------------------------------------------------------------------------

TEST(FlashAttention, RunsPastRung4sWall) {
  const int64_t wall = attention::max_lk(128, attention::smem_limit(Backend::Cpu));
  check(shape(20, wall + 1, 128), {});
}

TEST(FlashAttention, Lk65536AtD128) {
  // The CPU backend takes a few queries (it runs every program in turn); the GPU takes more.
  for (bool causal : {false, true}) {
    Options o;
    o.causal = causal;
    check(shape(4, 65536, 128), o, 16, 64, 1.0f, {Backend::Cpu});
  }
}

TEST(FlashAttention, Lk65536AtD128OnGpu) {
  KL_REQUIRE_CUDA();
  for (bool causal : {false, true}) {
    Options o;
    o.causal = causal;
    check(shape(300, 65536, 128), o, 64, 64, 1.0f, {Backend::Cuda});
  }
}

// [SECTION] The trace ------------------------------------------------------------------------------------------

// The recorded trace obeys the online-softmax recurrence, step by step, row by row.
void check_trace(const HostTrace& t, const Shape& s, const Options& o, int bm, int bn) {
  ASSERT_EQ(t.rows, s.bh() * s.lq);
  ASSERT_EQ(t.steps, (s.lk + bn - 1) / bn);
  for (int64_t r = 0; r < t.rows; ++r) {
    const int64_t i = r % s.lq, bh = r / s.lq, qb = i / bm;
    const int64_t n_vis = attention::visible_keys(i, s.lq, s.lk, o.causal);
    for (int64_t st = 0; st < t.steps; ++st) {
      const size_t c = size_t(r * t.steps + st);
      SCOPED_TRACE("row " + std::to_string(r) + " step " + std::to_string(st));
      for (const std::vector<float>* a : {&t.m0, &t.m1, &t.alpha, &t.l0, &t.l1, &t.rowsum})
        ASSERT_FALSE(std::isnan((*a)[c])) << "trace entry never written";
      // chained: what a step starts from is what the previous one ended with
      if (st == 0) {
        ASSERT_EQ(t.m0[c], -kInf);
        ASSERT_EQ(t.l0[c], 0.0f);
      } else {
        ASSERT_EQ(t.m0[c], t.m1[c - 1]);
        ASSERT_EQ(t.l0[c], t.l1[c - 1]);
      }
      // m never decreases; alpha = exp(m_before - m_after) (1 while nothing has been seen)
      ASSERT_GE(t.m1[c], t.m0[c]);
      if (t.m1[c] == -kInf) ASSERT_EQ(t.alpha[c], 1.0f);
      else ASSERT_NEAR(t.alpha[c], std::exp(double(t.m0[c]) - double(t.m1[c])), 1e-6);
      ASSERT_GE(t.alpha[c], 0.0f);
      ASSERT_LE(t.alpha[c], 1.0f);
      // l_after = alpha * l_before + rowsum(P)
      const double want = double(t.alpha[c]) * t.l0[c] + t.rowsum[c];
      ASSERT_NEAR(t.l1[c], want, 1e-6 * std::max(1.0, want));
      // rowsum is 0 exactly for tiles the row cannot see, at least exp(0)=1 where the tile has its max
      const bool row_sees_tile = st * bn < n_vis;
      if (!row_sees_tile) ASSERT_EQ(t.rowsum[c], 0.0f);
      if (row_sees_tile && t.m1[c] > t.m0[c]) ASSERT_GE(t.rowsum[c], 1.0f - 1e-6f);
      // skipped tiles: exactly those past the block's last visible key
      const uint8_t state = t.state[size_t((bh * t.q_blocks + qb) * t.steps + st)];
      const bool run = st < detail::tiles_to_run(qb, bm, bn, s.lq, s.lk, o.causal);
      ASSERT_EQ(state, run ? kTileComputed : kTileSkipped);
    }
    // at the end l is the softmax denominator: 0 exactly when the row saw nothing
    const float l_end = t.l1[size_t(r * t.steps + t.steps - 1)];
    if (n_vis == 0) ASSERT_EQ(l_end, 0.0f);
    else ASSERT_GE(l_end, 1.0f - 1e-6f);
  }
}

TEST(FlashAttention, TraceSatisfiesTheRecurrence) {
  struct Case {
    Shape s;
    bool causal;
    int bm, bn;
  };
  const Case cases[] = {{shape(37, 70, 32), false, 16, 16}, {shape(37, 70, 32), true, 16, 16},
                        {shape(50, 20, 16, 2, 1), true, 16, 16}, {shape(9, 130, 64), false, 32, 64},
                        {shape(33, 33, 128, 1, 2), true, 32, 16}};
  size_t rescaled = 0;
  for (const Case& k : cases)
    for (Backend b : test::backends()) {
      SCOPED_TRACE(std::string(backend_name(b)) + " " + k.s.text() + (k.causal ? " causal" : ""));
      Options o;
      o.causal = k.causal;
      const Inputs in = test::random_attention_inputs(k.s, 2.0f);  // scores of a few units: the max moves often
      HostTrace t;
      const int64_t chosen = k.s.lq > k.bm ? 1 : 0;
      const std::vector<float> out = run_on(b, in, k.s, o, k.bm, k.bn, &t, chosen);
      check_trace(t, k.s, o, k.bm, k.bn);
      // Count rescales (the max moved after something was seen): the cases must exercise them.
      for (size_t c = 0; c < t.alpha.size(); ++c) rescaled += (t.l0[c] > 0 && t.alpha[c] < 1.0f) ? 1 : 0;
      // The chosen block (q block `chosen` of bh 0): P's row sums are the recorded rowsums, and the last
      // partial O divided by the final l is the output.
      const int64_t steps = t.steps;
      for (int r = 0; r < k.bm; ++r) {
        const int64_t i = chosen * k.bm + r;
        if (i >= k.s.lq) break;
        for (int64_t st = 0; st < steps; ++st) {
          double ps = 0;
          for (int j = 0; j < k.bn; ++j) ps += t.p_tile[size_t((st * k.bm + r) * k.bn + j)];
          ASSERT_NEAR(ps, t.rowsum[size_t(i * steps + st)], 1e-5 * std::max(1.0, ps));
        }
        const float l = t.l1[size_t(i * steps + steps - 1)];
        for (int c = 0; c < k.s.d; ++c) {
          const float o_last = t.o_partial[size_t(((steps - 1) * k.bm + r) * k.s.d + c)];
          ASSERT_NEAR(l > 0 ? o_last / l : 0.0f, out[size_t(i * k.s.d + c)], 1e-6);
        }
      }
    }
  EXPECT_GT(rescaled, 20u);  // about 90 per backend with these shapes
}

TEST(FlashAttention, CpuAndCudaTracesAgree) {
  KL_REQUIRE_CUDA();
  for (bool causal : {false, true}) {
    const Shape s = shape(45, 77, 64, 1, 2);
    Options o;
    o.causal = causal;
    const Inputs in = test::random_attention_inputs(s, 2.0f);
    HostTrace tc, tg;
    const std::vector<float> oc = run_on(Backend::Cpu, in, s, o, 16, 32, &tc, 2);
    const std::vector<float> og = run_on(Backend::Cuda, in, s, o, 16, 32, &tg, 2);
    EXPECT_EQ(tc.state, tg.state);
    auto agree = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::isinf(a[i]) || std::isinf(b[i])) {
          ASSERT_EQ(a[i], b[i]) << what << " at " << i;
          continue;
        }
        ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::fabs(a[i]))) << what << " at " << i;
      }
    };
    agree(tc.m0, tg.m0, "m_before");
    agree(tc.m1, tg.m1, "m_after");
    agree(tc.alpha, tg.alpha, "alpha");
    agree(tc.l0, tg.l0, "l_before");
    agree(tc.l1, tg.l1, "l_after");
    agree(tc.rowsum, tg.rowsum, "rowsum");
    agree(tc.s_tile, tg.s_tile, "S tiles");
    agree(tc.p_tile, tg.p_tile, "P tiles");
    agree(tc.o_partial, tg.o_partial, "partial O");
    agree(oc, og, "out");
  }
}

// The view's weights, composed from the trace, are the softmax over the keys seen so far: at a middle
// step over the first step*BLOCK_N keys, at the last step the full softmax (float64 reference).
TEST(FlashAttention, ComposedWeightsAreThePartialSoftmax) {
  const Shape s = shape(40, 75, 32);
  const int bm = 16, bn = 16;
  for (bool causal : {false, true})
    for (Backend b : test::backends()) {
      SCOPED_TRACE(std::string(backend_name(b)) + (causal ? " causal" : ""));
      Options o;
      o.causal = causal;
      const Inputs in = test::random_attention_inputs(s, 2.0f);
      Buffer<float> q(b, in.q.size()), k(b, in.k.size()), v(b, in.v.size()), out(b, in.q.size());
      q.upload(in.q);
      k.upload(in.k);
      v.upload(in.v);
      FlashTrace t;
      const int64_t chosen = 1;
      t.reset(b, s, bm, bn, 0, chosen);
      FlashTraceView tv = t.view();
      run_teaching(b, q.data(), k.data(), v.data(), out.data(), s, o, bm, bn, &tv);
      for (int64_t step : {int64_t(1), int64_t(3), t.steps}) {
        Buffer<float> w(b, size_t(bm * s.lk * 2));
        w.fill_bytes(0xFF);
        compose_weights(b, tv, s.lq, s.lk, step, w.data(), 2);
        mem::synchronize(b);
        const std::vector<float> got = w.to_host();
        EXPECT_EQ(nan_count(got), 0u);
        for (int r = 0; r < bm; ++r) {
          const int64_t i = chosen * bm + r;
          const int64_t seen = std::min<int64_t>(step * bn, attention::visible_keys(i, s.lq, s.lk, causal));
          std::vector<double> sc(size_t(std::max<int64_t>(seen, 0)));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < seen; ++j) {
            double a = 0;
            for (int c = 0; c < s.d; ++c) a += double(in.q[size_t(i * s.d + c)]) * in.k[size_t(j * s.d + c)];
            sc[size_t(j)] = a / std::sqrt(double(s.d));
            mx = std::max(mx, sc[size_t(j)]);
          }
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int64_t j = 0; j < s.lk; ++j) {
            const float* c = &got[size_t((r * s.lk + j) * 2)];
            if (j < seen) {
              ASSERT_NEAR(c[0], sc[size_t(j)] / sum, 1e-6) << "step " << step << " row " << r << " key " << j;
              ASSERT_EQ(c[1], 0.0f);
            } else {
              ASSERT_EQ(c[0], 0.0f);
              ASSERT_EQ(c[1], 1.0f);
            }
          }
        }
      }
    }
}

// [SECTION] Grouped-query attention -------------------------------------------------------------------------

Shape gqa_shape(int64_t lq, int64_t lk, int d, int64_t batch, int64_t heads, int64_t kv_heads) {
  Shape s = shape(lq, lk, d, batch, heads);
  s.kv_heads = kv_heads;
  return s;
}

// q with batch*heads heads, k and v with batch*kv_heads.
Inputs gqa_inputs(const Shape& s, float magnitude = 1.0f) {
  Inputs in;
  in.q = test::random_floats(size_t(s.bh() * s.lq * s.d), -magnitude, magnitude);
  in.k = test::random_floats(size_t(s.kv_bh() * s.lk * s.d), -magnitude, magnitude);
  in.v = test::random_floats(size_t(s.kv_bh() * s.lk * s.d));
  return in;
}

// k or v [batch, kv_heads, lk, d] made [batch, heads, lk, d]: query head h gets kv head h / group
// (interleaved, PyTorch's repeat_interleave), or h % kv_heads (tiled, the wrong map) when `tiled`.
std::vector<float> repeat_kv(const std::vector<float>& x, const Shape& s, bool tiled = false) {
  const size_t head = size_t(s.lk * s.d);
  std::vector<float> r(size_t(s.bh()) * head);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t src = b * s.kv() + (tiled ? h % s.kv() : h / (s.heads / s.kv()));
      std::copy_n(&x[size_t(src) * head], head, &r[size_t(b * s.heads + h) * head]);
    }
  return r;
}

TEST(FlashAttention, KvHeadIndexMapMatchesBruteForce) {
  for (int64_t batch : {1, 3})
    for (int64_t heads : {1, 2, 6, 8, 16})
      for (int64_t kv = 1; kv <= heads; ++kv) {
        if (heads % kv != 0) continue;
        const int64_t group = heads / kv;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t h = 0; h < heads; ++h) {
            // query head h of batch b reads kv head floor(h * kv / heads) of batch b
            int64_t want = 0;
            while ((want + 1) * heads <= h * kv) ++want;
            ASSERT_EQ(kv_head_of(int(h), int(group)), want) << heads << "/" << kv << " h=" << h;
            ASSERT_EQ(kv_bh_of(b * heads + h, heads, group), b * kv + want);
          }
      }
  Shape s = shape(4, 4, 16, 2, 8);
  EXPECT_EQ(s.kv(), 8);  // kv_heads 0: as many as q
  EXPECT_EQ(s.group(), 1);
  s.kv_heads = 2;
  EXPECT_EQ(s.kv_bh(), 4);
  EXPECT_EQ(s.group(), 4);
  EXPECT_EQ(s.text(), "B=2 H=8 Hkv=2 Lq=4 Lk=4 d=16");
}

// The GQA reference equals rung 4's reference on k and v repeated per query head (repeat_interleave),
// and differs from it on the tiled repetition (so the comparison can tell the two maps apart).
TEST(FlashAttention, GqaReferenceIsRung4sOnRepeatedKv) {
  for (bool causal : {false, true}) {
    Options o;
    o.causal = causal;
    const Shape s = gqa_shape(9, 13, 16, 2, 8, 2);
    const Inputs in = gqa_inputs(s);
    std::vector<double> got(in.q.size()), want(in.q.size()), tiled(in.q.size());
    reference(in.q.data(), in.k.data(), in.v.data(), s, o, got.data());
    const attention::Shape mha = shape(9, 13, 16, 2, 8);
    attention::reference(in.q.data(), repeat_kv(in.k, s).data(), repeat_kv(in.v, s).data(), mha, o, want.data());
    attention::reference(in.q.data(), repeat_kv(in.k, s, true).data(), repeat_kv(in.v, s, true).data(), mha, o,
                         tiled.data());
    EXPECT_EQ(got, want);
    EXPECT_NE(got, tiled);
  }
}

// The teaching kernel on both backends: Hq / Hkv in {1, 2, 4, 8}, odd lengths, Lq < Lk, = and >,
// causal and not, against the float64 GQA reference.
TEST(FlashAttention, GroupedQueryAttentionOnBothBackends) {
  struct Case {
    int64_t lq, lk;
    int d, bm, bn;
  };
  const Case cases[] = {{17, 33, 16, 16, 16}, {33, 17, 32, 16, 32}, {45, 45, 64, 32, 16}, {5, 71, 128, 16, 64}};
  int index = 0;
  for (int64_t ratio : {1, 2, 4, 8})
    for (const Case& c : cases)
      for (bool causal : {false, true}) {
        const int64_t kv = 1 + index % 2, batch = 1 + (index / 2) % 2;
        ++index;
        const Shape s = gqa_shape(c.lq, c.lk, c.d, batch, ratio * kv, kv);
        Options o;
        o.causal = causal;
        const Inputs in = gqa_inputs(s);
        std::vector<double> ref(in.q.size());
        reference(in.q.data(), in.k.data(), in.v.data(), s, o, ref.data());
        for (Backend b : test::backends()) {
          SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text() + (causal ? " causal" : ""));
          const std::vector<float> got = run_on(b, in, s, o, c.bm, c.bn);
          EXPECT_EQ(nan_count(got), 0u);
          EXPECT_LT(rel_err(got, ref), tolerance(s, 1.0f));
        }
      }
}

// [SECTION] Head dimension 256 ------------------------------------------------------------------------------

// d = 256 on both backends: odd lengths, Lq != Lk, causal and not, the tiles that fit (64 x 32, 32 x 64,
// 16 x 16), and grouped-query ratios 1 and 4, against the float64 reference.
TEST(FlashAttention, HeadDim256OnBothBackends) {
  for (bool causal : {false, true}) {
    Options o;
    o.causal = causal;
    for (auto [bm, bn] : {std::pair<int, int>{64, 32}, {32, 64}, {16, 16}}) check(shape(37, 53, 256), o, bm, bn);
    check(shape(70, 33, 256, 2, 1), o, 64, 32);  // Lq > Lk: causal rows 0..36 see nothing
    for (int64_t ratio : {1, 4}) {
      const Shape s = gqa_shape(29, 67, 256, 1, ratio * 2, 2);
      const Inputs in = gqa_inputs(s);
      std::vector<double> ref(in.q.size());
      reference(in.q.data(), in.k.data(), in.v.data(), s, o, ref.data());
      for (Backend b : test::backends()) {
        SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text() + (causal ? " causal" : ""));
        const std::vector<float> got = run_on(b, in, s, o, 64, 32);
        EXPECT_EQ(nan_count(got), 0u);
        EXPECT_LT(rel_err(got, ref), tolerance(s, 1.0f));
      }
    }
  }
}

// At d = 256 the d <= 128 default 64 x 64 needs 279296 bytes, past the 227 KiB limit: refused with the
// bytes; the default there is 64 x 32 (205568 bytes), which fits.
TEST(FlashAttention, HeadDim256ShrinksTheDefaultTile) {
  EXPECT_EQ(smem_bytes(64, 64, 256), 279296);
  EXPECT_EQ(smem_bytes(64, 32, 256), 205568);
  EXPECT_EQ(default_tiles(128), (std::pair<int, int>{64, 64}));
  EXPECT_EQ(default_tiles(256), (std::pair<int, int>{64, 32}));
  const int64_t limit = device_info(Backend::Cpu).smem_per_block_optin;
  EXPECT_GT(smem_bytes(64, 64, 256), limit);
  EXPECT_LE(smem_bytes(64, 32, 256), limit);
  for (int d : {16, 32, 64, 128, 256}) {
    const auto [bm, bn] = default_tiles(d);
    EXPECT_LE(smem_bytes(bm, bn, d), limit) << "d=" << d;
  }
  const Shape s = shape(4, 4, 256);
  std::vector<float> q(size_t(4 * 256), 0.5f), k = q, v = q, out(q.size());
  try {
    run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}, 64, 64);
    ADD_FAILURE() << "64 x 64 at d=256 was not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("279296"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}, 64, 32));
  // d past 256 (or between): one line listing the head dims this rung takes.
  const Shape bad = shape(4, 4, 512);
  std::vector<float> q2(size_t(4 * 512), 0.5f), o2(q2.size());
  try {
    run_teaching(Backend::Cpu, q2.data(), q2.data(), q2.data(), o2.data(), bad, {}, 16, 16);
    ADD_FAILURE() << "d=512 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("16, 32, 64, 128, 256"), std::string::npos) << e.what();
  }
}

TEST(FlashAttention, GroupedQueryTraceSatisfiesTheRecurrence) {
  const Shape s = gqa_shape(37, 50, 32, 2, 4, 2);
  for (bool causal : {false, true})
    for (Backend b : test::backends()) {
      SCOPED_TRACE(std::string(backend_name(b)) + (causal ? " causal" : ""));
      Options o;
      o.causal = causal;
      const Inputs in = gqa_inputs(s, 2.0f);
      HostTrace t;
      const std::vector<float> out = run_on(b, in, s, o, 16, 16, &t, 1);
      check_trace(t, s, o, 16, 16);
      std::vector<double> ref(in.q.size());
      reference(in.q.data(), in.k.data(), in.v.data(), s, o, ref.data());
      EXPECT_LT(rel_err(out, ref), tolerance(s, 2.0f));
    }
}

TEST(FlashAttention, TeachingRefusesKvHeadsNotDividingQs) {
  for (auto [heads, kv] : {std::pair<int64_t, int64_t>{4, 3}, {2, 4}, {6, 4}}) {
    const Shape s = gqa_shape(4, 4, 16, 1, heads, kv);
    std::vector<float> q(size_t(s.bh() * 4 * 16), 0.5f), k(size_t(s.kv_bh() * 4 * 16), 0.5f), v = k, out(q.size());
    try {
      run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}, 16, 16);
      ADD_FAILURE() << "Hq=" << heads << " Hkv=" << kv << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), gqa_heads_message(kv, heads));
    }
  }
}

// [SECTION] The editable source -------------------------------------------------------------------------

editable::Source shipped_copy(const std::string& edit_from = "", const std::string& edit_to = "") {
  return test::shipped_copy("flash-attention", "my_flash_attention.cu", edit_from, edit_to);
}

using test::same_bits;

void expect_same_bits(const HostTrace& a, const HostTrace& b) {
  EXPECT_TRUE(same_bits(a.m0, b.m0)) << "m_before";
  EXPECT_TRUE(same_bits(a.m1, b.m1)) << "m_after";
  EXPECT_TRUE(same_bits(a.alpha, b.alpha)) << "alpha";
  EXPECT_TRUE(same_bits(a.l0, b.l0)) << "l_before";
  EXPECT_TRUE(same_bits(a.l1, b.l1)) << "l_after";
  EXPECT_TRUE(same_bits(a.rowsum, b.rowsum)) << "rowsum";
  EXPECT_TRUE(same_bits(a.s_tile, b.s_tile)) << "S tiles";
  EXPECT_TRUE(same_bits(a.p_tile, b.p_tile)) << "P tiles";
  EXPECT_TRUE(same_bits(a.o_partial, b.o_partial)) << "partial O";
  EXPECT_EQ(a.state, b.state);
}

TEST(FlashAttention, EditableSourceIsTheShippedKernel) {
  const std::string text = editable::shipped_source("flash-attention");
  EXPECT_EQ(editable::shipped_file("flash-attention"), "flash_attention.cu");
  EXPECT_NE(text.find("__global__ void flash_teaching("), std::string::npos);
  EXPECT_NE(text.find("expf(m_old - m_new)"), std::string::npos);  // the rescale, visible
}

// The shipped source compiled at run time (the host compiler and the CPU prelude, as an edit would be)
// reproduces the shipped build's output and every trace array bit for bit: multi-head and grouped-query,
// causal with Lq < Lk and Lq > Lk (skipped tiles, rows that see nothing), tails, d = 256.
TEST(FlashAttention, UneditedSourceCompiledAtRunTimeReproducesTheShippedTrace) {
  const editable::Source src = shipped_copy();
  struct Case {
    Shape s;
    bool causal;
    int bm, bn;
  };
  Shape gqa = shape(21, 70, 16, 2, 4);
  gqa.kv_heads = 2;
  const Case cases[] = {{shape(37, 70, 32), false, 16, 16}, {shape(37, 70, 32), true, 16, 32},
                        {shape(50, 20, 16, 2, 1), true, 16, 16}, {gqa, true, 16, 32},
                        {shape(29, 45, 256), false, 64, 32}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.s.text() + (c.causal ? " causal" : ""));
    Options o;
    o.causal = c.causal;
    Inputs in;
    in.q = test::random_floats(size_t(c.s.bh() * c.s.lq * c.s.d), -2.0f, 2.0f);
    in.k = test::random_floats(size_t(c.s.kv_bh() * c.s.lk * c.s.d), -2.0f, 2.0f);
    in.v = test::random_floats(size_t(c.s.kv_bh() * c.s.lk * c.s.d));
    const int64_t chosen = c.s.lq > c.bm ? 1 : 0;
    HostTrace shipped, edited;
    const std::vector<float> a = run_on(Backend::Cpu, in, c.s, o, c.bm, c.bn, &shipped, chosen);
    const std::vector<float> b = run_on(Backend::Cpu, in, c.s, o, c.bm, c.bn, &edited, chosen, {&src, true});
    EXPECT_EQ(nan_count(a), 0u);
    EXPECT_TRUE(same_bits(a, b)) << "out";
    expect_same_bits(shipped, edited);
  }
}

// NVRTC compiles the source and each gallery bug without a GPU (the editor's Ctrl+Enter on the CUDA
// backend), and the host compiler compiles them against the CPU prelude.
TEST(FlashAttention, SourceAndGalleryCompileForBothBackends) {
  std::vector<editable::Source> all = {shipped_copy()};
  for (const editable::GalleryBug& b : editable::gallery("flash-attention")) all.push_back({"flash-attention", b.file, b.text});
  EXPECT_EQ(all.size(), 3u);
  for (const editable::Source& src : all) {
    SCOPED_TRACE(src.file);
    EXPECT_NO_THROW(editable::compile(Backend::Cpu, src));
    if (cuda_compiled()) EXPECT_NO_THROW(editable::compile(Backend::Cuda, src));
  }
}

// On a GPU: the same source on the CPU (prelude) and CUDA (nvcc's shipped build; NVRTC for the edit, in
// the worker), unedited and with the gallery's missing rescale: tile states identical, every value
// within float32 tolerance. Not bit for bit: CUDA's expf and the host's differ in the last ulp, and nvcc
// fuses the dot products' multiply-adds (the CPU build is compiled with -ffp-contract=off).
TEST(FlashAttention, EditedSourceCpuAndCudaTracesAgree) {
  KL_REQUIRE_CUDA();
  editable::worker::set_program(KL_BINARY);
  const editable::Source edit =
      shipped_copy("const float l_new = a * l_old + rowsum;", "const float l_new = l_old + rowsum;");
  Shape s = shape(45, 77, 64, 1, 4);
  s.kv_heads = 2;
  for (const editable::Source* src : {static_cast<const editable::Source*>(nullptr), &edit})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(src ? "edited" : "shipped") + (causal ? " causal" : ""));
      Options o;
      o.causal = causal;
      Inputs in;
      in.q = test::random_floats(size_t(s.bh() * s.lq * s.d), -2.0f, 2.0f);
      in.k = test::random_floats(size_t(s.kv_bh() * s.lk * s.d), -2.0f, 2.0f);
      in.v = test::random_floats(size_t(s.kv_bh() * s.lk * s.d));
      HostTrace tc, tg;
      const std::vector<float> oc = run_on(Backend::Cpu, in, s, o, 16, 32, &tc, 2, {src, false});
      const std::vector<float> og = run_on(Backend::Cuda, in, s, o, 16, 32, &tg, 2, {src, false});
      EXPECT_EQ(tc.state, tg.state);
      auto agree = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
        ASSERT_EQ(a.size(), b.size()) << what;
        for (size_t i = 0; i < a.size(); ++i) {
          if (std::isinf(a[i]) || std::isinf(b[i]) || std::isnan(a[i]) || std::isnan(b[i])) {
            ASSERT_TRUE(same_bits<float>({a[i]}, {b[i]})) << what << " at " << i << ": " << a[i] << " vs " << b[i];
            continue;
          }
          ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::fabs(a[i]))) << what << " at " << i;
        }
      };
      agree(tc.m0, tg.m0, "m_before");
      agree(tc.m1, tg.m1, "m_after");
      agree(tc.alpha, tg.alpha, "alpha");
      agree(tc.l0, tg.l0, "l_before");
      agree(tc.l1, tg.l1, "l_after");
      agree(tc.rowsum, tg.rowsum, "rowsum");
      agree(tc.s_tile, tg.s_tile, "S tiles");
      agree(tc.p_tile, tg.p_tile, "P tiles");
      agree(tc.o_partial, tg.o_partial, "partial O");
      agree(oc, og, "out");
    }
}

// An edited kernel that stores past a trace record is caught and located, and does not corrupt memory.
TEST(FlashAttention, EditedKernelsOutOfBoundsStoreIsLocated) {
  editable::worker::set_program(KL_BINARY);
  const editable::Source edit = shipped_copy("trace_tile_state.store((bh * q_blocks + qb) * steps + step, 1);",
                                             "trace_tile_state.store((bh * q_blocks + qb) * steps + step + 1, 1);");
  const Shape s = shape(20, 40, 16);  // 2 query blocks x 3 steps: the last program's last step is past the end
  const Inputs in = test::random_attention_inputs(s);
  Buffer<float> q(Backend::Cpu, in.q.size()), k(Backend::Cpu, in.k.size()), v(Backend::Cpu, in.v.size()),
      out(Backend::Cpu, in.q.size());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  FlashTrace t;
  t.reset(Backend::Cpu, s, 16, 16);
  FlashTraceView tv = t.view();
  const editable::Fault f = run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}, 16, 16, &tv, &edit);
  EXPECT_EQ(f.text(), "out-of-bounds store to trace_tile_state[6] (size 6) by program 1, lane 0");
}

// [SECTION] The command-line entry -----------------------------------------------------------------------

Array arr(std::vector<int64_t> shape) { return test::random_array(std::move(shape)); }

TEST(FlashAttention, EntryRunsWithTrace) {
  const KernelEntry e = entry();
  ASSERT_FALSE(e.variants.empty());
  EXPECT_EQ(e.variants.front(), "teaching");
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = "teaching";
  r.params = ParamValues(e.params);
  r.params.set("block_m=16");
  r.params.set("block_n=32");
  r.params.set("causal=1");
  r.inputs["q"] = arr({2, 1, 21, 16});
  r.inputs["k"] = arr({2, 1, 70, 16});
  r.inputs["v"] = arr({2, 1, 70, 16});
  const KernelRunResult res = e.run(r);
  EXPECT_EQ(res.outputs.at("out").shape, (std::vector<int64_t>{2, 1, 21, 16}));
  for (const char* n : {"trace_m", "trace_l", "trace_alpha"}) {
    ASSERT_TRUE(res.outputs.count(n)) << n;
    EXPECT_EQ(res.outputs.at(n).shape, (std::vector<int64_t>{42, 3})) << n;
  }
  Options o;
  o.causal = true;
  std::vector<double> ref(size_t(2 * 21 * 16));
  attention::reference(r.inputs["q"].data.data(), r.inputs["k"].data.data(), r.inputs["v"].data.data(),
                       shape(21, 70, 16, 2, 1), o, ref.data());
  EXPECT_LT(rel_err(res.outputs.at("out").data, ref), 2e-6);
  r.params.set("block_m=128");
  r.params.set("block_n=128");
  r.inputs["q"] = arr({3, 128});
  r.inputs["k"] = arr({5, 128});
  r.inputs["v"] = arr({5, 128});
  EXPECT_THROW(e.run(r), InputError);  // the tile does not fit at d = 128
}

// `run flash-attention` at d = 256 with no tile given: the default shrinks to 64 x 32 (the trace has
// ceil(45 / 32) = 2 steps); grouped-query k and v; a given 64 x 64 is refused, not shrunk; d = 512 refused.
TEST(FlashAttention, EntryRunsHeadDim256) {
  const KernelEntry e = entry();
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = "teaching";
  r.params = ParamValues(e.params);
  r.inputs["q"] = arr({1, 4, 37, 256});
  r.inputs["k"] = arr({1, 1, 45, 256});
  r.inputs["v"] = arr({1, 1, 45, 256});
  const KernelRunResult res = e.run(r);
  EXPECT_EQ(res.outputs.at("out").shape, (std::vector<int64_t>{1, 4, 37, 256}));
  EXPECT_EQ(res.outputs.at("trace_m").shape, (std::vector<int64_t>{4 * 37, 2}));
  std::vector<double> ref(size_t(4 * 37 * 256));
  reference(r.inputs["q"].data.data(), r.inputs["k"].data.data(), r.inputs["v"].data.data(),
            gqa_shape(37, 45, 256, 1, 4, 1), {}, ref.data());
  EXPECT_LT(rel_err(res.outputs.at("out").data, ref), 2e-6);
  KernelRunRequest given = r;
  given.params.set("block_m=64");
  given.params.set("block_n=64");
  EXPECT_THROW(e.run(given), InputError);
  r.inputs["q"] = arr({3, 512});
  r.inputs["k"] = arr({5, 512});
  r.inputs["v"] = arr({5, 512});
  try {
    e.run(r);
    ADD_FAILURE() << "d=512 accepted";
  } catch (const InputError& ex) {
    EXPECT_NE(std::string(ex.what()).find("16, 32, 64, 128, 256"), std::string::npos) << ex.what();
  }
}

// `run flash-attention` with k and v of fewer heads (grouped-query attention): q [2, 8, 21, 16],
// k and v [2, 2, 70, 16]; the trace is per query row as before.
TEST(FlashAttention, EntryRunsGroupedQuery) {
  const KernelEntry e = entry();
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = "teaching";
  r.params = ParamValues(e.params);
  r.params.set("block_m=16");
  r.params.set("block_n=32");
  r.params.set("causal=1");
  r.inputs["q"] = arr({2, 8, 21, 16});
  r.inputs["k"] = arr({2, 2, 70, 16});
  r.inputs["v"] = arr({2, 2, 70, 16});
  const KernelRunResult res = e.run(r);
  EXPECT_EQ(res.outputs.at("out").shape, (std::vector<int64_t>{2, 8, 21, 16}));
  EXPECT_EQ(res.outputs.at("trace_m").shape, (std::vector<int64_t>{2 * 8 * 21, 3}));
  Options o;
  o.causal = true;
  std::vector<double> ref(size_t(2 * 8 * 21 * 16));
  reference(r.inputs["q"].data.data(), r.inputs["k"].data.data(), r.inputs["v"].data.data(),
            gqa_shape(21, 70, 16, 2, 8, 2), o, ref.data());
  EXPECT_LT(rel_err(res.outputs.at("out").data, ref), 2e-6);
}

// Hkv not dividing Hq (or larger): one line naming Hkv, its value and the rule; an InputError (exit 2).
TEST(FlashAttention, EntryRefusesKvHeadsNotDividingQs) {
  const KernelEntry e = entry();
  for (auto [heads, kv] : {std::pair<int64_t, int64_t>{8, 3}, {4, 8}, {6, 4}}) {
    KernelRunRequest r;
    r.backend = Backend::Cpu;
    r.variant = "teaching";
    r.params = ParamValues(e.params);
    r.inputs["q"] = arr({1, heads, 5, 16});
    r.inputs["k"] = arr({1, kv, 7, 16});
    r.inputs["v"] = arr({1, kv, 7, 16});
    try {
      e.run(r);
      ADD_FAILURE() << "Hq=" << heads << " Hkv=" << kv << " accepted";
    } catch (const InputError& err) {
      const std::string m = err.what();
      EXPECT_EQ(m, "Hkv (heads of k and v)=" + std::to_string(kv) + " is out of range: allowed a divisor of Hq=" +
                       std::to_string(heads) + " (grouped-query attention: query head h reads kv head h / (Hq / Hkv))");
    }
  }
  // k and v must still agree with each other, and in batch with q (rung 4's checks and messages).
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = "teaching";
  r.params = ParamValues(e.params);
  r.inputs["q"] = arr({1, 8, 5, 16});
  r.inputs["k"] = arr({1, 2, 7, 16});
  r.inputs["v"] = arr({1, 4, 7, 16});
  EXPECT_THROW(e.run(r), InputError);
  r.inputs["v"] = arr({2, 2, 7, 16});
  r.inputs["k"] = arr({2, 2, 7, 16});
  EXPECT_THROW(e.run(r), InputError);  // batch 2 against q's 1
  r.inputs["k"] = arr({1, 2, 7, 32});
  r.inputs["v"] = arr({1, 2, 7, 32});
  EXPECT_THROW(e.run(r), InputError);  // head dimension 32 against q's 16
}

}  // namespace
}  // namespace kl::flash_attention
