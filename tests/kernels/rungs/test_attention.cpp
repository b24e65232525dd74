// Rung 4 (kernels/attention.*): the smem kernel on both backends against the float64 reference.
// Shapes: Q(5,32)/K(15,32), Q(1,64)/K(10,64), Lq=Lk=1, lengths around the query block (15, 16, 17, 33),
// every d, batch/heads, causal with Lq < Lk, = and > (rows that see nothing give 0), large-magnitude
// scores; the wall (largest Lk that fits runs and is correct, one more is refused with its message).
// The unfused variant (standard attention, S and P through device memory) the same way, plus Lk past
// rung 4's wall and past rung 3's widest `fixed` row (its softmax switches to `online`).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/attention_inputs.h"
#include "test_util.h"

namespace kl::attention {
namespace {

using Inputs = test::AttentionInputs;

struct Outputs {
  std::vector<float> out, weights, scores;
};

// Runs the kernel on backend b with every output poisoned (NaN) first.
Outputs run_on(Backend b, const Inputs& in, const Shape& s, const Options& o, bool extras, int channels = 1) {
  Buffer<float> q(b, in.q.size()), k(b, in.k.size()), v(b, in.v.size()), out(b, in.q.size());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  out.fill_bytes(0xFF);
  const size_t cells = size_t(s.bh() * s.lq * s.lk) * size_t(channels);
  Buffer<float> w(b, extras ? cells : 0), sc(b, extras ? cells : 0);
  w.fill_bytes(0xFF);
  sc.fill_bytes(0xFF);
  Extras x;
  if (extras) {
    x.weights = w.data();
    x.scores = sc.data();
    x.channels = channels;
  }
  run(b, q.data(), k.data(), v.data(), out.data(), s, o, x);
  mem::synchronize(b);
  return {out.to_host(), w.to_host(), sc.to_host()};
}

using test::nan_count;
using test::rel_err;

Shape shape(int64_t lq, int64_t lk, int d, int64_t batch = 1, int64_t heads = 1) {
  return test::attention_shape<Shape>(lq, lk, d, batch, heads);
}

constexpr double kTol = 2e-6;  // float32 accumulation over at most 4096 terms

// kTol for sums of `terms` terms: float32's rounding errors add up as a random walk, so the error grows
// as the square root of the number of terms (rung 3's online softmax and P V over 32785 keys, say).
double accum_tol(int64_t terms) { return kTol * std::max(1.0, std::sqrt(double(terms) / 4096.0)); }

// The same attention done plainly in float32 (textbook three passes), for the tolerance rule
// (FlashAttention's): the kernel's error may be at most twice this one's, plus accum_tol. With large
// scores float32 itself loses digits (an error of eps * |s| in every exponent).
void plain_f32(const Inputs& in, const Shape& s, const Options& o, std::vector<double>& out,
               std::vector<double>& w) {
  const float scale = o.resolved_scale(s.d);
  const int d = s.d;
  out.assign(in.q.size(), 0.0);
  w.assign(size_t(s.bh() * s.lq * s.lk), 0.0);
  std::vector<float> row(size_t(s.lk));
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t i = 0; i < s.lq; ++i) {
      const int64_t n = visible_keys(i, s.lq, s.lk, o.causal);
      if (n == 0) continue;
      float mx = -std::numeric_limits<float>::infinity(), sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int c = 0; c < d; ++c) acc += in.q[size_t((bh * s.lq + i) * d + c)] * in.k[size_t((bh * s.lk + j) * d + c)];
        row[size_t(j)] = acc * scale;
        mx = std::max(mx, row[size_t(j)]);
      }
      for (int64_t j = 0; j < n; ++j) sum += (row[size_t(j)] = std::exp(row[size_t(j)] - mx));
      for (int64_t j = 0; j < n; ++j) {
        const float p = row[size_t(j)] / sum;
        w[size_t((bh * s.lq + i) * s.lk + j)] = p;
        for (int c = 0; c < d; ++c) out[size_t((bh * s.lq + i) * d + c)] += p * in.v[size_t((bh * s.lk + j) * d + c)];
      }
    }
}

double err_of(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) num += (a[i] - ref[i]) * (a[i] - ref[i]), den += ref[i] * ref[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Checks out (and the weights) against the float64 reference on every backend.
void check(const Shape& s, const Options& o, float magnitude = 1.0f, bool extras = true) {
  for (Backend b : test::backends()) {
    SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text() + (o.causal ? " causal" : ""));
    const Inputs in = test::random_attention_inputs(s, magnitude);
    const Outputs got = run_on(b, in, s, o, extras);
    std::vector<double> ref(in.q.size()), refw(size_t(s.bh() * s.lq * s.lk));
    reference(in.q.data(), in.k.data(), in.v.data(), s, o, ref.data(), refw.data());
    std::vector<double> plain, plainw;
    plain_f32(in, s, o, plain, plainw);
    // Any float32 summation order rounds a score s by about eps32 * |s| * sqrt(d), and the weights
    // inherit that as relative error: with scores in the thousands this dominates, and a kernel that
    // sums in another order than the plain host loop (lane-rotated, FMA) may differ from it by this much.
    double max_score = 0;
    const int64_t d = s.d;
    const double sc = o.scale > 0 ? o.scale : 1.0 / std::sqrt(double(d));
    for (int64_t bh = 0; bh < s.bh(); ++bh)
      for (int64_t i = 0; i < s.lq; ++i)
        for (int64_t j = 0; j < s.lk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c)
            acc += double(in.q[size_t((bh * s.lq + i) * d + c)]) * in.k[size_t((bh * s.lk + j) * d + c)];
          max_score = std::max(max_score, std::fabs(acc * sc));
        }
    const double order_tol = 4.0 * std::ldexp(1.0, -24) * max_score * std::sqrt(double(d));
    EXPECT_EQ(nan_count(got.out), 0u);
    EXPECT_LE(rel_err(got.out, ref), 2 * err_of(plain, ref) + accum_tol(s.lk) + order_tol);
    if (!extras) continue;
    EXPECT_EQ(nan_count(got.weights), 0u);
    EXPECT_LE(rel_err(got.weights, refw), 2 * err_of(plainw, refw) + accum_tol(s.lk) + order_tol);
    // Row sums: 1 where the row sees a key, 0 where it sees none.
    for (int64_t r = 0; r < s.bh() * s.lq; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < s.lk; ++j) sum += got.weights[size_t(r * s.lk + j)];
      const int64_t n = visible_keys(r % s.lq, s.lq, s.lk, o.causal);
      EXPECT_NEAR(sum, n > 0 ? 1.0 : 0.0, 1e-5) << "row " << r;
    }
  }
}

// [SECTION] Shapes ------------------------------------------------------------------------------------

TEST(Attention, WriteUpShapes) {
  check(shape(5, 15, 32), {});
  check(shape(1, 10, 64), {});
}

TEST(Attention, SingleQuerySingleKeyEveryD) {
  for (int d : {16, 32, 64, 128}) check(shape(1, 1, d), {});
}

TEST(Attention, LengthsAroundTheQueryBlock) {
  for (int64_t lq : {int64_t(kBlockQ - 1), int64_t(kBlockQ), int64_t(kBlockQ + 1), int64_t(2 * kBlockQ + 1)})
    for (int64_t lk : {int64_t(1), int64_t(31), int64_t(33), int64_t(100)}) check(shape(lq, lk, 32), {});
}

TEST(Attention, EveryHeadDim) {
  for (int d : {16, 32, 64, 128}) check(shape(37, 53, d), {});
}

TEST(Attention, BatchAndHeads) {
  check(shape(19, 23, 64, 2, 3), {});
  Options c;
  c.causal = true;
  check(shape(19, 23, 16, 3, 2), c);
}

TEST(Attention, ExplicitScale) {
  Options o;
  o.scale = 0.37;
  check(shape(9, 21, 32), o);
}

// [SECTION] Causal (bottom-right aligned) --------------------------------------------------------------

TEST(Attention, CausalShorterEqualLongerQueries) {
  Options o;
  o.causal = true;
  check(shape(5, 15, 32), o);   // Lq < Lk: every row sees at least Lk - Lq + 1 keys
  check(shape(17, 17, 64), o);  // Lq = Lk: the plain lower triangle
  check(shape(20, 7, 16), o);   // Lq > Lk: the first 13 rows see nothing
}

TEST(Attention, RowsThatSeeNothingAreZeroAndMasked) {
  Options o;
  o.causal = true;
  const Shape s = shape(20, 7, 32);
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const Inputs in = test::random_attention_inputs(s);
    const Outputs got = run_on(b, in, s, o, true, 2);
    for (int64_t i = 0; i < s.lq; ++i) {
      const int64_t n = visible_keys(i, s.lq, s.lk, true);
      EXPECT_EQ(n, std::clamp<int64_t>(i - 12, 0, 7));  // i + (Lk - Lq) + 1
      if (n == 0)
        for (int c = 0; c < s.d; ++c) ASSERT_EQ(got.out[size_t(i * s.d + c)], 0.0f) << "row " << i;
      for (int64_t j = 0; j < s.lk; ++j) {
        const size_t cell = size_t(i * s.lk + j) * 2;
        const bool vis = j < n;
        EXPECT_EQ(got.weights[cell + 1], vis ? 0.0f : 1.0f);  // the state channel
        EXPECT_EQ(got.scores[cell + 1], vis ? 0.0f : 1.0f);
        if (!vis) {
          EXPECT_EQ(got.weights[cell], 0.0f);
          EXPECT_EQ(got.scores[cell], -std::numeric_limits<float>::infinity());
        } else {
          EXPECT_TRUE(std::isfinite(got.scores[cell]));
        }
      }
    }
  }
}

TEST(Attention, LargeMagnitudeScores) {
  // |q|, |k| up to 30: scores up to ~30*30*32/sqrt(32) ~ 5000; exp without the max would overflow.
  check(shape(13, 29, 32), {}, 30.0f);
  Options o;
  o.causal = true;
  check(shape(13, 29, 32), o, 30.0f);
  o.causal = false;
  o.scale = 1000.0;  // a scale that makes most rows one-hot
  check(shape(7, 40, 16), o, 1.0f);
}

// [SECTION] The wall ---------------------------------------------------------------------------------------

TEST(Attention, WallArithmetic) {
  for (int d : {16, 32, 64, 128}) {
    for (int64_t limit : {int64_t(48 * 1024), int64_t(227 * 1024), int64_t(100000)}) {
      const int64_t m = max_lk(d, limit);
      ASSERT_GT(m, 0);
      EXPECT_LE(smem_bytes(m, d), limit);
      EXPECT_GT(smem_bytes(m + 1, d), limit);
    }
    EXPECT_EQ(smem_bytes(100, d), (2 * 100 * d + kBlockQ * d) * 4);
  }
  EXPECT_EQ(smem_limit(Backend::Cpu), 227 * 1024);  // the assumed H200 figure
}

// The largest Lk that fits runs and is correct; one more is refused, the message naming the bytes
// needed, the limit, the largest Lk and the next rung.
void check_wall(Backend b, int d) {
  const int64_t limit = smem_limit(b);
  const int64_t lk = max_lk(d, limit);
  SCOPED_TRACE(std::string(backend_name(b)) + " d=" + std::to_string(d) + " limit=" + std::to_string(limit));
  {
    const Shape s = shape(3, lk, d);
    const Inputs in = test::random_attention_inputs(s);
    const Outputs got = run_on(b, in, s, {}, false);
    std::vector<double> ref(in.q.size());
    reference(in.q.data(), in.k.data(), in.v.data(), s, {}, ref.data());
    EXPECT_EQ(nan_count(got.out), 0u);
    EXPECT_LT(rel_err(got.out, ref), kTol);
  }
  const Shape over = shape(3, lk + 1, d);
  const Inputs in = test::random_attention_inputs(over);
  try {
    run_on(b, in, over, {}, false);
    ADD_FAILURE() << "Lk=" << lk + 1 << " was not refused";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(smem_bytes(lk + 1, d))), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(limit)), std::string::npos) << m;
    EXPECT_NE(m.find("largest Lk that fits at d=" + std::to_string(d) + " is " + std::to_string(lk)),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("flash-attention"), std::string::npos) << m;
    if (b == Backend::Cpu) EXPECT_NE(m.find("assumed"), std::string::npos) << m;
  }
}

TEST(Attention, WallOnCpuBackendWithAssumedLimit) {
  for (int d : {16, 32, 64, 128}) check_wall(Backend::Cpu, d);
}

TEST(Attention, WallOnGpuWithDeviceLimit) {
  KL_REQUIRE_CUDA();
  EXPECT_EQ(smem_limit(Backend::Cuda), device_info(Backend::Cuda).smem_per_block_optin);
  for (int d : {16, 32, 64, 128}) check_wall(Backend::Cuda, d);
}

Array arr(std::vector<int64_t> shape) { return test::random_array(std::move(shape)); }

// [SECTION] Unfused (standard) attention ---------------------------------------------------------------------

// Runs the unfused variant with out, S and P poisoned; returns out and P (S too).
Outputs run_unfused_on(Backend b, const Inputs& in, const Shape& s, const Options& o) {
  Buffer<float> q(b, in.q.size()), k(b, in.k.size()), v(b, in.v.size()), out(b, in.q.size());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  const size_t cells = size_t(s.bh() * s.lq * s.lk);
  Buffer<float> S(b, cells), P(b, cells);
  for (Buffer<float>* x : {&out, &S, &P}) x->fill_bytes(0xFF);
  run_unfused(b, q.data(), k.data(), v.data(), out.data(), S.data(), P.data(), s, o);
  mem::synchronize(b);
  return {out.to_host(), P.to_host(), S.to_host()};
}

void check_unfused(const Shape& s, const Options& o, float magnitude = 1.0f) {
  for (Backend b : test::backends()) {
    SCOPED_TRACE(std::string("unfused ") + backend_name(b) + " " + s.text() + (o.causal ? " causal" : ""));
    const Inputs in = test::random_attention_inputs(s, magnitude);
    const Outputs got = run_unfused_on(b, in, s, o);
    std::vector<double> ref(in.q.size()), refw(size_t(s.bh() * s.lq * s.lk));
    reference(in.q.data(), in.k.data(), in.v.data(), s, o, ref.data(), refw.data());
    std::vector<double> plain, plainw;
    plain_f32(in, s, o, plain, plainw);
    double max_score = 0;
    for (float x : got.scores)
      if (std::isfinite(x)) max_score = std::max(max_score, double(std::fabs(x)));
    const double order_tol = 4.0 * std::ldexp(1.0, -24) * max_score * std::sqrt(double(s.d));
    ASSERT_EQ(nan_count(got.out), 0u);
    ASSERT_EQ(nan_count(got.weights), 0u);
    ASSERT_EQ(nan_count(got.scores), 0u);
    EXPECT_LE(rel_err(got.out, ref), 2 * err_of(plain, ref) + accum_tol(s.lk) + order_tol);
    EXPECT_LE(rel_err(got.weights, refw), 2 * err_of(plainw, refw) + accum_tol(s.lk) + order_tol);
    // S in device memory: masked cells -inf, every other cell finite; rows that see nothing give 0.
    for (int64_t r = 0; r < s.bh() * s.lq; ++r) {
      const int64_t n = visible_keys(r % s.lq, s.lq, s.lk, o.causal);
      double sum = 0;
      for (int64_t j = 0; j < s.lk; ++j) {
        const float sc = got.scores[size_t(r * s.lk + j)];
        if (j < n) ASSERT_TRUE(std::isfinite(sc)) << "row " << r << " key " << j;
        else ASSERT_EQ(sc, -std::numeric_limits<float>::infinity()) << "row " << r << " key " << j;
        sum += got.weights[size_t(r * s.lk + j)];
      }
      EXPECT_NEAR(sum, n > 0 ? 1.0 : 0.0, 1e-5) << "row " << r;
      if (n == 0)
        for (int c = 0; c < s.d; ++c) ASSERT_EQ(got.out[size_t(r * s.d + c)], 0.0f) << "row " << r;
    }
  }
}

TEST(AttentionUnfused, WriteUpShapesAndEveryHeadDim) {
  check_unfused(shape(5, 15, 32), {});
  check_unfused(shape(1, 10, 64), {});
  for (int d : {16, 32, 64, 128}) {
    check_unfused(shape(1, 1, d), {});
    check_unfused(shape(37, 53, d), {});
  }
}

TEST(AttentionUnfused, LengthsAroundTheTile) {
  for (int64_t lq : {int64_t(kUnfusedTile - 1), int64_t(kUnfusedTile), int64_t(kUnfusedTile + 1), int64_t(33)})
    for (int64_t lk : {int64_t(1), int64_t(15), int64_t(16), int64_t(17), int64_t(100)}) check_unfused(shape(lq, lk, 32), {});
}

TEST(AttentionUnfused, CausalBatchHeadsScale) {
  Options c;
  c.causal = true;
  check_unfused(shape(5, 15, 32), c);   // Lq < Lk
  check_unfused(shape(17, 17, 64), c);  // Lq = Lk
  check_unfused(shape(20, 7, 16), c);   // Lq > Lk: the first 13 rows see nothing
  check_unfused(shape(19, 23, 64, 2, 3), {});
  check_unfused(shape(19, 23, 16, 3, 2), c);
  Options sc;
  sc.scale = 0.37;
  check_unfused(shape(9, 21, 32), sc);
}

TEST(AttentionUnfused, LargeMagnitudeScores) {
  check_unfused(shape(13, 29, 32), {}, 30.0f);
  Options c;
  c.causal = true;
  check_unfused(shape(13, 29, 32), c, 30.0f);
}

TEST(AttentionUnfused, NoWallPastRungFours) {
  // Rung 4 refuses Lk = wall + 1; standard attention keeps S and P in device memory and runs.
  for (Backend b : test::backends()) {
    const int64_t lk = max_lk(32, smem_limit(b)) + 1;
    const Shape s = shape(3, lk, 32);
    EXPECT_THROW(check_shape(b, s), InputError);
  }
  check_unfused(shape(3, max_lk(32, smem_limit(Backend::Cpu)) + 1, 32), {});
}

TEST(AttentionUnfused, RowsWiderThanFixedSoftmaxUseOnline) {
  // Past rung 3's widest `fixed` row (32768 columns on an H200) the softmax step switches to `online`.
  check_unfused(shape(2, 32768 + 17, 16), {});
}

TEST(AttentionUnfused, RefusesTooManyCells) {
  Shape s = shape(65536, 65536, 16);  // 2^32 cells of S: past softmax's 2^31 - 1
  EXPECT_THROW(check_unfused_shape(s), InputError);
  s = shape(4, 4, 24);
  EXPECT_THROW(check_unfused_shape(s), InputError);
}

TEST(AttentionUnfused, TrafficCountsSAndPAndRungFoursRereads) {
  const Shape s = shape(48, 96, 32);
  // Q, K, V in and O out once (2*48*32 + 2*96*32 floats) plus S and P written and read (4*48*96).
  EXPECT_EQ(traffic_bytes_unfused(s), 4.0 * (2 * 48 * 32 + 2 * 96 * 32 + 4 * 48 * 96));
  // Rung 4: Q in, O out, and K and V once per program of 16 queries (3 programs).
  EXPECT_EQ(traffic_bytes_smem(s), 4.0 * (2 * 48 * 32 + 3 * 2 * 96 * 32));
  EXPECT_EQ(traffic_bytes_unfused(shape(48, 96, 32, 2, 3)), 6 * traffic_bytes_unfused(s));
}

TEST(AttentionUnfused, EntryRunsTheVariant) {
  const KernelEntry e = entry();
  ASSERT_NE(std::find(e.variants.begin(), e.variants.end(), "unfused"), e.variants.end());
  for (Backend b : test::backends()) {
    KernelRunRequest r;
    r.backend = b;
    r.variant = "unfused";
    r.params = ParamValues(e.params);
    r.params.set("causal=1");
    r.inputs["q"] = arr({2, 3, 6, 32});
    r.inputs["k"] = arr({2, 3, 9, 32});
    r.inputs["v"] = arr({2, 3, 9, 32});
    const KernelRunResult res = e.run(r);
    ASSERT_TRUE(res.outputs.count("out"));
    ASSERT_TRUE(res.outputs.count("weights"));
    EXPECT_EQ(res.outputs.at("weights").shape, (std::vector<int64_t>{2, 3, 6, 9}));
    Options o;
    o.causal = true;
    std::vector<double> ref(size_t(2 * 3 * 6 * 32));
    reference(r.inputs["q"].data.data(), r.inputs["k"].data.data(), r.inputs["v"].data.data(), shape(6, 9, 32, 2, 3), o,
              ref.data());
    EXPECT_LT(rel_err(res.outputs.at("out").data, ref), kTol);
    // Past rung 4's wall the unfused variant still runs.
    r.params.set("causal=0");
    r.inputs["q"] = arr({3, 32});
    r.inputs["k"] = arr({1000, 32});
    r.inputs["v"] = arr({1000, 32});
    EXPECT_NO_THROW(e.run(r));
  }
}

// [SECTION] Refusals and the command-line entry ----------------------------------------------------

TEST(Attention, UnsupportedHeadDimIsRefused) {
  for (int d : {8, 24, 48, 96, 256}) {
    const Shape s = shape(4, 4, d);
    std::vector<float> q(size_t(4 * d), 0.5f), k = q, v = q, out(q.size());
    EXPECT_THROW(run(Backend::Cpu, q.data(), k.data(), v.data(), out.data(), s, {}), InputError) << d;
  }
}


TEST(Attention, EntryRunsAndWritesWeights) {
  const KernelEntry e = entry();
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = e.default_variant;
  r.params = ParamValues(e.params);
  r.params.set("causal=1");
  r.inputs["q"] = arr({2, 3, 6, 32});
  r.inputs["k"] = arr({2, 3, 9, 32});
  r.inputs["v"] = arr({2, 3, 9, 32});
  const KernelRunResult res = e.run(r);
  ASSERT_TRUE(res.outputs.count("out"));
  ASSERT_TRUE(res.outputs.count("weights"));
  EXPECT_EQ(res.outputs.at("out").shape, (std::vector<int64_t>{2, 3, 6, 32}));
  EXPECT_EQ(res.outputs.at("weights").shape, (std::vector<int64_t>{2, 3, 6, 9}));
  Shape s = shape(6, 9, 32, 2, 3);
  Options o;
  o.causal = true;
  std::vector<double> ref(size_t(2 * 3 * 6 * 32));
  reference(r.inputs["q"].data.data(), r.inputs["k"].data.data(), r.inputs["v"].data.data(), s, o, ref.data());
  EXPECT_LT(rel_err(res.outputs.at("out").data, ref), kTol);
}

TEST(Attention, EntryRefusesMismatchedShapes) {
  const KernelEntry e = entry();
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.params = ParamValues(e.params);
  auto expect_refused = [&](std::vector<int64_t> q, std::vector<int64_t> k, std::vector<int64_t> v) {
    r.inputs["q"] = arr(q);
    r.inputs["k"] = arr(k);
    r.inputs["v"] = arr(v);
    EXPECT_THROW(e.run(r), InputError);
  };
  expect_refused({4, 32}, {5, 64}, {5, 64});           // d differs
  expect_refused({4, 32}, {5, 32}, {6, 32});           // k, v lengths differ
  expect_refused({4, 48}, {5, 48}, {5, 48});           // unsupported d
  expect_refused({1, 2, 4, 32}, {1, 3, 5, 32}, {1, 3, 5, 32});  // heads differ
  expect_refused({4, 32}, {1, 1, 5, 32}, {1, 1, 5, 32});        // ranks differ
  expect_refused({32}, {32}, {32});                              // rank 1
  expect_refused({3, 128}, {500, 128}, {500, 128});              // past the wall
}

}  // namespace
}  // namespace kl::attention
