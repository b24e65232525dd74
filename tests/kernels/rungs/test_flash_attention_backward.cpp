// Rung 6 (kernels/rungs/flash_attention_backward.*): dQ, dK, dV of both variants on both backends against
// a float64 backward written out by hand here (the chain rule through softmax), itself checked against
// central finite differences of a float64 forward; shapes on both sides of every tile boundary, Lq != Lk,
// a single query, causal rows that see one key or none, inputs of magnitude 1e3; outputs poisoned with
// NaN. The trace: tiles skipped exactly where no row of the query tile sees a key of the K/V tile, the
// recomputed P equal to rung 5's forward P, dK/dV partials ending at dK/dV, dQ contributions summing to
// dQ. The naive variant's refusal at the memory wall, computed before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/rungs/attention.h"
#include "kernels/rungs/attention_inputs.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl::flash_attention_backward {
namespace {

using test::nan_count;
using test::rel_err;

Shape shape(int64_t lq, int64_t lk, int d, int64_t batch = 1, int64_t heads = 1) {
  return test::attention_shape<Shape>(lq, lk, d, batch, heads);
}

Options causal(bool c, double scale = 0) {
  Options o;
  o.causal = c;
  o.scale = scale;
  return o;
}

struct Inputs {
  std::vector<float> q, k, v, dout;
};

Inputs random_inputs(const Shape& s, float qk_magnitude = 1.0f, float vd_magnitude = 1.0f) {
  const test::AttentionInputs a = test::random_attention_inputs(s, qk_magnitude);
  Inputs in{a.q, a.k, a.v, test::random_floats(a.q.size(), -vd_magnitude, vd_magnitude)};
  for (float& x : in.v) x *= vd_magnitude;
  return in;
}

// [SECTION] float64: the forward, the backward by hand, finite differences ---------------------------------

double resolved_scale(const Shape& s, const Options& o) { return o.scale > 0 ? o.scale : 1.0 / std::sqrt(double(s.d)); }

// Per (bh, i): P_i (0 where masked; all 0 for a row that sees nothing), in double, from double inputs.
void softmax_row(const std::vector<double>& q, const std::vector<double>& k, const Shape& s, const Options& o,
                 int64_t bh, int64_t i, std::vector<double>& p) {
  const int64_t n = attention::visible_keys(i, s.lq, s.lk, o.causal), d = s.d;
  const double scale = resolved_scale(s, o);
  double mx = -1e300;
  for (int64_t j = 0; j < s.lk; ++j) {
    p[size_t(j)] = 0;
    if (j >= n) continue;
    double acc = 0;
    for (int64_t c = 0; c < d; ++c) acc += q[size_t((bh * s.lq + i) * d + c)] * k[size_t((bh * s.lk + j) * d + c)];
    p[size_t(j)] = acc * scale;
    mx = std::max(mx, p[size_t(j)]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
  for (int64_t j = 0; j < n; ++j) p[size_t(j)] /= sum;
}

// loss = sum(dO ∘ O(q, k, v)): its gradients are dQ, dK, dV.
double loss(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<double>& dout, const Shape& s, const Options& o) {
  std::vector<double> p(size_t(s.lk));
  double total = 0;
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t i = 0; i < s.lq; ++i) {
      softmax_row(q, k, s, o, bh, i, p);
      for (int64_t c = 0; c < s.d; ++c) {
        double oc = 0;
        for (int64_t j = 0; j < s.lk; ++j) oc += p[size_t(j)] * v[size_t((bh * s.lk + j) * s.d + c)];
        total += dout[size_t((bh * s.lq + i) * s.d + c)] * oc;
      }
    }
  return total;
}

struct Grads {
  std::vector<double> dq, dk, dv;
};

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// The backward by hand: dV = P^T dO, dP = dO V^T, D = rowsum(P ∘ dP), dS = P ∘ (dP - D),
// dQ = scale dS K, dK = scale dS^T Q.
Grads reference(const Inputs& in, const Shape& s, const Options& o) {
  const std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), dout = to_double(in.dout);
  const double scale = resolved_scale(s, o);
  const int64_t d = s.d;
  Grads g{std::vector<double>(q.size()), std::vector<double>(k.size()), std::vector<double>(v.size())};
  std::vector<double> p(size_t(s.lk)), dp(size_t(s.lk));
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t i = 0; i < s.lq; ++i) {
      softmax_row(q, k, s, o, bh, i, p);
      const size_t qi = size_t((bh * s.lq + i) * d);
      double D = 0;
      for (int64_t j = 0; j < s.lk; ++j) {
        const size_t kj = size_t((bh * s.lk + j) * d);
        double acc = 0;
        for (int64_t c = 0; c < d; ++c) acc += dout[qi + size_t(c)] * v[kj + size_t(c)];
        dp[size_t(j)] = acc;
        D += p[size_t(j)] * acc;
      }
      for (int64_t j = 0; j < s.lk; ++j) {
        const size_t kj = size_t((bh * s.lk + j) * d);
        const double ds = p[size_t(j)] * (dp[size_t(j)] - D);
        for (int64_t c = 0; c < d; ++c) {
          g.dv[kj + size_t(c)] += p[size_t(j)] * dout[qi + size_t(c)];
          g.dk[kj + size_t(c)] += scale * ds * q[qi + size_t(c)];
          g.dq[qi + size_t(c)] += scale * ds * k[kj + size_t(c)];
        }
      }
    }
  return g;
}

// Central differences of loss() in float64, one input element at a time.
Grads finite_differences(const Inputs& in, const Shape& s, const Options& o) {
  std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
  const std::vector<double> dout = to_double(in.dout);
  Grads g;
  auto diff = [&](std::vector<double>& x) {
    std::vector<double> out(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      const double x0 = x[e], h = 1e-5 * std::max(1.0, std::abs(x0));
      x[e] = x0 + h;
      const double up = loss(q, k, v, dout, s, o);
      x[e] = x0 - h;
      const double down = loss(q, k, v, dout, s, o);
      x[e] = x0;
      out[e] = (up - down) / (2 * h);
    }
    return out;
  };
  g.dq = diff(q);
  g.dk = diff(k);
  g.dv = diff(v);
  return g;
}

// [SECTION] Running the kernels ------------------------------------------------------------------------------

struct Got {
  std::vector<float> dq, dk, dv;
};

enum class Variant { Naive, Teaching };

// Runs a variant on b with dQ, dK, dV poisoned (NaN); optionally traced.
Got run_on(Backend b, Variant var, const Inputs& in, const Shape& s, const Options& o, int bm = kDefaultBlockM,
           int bn = kDefaultBlockN, BackwardTrace* trace = nullptr) {
  Buffer<float> q(b, 0), k(b, 0), v(b, 0), dout(b, 0);
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  dout.upload(in.dout);
  Buffer<float> dq(b, in.q.size()), dk(b, in.k.size()), dv(b, in.v.size());
  for (Buffer<float>* f : {&dq, &dk, &dv}) f->fill_bytes(0xFF);
  if (var == Variant::Naive) {
    run_naive(b, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), s, o);
  } else {
    BackwardTraceView tv;
    if (trace) tv = trace->view();
    run_teaching(b, q.data(), k.data(), v.data(), nullptr, nullptr, dout.data(), dq.data(), dk.data(), dv.data(), s,
                 o, bm, bn, trace ? &tv : nullptr);
  }
  mem::synchronize(b);
  return {dq.to_host(), dk.to_host(), dv.to_host()};
}

// float32 accumulation: over Lk keys for dQ, over Lq rows for dK and dV, and the d-long dot products.
double tolerance(const Shape& s) {
  return 2e-5 * std::max(1.0, std::sqrt(double(std::max(s.lq, s.lk)) / 64.0));
}

void expect_close(const Got& got, const Grads& ref, double tol) {
  EXPECT_EQ(nan_count(got.dq) + nan_count(got.dk) + nan_count(got.dv), 0u);
  EXPECT_LT(rel_err(got.dq, ref.dq), tol) << "dQ";
  EXPECT_LT(rel_err(got.dk, ref.dk), tol) << "dK";
  EXPECT_LT(rel_err(got.dv, ref.dv), tol) << "dV";
}

void check(const Shape& s, const Options& o, int bm = kDefaultBlockM, int bn = kDefaultBlockN,
           std::vector<Variant> vars = {Variant::Teaching, Variant::Naive}, float qk_mag = 1.0f,
           float vd_mag = 1.0f) {
  const Inputs in = random_inputs(s, qk_mag, vd_mag);
  const Grads ref = reference(in, s, o);
  for (Backend b : test::backends())
    for (Variant var : vars) {
      SCOPED_TRACE(std::string(backend_name(b)) + (var == Variant::Naive ? " naive " : " teaching ") + s.text() +
                   " block_m=" + std::to_string(bm) + " block_n=" + std::to_string(bn) + (o.causal ? " causal" : ""));
      expect_close(run_on(b, var, in, s, o, bm, bn), ref, tolerance(s));
    }
}

// [SECTION] The reference itself ---------------------------------------------------------------------------

TEST(FlashAttentionBackward, HandWrittenReferenceAgreesWithFiniteDifferences) {
  for (bool c : {false, true}) {
    const Shape s = shape(5, 7, 16);
    const Inputs in = random_inputs(s);
    const Grads ref = reference(in, s, causal(c)), fd = finite_differences(in, s, causal(c));
    double worst = 0;
    for (size_t e = 0; e < ref.dk.size(); ++e) worst = std::max(worst, std::abs(ref.dk[e] - fd.dk[e]));
    for (size_t e = 0; e < ref.dv.size(); ++e) worst = std::max(worst, std::abs(ref.dv[e] - fd.dv[e]));
    for (size_t e = 0; e < ref.dq.size(); ++e) worst = std::max(worst, std::abs(ref.dq[e] - fd.dq[e]));
    EXPECT_LT(worst, 1e-8) << (c ? "causal" : "");
  }
}

TEST(FlashAttentionBackward, LibraryReferenceAgreesWithTheOneHere) {
  for (bool c : {false, true}) {
    const Shape s = shape(21, 13, 16, 1, 2);
    const Inputs in = random_inputs(s);
    const Grads mine = reference(in, s, causal(c));
    Grads lib{std::vector<double>(in.q.size()), std::vector<double>(in.k.size()), std::vector<double>(in.v.size())};
    flash_attention_backward::reference(in.q.data(), in.k.data(), in.v.data(), in.dout.data(), s, causal(c),
                                        lib.dq.data(), lib.dk.data(), lib.dv.data());
    for (auto [a, b] : {std::pair{&mine.dq, &lib.dq}, {&mine.dk, &lib.dk}, {&mine.dv, &lib.dv}})
      for (size_t e = 0; e < a->size(); ++e) ASSERT_NEAR((*a)[e], (*b)[e], 1e-12 * std::max(1.0, std::abs((*a)[e])));
  }
}

// [SECTION] The gradient check: finite differences of the forward against the teaching kernel -----------------

TEST(FlashAttentionBackward, TeachingMatchesFiniteDifferencesOfTheForward) {
  for (bool c : {false, true})
    for (Shape s : {shape(19, 23, 16), shape(23, 19, 16), shape(17, 17, 32)}) {
      const Inputs in = random_inputs(s);
      const Grads fd = finite_differences(in, s, causal(c));
      for (Backend b : test::backends()) {
        SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text() + (c ? " causal" : ""));
        expect_close(run_on(b, Variant::Teaching, in, s, causal(c), 16, 16), fd, 1e-5);
      }
    }
}

// [SECTION] Shapes ------------------------------------------------------------------------------------------

TEST(FlashAttentionBackward, LengthsAroundEveryTileBoundary) {
  for (bool c : {false, true})
    for (int64_t lq : {1, 15, 16, 17, 33})
      for (int64_t lk : {1, 15, 16, 17, 33}) check(shape(lq, lk, 16), causal(c), 16, 16);
}

TEST(FlashAttentionBackward, DefaultTilesAroundTheirBoundaries) {
  for (bool c : {false, true})
    for (int64_t l : {63, 64, 65, 129}) check(shape(l, l + 7, 32), causal(c), kDefaultBlockM, kDefaultBlockN,
                                                {Variant::Teaching});
}

TEST(FlashAttentionBackward, EveryHeadDimAndUnequalTiles) {
  for (int d : {16, 32, 64, 128}) check(shape(37, 53, d), causal(d >= 64), 32, 16);
  check(shape(53, 37, 64), causal(true), 16, 64, {Variant::Teaching});
}

TEST(FlashAttentionBackward, BatchAndHeads) {
  check(shape(19, 23, 32, 2, 3), causal(false), 16, 16);
  check(shape(23, 19, 16, 3, 2), causal(true), 16, 32);
}

TEST(FlashAttentionBackward, SingleQuery) {
  for (bool c : {false, true}) check(shape(1, 100, 64), causal(c), 16, 32);
}

TEST(FlashAttentionBackward, LongerKeysThanQueriesAndBack) {
  check(shape(5, 300, 32), causal(true), 16, 64);
  check(shape(300, 5, 32), causal(true), 64, 16);
  check(shape(200, 300, 64), causal(false), 64, 64, {Variant::Teaching});
}

// Causal, Lq > Lk: rows 0..Lq-Lk-1 see no key (zero gradient, never NaN); row Lq-Lk sees exactly one key,
// so P = 1 there, dS = P (dP - D) = 0 and its dQ row is zero up to rounding.
TEST(FlashAttentionBackward, CausalRowsThatSeeNoKeyOrOne) {
  const Shape s = shape(40, 24, 32);
  const Inputs in = random_inputs(s);
  const Grads ref = reference(in, s, causal(true));
  for (Backend b : test::backends())
    for (Variant var : {Variant::Teaching, Variant::Naive}) {
      SCOPED_TRACE(backend_name(b));
      const Got got = run_on(b, var, in, s, causal(true), 16, 16);
      expect_close(got, ref, tolerance(s));
      double row_max = 0, blind_max = 0;
      for (int64_t i = 0; i <= s.lq - s.lk; ++i)
        for (int c = 0; c < s.d; ++c) {
          double& m = i < s.lq - s.lk ? blind_max : row_max;
          m = std::max(m, double(std::abs(got.dq[size_t(i * s.d + c)])));
        }
      EXPECT_EQ(blind_max, 0.0) << "rows that see no key";
      EXPECT_LT(row_max, 1e-5) << "the row that sees one key";
    }
}

// |x| ~ 1e3 through every product: Q, K, V and dO of magnitude 1e3, scale 1/(1e6 sqrt(d)) so the
// scores stay of order one; and Q, K of magnitude 3 at the default scale: peaked softmax rows.
TEST(FlashAttentionBackward, LargeMagnitudes) {
  const Shape s = shape(33, 47, 64);
  check(s, causal(false, 1e-6 / 8.0), 16, 16, {Variant::Teaching, Variant::Naive}, 1e3f, 1e3f);
  check(s, causal(true, 1e-6 / 8.0), 32, 32, {Variant::Teaching, Variant::Naive}, 1e3f, 1e3f);
  check(s, causal(false), 16, 16, {Variant::Teaching, Variant::Naive}, 3.0f, 1.0f);
}

TEST(FlashAttentionBackward, GivenForwardStateMatchesComputedOne) {
  const Shape s = shape(29, 41, 32);
  const Inputs in = random_inputs(s);
  const Options o = causal(true);
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    Buffer<float> q(b, 0), k(b, 0), v(b, 0), dout(b, 0), o_buf(b, in.q.size()), lse(b, size_t(s.lq));
    q.upload(in.q);
    k.upload(in.k);
    v.upload(in.v);
    dout.upload(in.dout);
    forward(b, q.data(), k.data(), v.data(), o_buf.data(), lse.data(), s, o, 16, 16);
    // L = m + log l against float64: log of the row's sum of exp(S)
    const std::vector<float> l_got = lse.to_host();
    for (int64_t i = 0; i < s.lq; ++i) {
      const int64_t n = attention::visible_keys(i, s.lq, s.lk, true);
      double mx = -1e300, sum = 0;
      std::vector<double> sc(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int c = 0; c < s.d; ++c) acc += double(in.q[size_t(i * s.d + c)]) * in.k[size_t(j * s.d + c)];
        sc[size_t(j)] = acc / std::sqrt(double(s.d));
        mx = std::max(mx, sc[size_t(j)]);
      }
      for (double x : sc) sum += std::exp(x - mx);
      EXPECT_NEAR(l_got[size_t(i)], mx + std::log(sum), 1e-5) << "row " << i;
    }
    Buffer<float> dq(b, in.q.size()), dk(b, in.k.size()), dv(b, in.v.size());
    run_teaching(b, q.data(), k.data(), v.data(), o_buf.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                 dv.data(), s, o, 16, 16);
    const Got given{dq.to_host(), dk.to_host(), dv.to_host()};
    expect_close(given, reference(in, s, o), tolerance(s));
  }
}

// [SECTION] The trace -----------------------------------------------------------------------------------------

struct HostTrace {
  std::vector<uint8_t> state;
  std::vector<float> p, ds, dk, dv, dq_contrib;
};

HostTrace host(const BackwardTrace& t) {
  return {t.tile_state.to_host(), t.p_tile.to_host(), t.ds_tile.to_host(), t.dk_partial.to_host(),
          t.dv_partial.to_host(), t.dq_contrib.to_host()};
}

TEST(FlashAttentionBackward, TraceSkipsExactlyTheTilesNoRowSees) {
  for (Shape s : {shape(70, 50, 16, 1, 2), shape(50, 70, 16, 1, 2), shape(64, 64, 16, 1, 2)})
    for (Backend b : test::backends()) {
      SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text());
      const Inputs in = random_inputs(s);
      BackwardTrace t;
      t.reset(b, s, 16, 16, 1, 1, 1);
      run_on(b, Variant::Teaching, in, s, causal(true), 16, 16, &t);
      const HostTrace h = host(t);
      int skipped = 0;
      for (int64_t bh = 0; bh < s.bh(); ++bh)
        for (int64_t kb = 0; kb < t.k_blocks; ++kb)
          for (int64_t qb = 0; qb < t.q_blocks; ++qb) {
            bool any = false;  // does any row of query tile qb see any key of K/V tile kb?
            for (int64_t i = qb * 16; i < std::min<int64_t>(s.lq, (qb + 1) * 16); ++i)
              any = any || attention::visible_keys(i, s.lq, s.lk, true) > kb * 16;
            const uint8_t st = h.state[size_t((bh * t.k_blocks + kb) * t.q_blocks + qb)];
            EXPECT_EQ(st, any ? kTileComputed : kTileSkipped) << "bh " << bh << " kb " << kb << " qb " << qb;
            skipped += st == kTileSkipped;
          }
      EXPECT_GT(skipped, 0);
    }
}

// The chosen program's recomputed P tile against rung 5's forward P (its weights composed from its own
// trace), the partials ending at dK_j and dV_j, and the dQ contributions of every program summing to dQ_i.
TEST(FlashAttentionBackward, TraceRecomputedPEqualsForwardPAndPartialsFoldToTheResult) {
  const Shape s = shape(45, 61, 32, 1, 2);
  const int bm = 16, bn = 16;
  const int64_t kb_c = 2, qb_c = 1, bh_c = 1;
  for (bool c : {false, true})
    for (Backend b : test::backends()) {
      SCOPED_TRACE(std::string(backend_name(b)) + (c ? " causal" : ""));
      const Inputs in = random_inputs(s);
      BackwardTrace t;
      t.reset(b, s, bm, bn, bh_c, kb_c, qb_c);
      const Got got = run_on(b, Variant::Teaching, in, s, causal(c), bm, bn, &t);
      const HostTrace h = host(t);
      for (const std::vector<float>* f : {&h.p, &h.ds, &h.dk, &h.dv, &h.dq_contrib}) EXPECT_EQ(nan_count(*f), 0u);
      // forward P of query tile qb_c from rung 5's trace
      Buffer<float> q(b, 0), k(b, 0), v(b, 0), out(b, in.q.size());
      q.upload(in.q);
      k.upload(in.k);
      v.upload(in.v);
      flash_attention::FlashTrace ft;
      ft.reset(b, s, bm, bn, bh_c, qb_c);
      flash_attention::FlashTraceView fv = ft.view();
      flash_attention::run_teaching(b, q.data(), k.data(), v.data(), out.data(), s, causal(c), bm, bn, &fv);
      Buffer<float> w(b, size_t(bm * s.lk));
      flash_attention::compose_weights(b, fv, s.lq, s.lk, fv.steps, w.data(), 1);
      const std::vector<float> fw = w.to_host();
      double worst = 0;
      for (int r = 0; r < bm; ++r)
        for (int jj = 0; jj < bn; ++jj)
          if (kb_c * bn + jj < s.lk)
            worst = std::max(worst, double(std::abs(h.p[size_t((qb_c * bm + r) * bn + jj)] -
                                                    fw[size_t(r * s.lk + kb_c * bn + jj)])));
      EXPECT_LT(worst, 1e-6) << "recomputed P against the forward's";
      // dK_j, dV_j after the last query step are the program's result
      const int64_t last = t.q_blocks - 1;
      for (int jj = 0; jj < bn && kb_c * bn + jj < s.lk; ++jj)
        for (int e = 0; e < s.d; ++e) {
          const size_t g = size_t((bh_c * s.lk + kb_c * bn + jj) * s.d + e), p = size_t((last * bn + jj) * s.d + e);
          EXPECT_EQ(h.dk[p], got.dk[g]);
          EXPECT_EQ(h.dv[p], got.dv[g]);
        }
      // dQ_i is the sum of every program's contribution
      double dq_worst = 0, dq_norm = 0;
      for (int r = 0; r < bm && qb_c * bm + r < s.lq; ++r)
        for (int e = 0; e < s.d; ++e) {
          double sum = 0;
          for (int64_t kb = 0; kb < t.k_blocks; ++kb) sum += h.dq_contrib[size_t((kb * bm + r) * s.d + e)];
          const float g = got.dq[size_t((bh_c * s.lq + qb_c * bm + r) * s.d + e)];
          dq_worst = std::max(dq_worst, std::abs(sum - g));
          dq_norm = std::max(dq_norm, double(std::abs(g)));
        }
      EXPECT_LT(dq_worst, 1e-5 * std::max(1.0, dq_norm));
    }
}

TEST(FlashAttentionBackward, TilesPastSharedMemoryAreRefused) {
  try {
    check_tiles(Backend::Cpu, 128, 128, 128);
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(smem_bytes(128, 128, 128))), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_tiles(Backend::Cpu, 24, 16, 16), InputError);
  EXPECT_NO_THROW(check_tiles(Backend::Cpu, kDefaultBlockM, kDefaultBlockN, 128));
}

// [SECTION] The wall ----------------------------------------------------------------------------------------------

// Lq = Lk = 2^20 at d = 16: P and dP are 8 TiB, past any host's memory. The refusal comes before any
// allocation: run_naive is handed no buffers at all.
TEST(FlashAttentionBackward, NaiveRefusedAtTheHostMemoryWallWithTheBytes) {
  const Shape s = shape(int64_t(1) << 20, int64_t(1) << 20, 16);
  const Wall w = naive_wall(Backend::Cpu, s);
  EXPECT_EQ(w.need, 2ull * (1ull << 40) * 4);
  EXPECT_FALSE(w.fits());
  EXPECT_EQ(lse_bytes(s), (1ull << 20) * 4);
  try {
    run_naive(Backend::Cpu, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, s, {});
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(w.need) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes) available"), std::string::npos) << m;
    EXPECT_NE(m.find("8.00 TiB"), std::string::npos) << m;
    EXPECT_NE(m.find("--variant teaching"), std::string::npos) << m;
  }
  // a shape that fits is not refused
  EXPECT_NO_THROW(check_naive_wall(Backend::Cpu, shape(64, 64, 16)));
}

TEST(FlashAttentionBackward, NaiveRefusedAtTheDeviceMemoryWall) {
  KL_REQUIRE_CUDA();
  Shape s = shape(int64_t(1) << 17, int64_t(1) << 17, 64, 1, 64);  // P and dP: 8 TiB
  const Wall w = naive_wall(Backend::Cuda, s);
  EXPECT_GT(w.total, 0u);
  EXPECT_GT(w.available, 0u);
  EXPECT_FALSE(w.fits());
  try {
    run_naive(Backend::Cuda, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, s, {});
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(w.need) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("of device memory"), std::string::npos) << m;
    EXPECT_NE(m.find("free of"), std::string::npos) << m;
  }
}

// [SECTION] Backends agree ------------------------------------------------------------------------------------------

// On the CPU the programs run in order: dQ is the same bit for bit run after run. On CUDA dQ is
// accumulated with atomics, so two runs may differ in the last bits; dK and dV never do.
TEST(FlashAttentionBackward, DeterminismAsDocumented) {
  const Shape s = shape(77, 91, 32, 1, 2);
  const Inputs in = random_inputs(s);
  for (Backend b : test::backends()) {
    SCOPED_TRACE(backend_name(b));
    const Got a = run_on(b, Variant::Teaching, in, s, causal(true), 16, 16);
    const Got c = run_on(b, Variant::Teaching, in, s, causal(true), 16, 16);
    EXPECT_EQ(a.dk, c.dk);
    EXPECT_EQ(a.dv, c.dv);
    if (b == Backend::Cpu) EXPECT_EQ(a.dq, c.dq);
    else EXPECT_LT(rel_err(a.dq, to_double(c.dq)), 1e-6);
  }
}

// One spec per parameter: the registry entry's parameters are this rung's param:: specs, and those are
// rung 5's (the mask and scale as they are; the tiles with rung 5's range and default).
void expect_same_spec(const ParamSpec& a, const ParamSpec& b, bool same_help) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(int(a.kind), int(b.kind)) << a.name;
  EXPECT_EQ(a.min, b.min) << a.name;
  EXPECT_EQ(a.max, b.max) << a.name;
  EXPECT_EQ(a.def, b.def) << a.name;
  EXPECT_EQ(a.choices, b.choices) << a.name;
  EXPECT_FALSE(a.is_override()) << a.name;
  if (same_help) EXPECT_EQ(a.help, b.help) << a.name;
  else EXPECT_FALSE(a.help.empty()) << a.name;
}

TEST(FlashAttentionBackwardParams, RegistryTakesTheRungsSpecsWhichAreRungFives) {
  const KernelEntry e = entry();
  ASSERT_EQ(e.params.size(), 6u);
  const std::vector<ParamSpec> mine = {param::causal(), param::scale(),  param::block_m(),
                                       param::block_n(), param::dtype(), param::deterministic()};
  for (size_t i = 0; i < mine.size(); ++i) expect_same_spec(e.params[i], mine[i], true);
  expect_same_spec(param::causal(), flash_attention::param::causal(), true);
  expect_same_spec(param::scale(), flash_attention::param::scale(), true);
  expect_same_spec(param::block_m(), flash_attention::param::block_m(), false);
  expect_same_spec(param::block_n(), flash_attention::param::block_n(), false);
  expect_same_spec(param::dtype(), flash_attention::param::dtype(), true);  // --variant fast's, as rung 5's
}

}  // namespace
}  // namespace kl::flash_attention_backward
