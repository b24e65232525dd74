// Rung 6 (kernels/rungs/flash_attention_backward.*): dQ, dK, dV of both variants on both backends against
// a float64 backward written out by hand here (the chain rule through softmax), itself checked against
// central finite differences of a float64 forward; shapes on both sides of every tile boundary, Lq != Lk,
// a single query, causal rows that see one key or none, inputs of magnitude 1e3; outputs poisoned with
// NaN. The trace: tiles skipped exactly where no row of the query tile sees a key of the K/V tile, the
// recomputed P equal to rung 5's forward P, dK/dV partials ending at dK/dV, dQ contributions summing to
// dQ. The naive variant's refusal at the memory wall, computed before anything is allocated.
// Grouped-query attention (k and v with Hkv heads dividing q's Hq): the hand-written backward and the
// finite differences index kv head floor(h * Hkv / Hq) for query head h, so dK and dV come out summed over
// the query heads sharing a kv head by construction; both variants on both backends against the library's
// float64 reference (which repeats K and V per query head and sums back) at ratios 1, 2, 4, 8, odd
// lengths, Lq != Lk, causal; the traced program's partials over the group; dK and dV bitwise repeatable;
// Hkv not dividing Hq refused with one line naming it.
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

// Grouped-query attention: q with heads heads, k and v with kv_heads.
Shape gqa(int64_t lq, int64_t lk, int d, int64_t batch, int64_t heads, int64_t kv_heads) {
  Shape s = shape(lq, lk, d, batch, heads);
  s.kv_heads = kv_heads;
  return s;
}

// The kv (batch, head) query (batch, head) bh reads, from the definition: head h of batch b reads kv head
// floor(h * Hkv / Hq) of batch b (the rungs write it h / (Hq / Hkv)).
int64_t kv_of(const Shape& s, int64_t bh) {
  const int64_t b = bh / s.heads, h = bh % s.heads;
  return b * s.kv() + h * s.kv() / s.heads;
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
  test::AttentionInputs a = test::random_attention_inputs(s, qk_magnitude);
  a.k.resize(size_t(s.kv_bh() * s.lk * s.d));  // grouped-query attention: k and v have kv() heads
  a.v.resize(a.k.size());
  Inputs in{a.q, a.k, a.v, test::random_floats(a.q.size(), -vd_magnitude, vd_magnitude)};
  for (float& x : in.v) x *= vd_magnitude;
  return in;
}

// [SECTION] float64: the forward, the backward by hand, finite differences ---------------------------------

double resolved_scale(const Shape& s, const Options& o) { return o.scale > 0 ? o.scale : 1.0 / std::sqrt(double(s.d)); }

// Per (bh, i): P_i (0 where masked; all 0 for a row that sees nothing), in double, from double inputs.
void softmax_row(const std::vector<double>& q, const std::vector<double>& k, const Shape& s, const Options& o,
                 int64_t bh, int64_t i, std::vector<double>& p) {
  const int64_t n = attention::visible_keys(i, s.lq, s.lk, o.causal), d = s.d, kv = kv_of(s, bh);
  const double scale = resolved_scale(s, o);
  double mx = -1e300;
  for (int64_t j = 0; j < s.lk; ++j) {
    p[size_t(j)] = 0;
    if (j >= n) continue;
    double acc = 0;
    for (int64_t c = 0; c < d; ++c) acc += q[size_t((bh * s.lq + i) * d + c)] * k[size_t((kv * s.lk + j) * d + c)];
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
        for (int64_t j = 0; j < s.lk; ++j) oc += p[size_t(j)] * v[size_t((kv_of(s, bh) * s.lk + j) * s.d + c)];
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
// dQ = scale dS K, dK = scale dS^T Q; each query head's dK, dV added onto its kv head's.
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
      const int64_t kv = kv_of(s, bh);
      double D = 0;
      for (int64_t j = 0; j < s.lk; ++j) {
        const size_t kj = size_t((kv * s.lk + j) * d);
        double acc = 0;
        for (int64_t c = 0; c < d; ++c) acc += dout[qi + size_t(c)] * v[kj + size_t(c)];
        dp[size_t(j)] = acc;
        D += p[size_t(j)] * acc;
      }
      for (int64_t j = 0; j < s.lk; ++j) {
        const size_t kj = size_t((kv * s.lk + j) * d);
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

// float32 accumulation: over Lk keys for dQ, over Lq rows of each of the group's Hq / Hkv query heads for
// dK and dV, and the d-long dot products.
double tolerance(const Shape& s) {
  return 2e-5 * std::max(1.0, std::sqrt(double(std::max(s.lq * s.group(), s.lk)) / 64.0));
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
  for (bool c : {false, true})
    for (const Shape& s : {shape(5, 7, 16), gqa(5, 7, 16, 1, 4, 2), gqa(6, 4, 16, 2, 4, 1)}) {
      SCOPED_TRACE(s.text() + (c ? " causal" : ""));
      const Inputs in = random_inputs(s);
      const Grads ref = reference(in, s, causal(c)), fd = finite_differences(in, s, causal(c));
      double worst = 0;
      for (size_t e = 0; e < ref.dk.size(); ++e) worst = std::max(worst, std::abs(ref.dk[e] - fd.dk[e]));
      for (size_t e = 0; e < ref.dv.size(); ++e) worst = std::max(worst, std::abs(ref.dv[e] - fd.dv[e]));
      for (size_t e = 0; e < ref.dq.size(); ++e) worst = std::max(worst, std::abs(ref.dq[e] - fd.dq[e]));
      EXPECT_LT(worst, 1e-8);
    }
}

Grads library_reference(const Inputs& in, const Shape& s, const Options& o) {
  Grads lib{std::vector<double>(in.q.size()), std::vector<double>(in.k.size()), std::vector<double>(in.v.size())};
  flash_attention_backward::reference(in.q.data(), in.k.data(), in.v.data(), in.dout.data(), s, o, lib.dq.data(),
                                      lib.dk.data(), lib.dv.data());
  return lib;
}

// Multi-head, and grouped-query (the library's: K and V repeated per query head, dK and dV summed back;
// the one here: each query head reads its kv head and adds into its dK and dV).
TEST(FlashAttentionBackward, LibraryReferenceAgreesWithTheOneHere) {
  for (bool c : {false, true})
    for (const Shape& s : {shape(21, 13, 16, 1, 2), gqa(21, 13, 16, 2, 4, 2), gqa(13, 21, 16, 1, 8, 1)}) {
      SCOPED_TRACE(s.text() + (c ? " causal" : ""));
      const Inputs in = random_inputs(s);
      const Grads mine = reference(in, s, causal(c)), lib = library_reference(in, s, causal(c));
      for (auto [a, b] : {std::pair{&mine.dq, &lib.dq}, {&mine.dk, &lib.dk}, {&mine.dv, &lib.dv}}) {
        ASSERT_EQ(a->size(), b->size());
        for (size_t e = 0; e < a->size(); ++e)
          ASSERT_NEAR((*a)[e], (*b)[e], 1e-12 * std::max(1.0, std::abs((*a)[e])));
      }
    }
}

// [SECTION] The gradient check: finite differences of the forward against the teaching kernel -----------------

TEST(FlashAttentionBackward, TeachingMatchesFiniteDifferencesOfTheForward) {
  for (bool c : {false, true})
    for (Shape s : {shape(19, 23, 16), shape(23, 19, 16), shape(17, 17, 32), gqa(19, 23, 16, 1, 4, 2)}) {
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

// [SECTION] Grouped-query attention --------------------------------------------------------------------------

// Both variants on both backends against the library's float64 reference: Hq / Hkv in {1, 2, 4, 8}, odd
// lengths, Lq < Lk, = and >, causal (bottom-right) and not, one or two kv heads, one or two batches.
TEST(FlashAttentionBackward, GroupedQueryAttentionOnBothBackends) {
  struct Case {
    int64_t lq, lk;
    int d, bm, bn;
  };
  const Case cases[] = {{17, 33, 16, 16, 16}, {33, 17, 32, 16, 32}, {45, 45, 64, 32, 16}, {5, 71, 128, 16, 64}};
  int index = 0;
  for (int64_t ratio : {1, 2, 4, 8})
    for (const Case& c : cases)
      for (bool causal_mask : {false, true}) {
        const int64_t kv = 1 + index % 2, batch = 1 + (index / 2) % 2;
        ++index;
        const Shape s = gqa(c.lq, c.lk, c.d, batch, ratio * kv, kv);
        const Options o = causal(causal_mask);
        const Inputs in = random_inputs(s);
        const Grads ref = library_reference(in, s, o);
        for (Backend b : test::backends())
          for (Variant var : {Variant::Teaching, Variant::Naive}) {
            SCOPED_TRACE(std::string(backend_name(b)) + (var == Variant::Naive ? " naive " : " teaching ") +
                         s.text() + " block_m=" + std::to_string(c.bm) + " block_n=" + std::to_string(c.bn) +
                         (causal_mask ? " causal" : ""));
            const Got got = run_on(b, var, in, s, o, c.bm, c.bn);
            ASSERT_EQ(got.dk.size(), size_t(s.kv_bh() * s.lk * s.d));
            expect_close(got, ref, tolerance(s));
          }
      }
}

// Causal with Lq > Lk at ratio 4: the rows that see no key have zero dQ in every query head, and the
// kv heads' dK, dV sum only the rows that see their keys.
TEST(FlashAttentionBackward, GroupedQueryCausalRowsThatSeeNoKey) {
  const Shape s = gqa(40, 24, 32, 2, 8, 2);
  const Inputs in = random_inputs(s);
  const Grads ref = library_reference(in, s, causal(true));
  for (Backend b : test::backends())
    for (Variant var : {Variant::Teaching, Variant::Naive}) {
      SCOPED_TRACE(std::string(backend_name(b)) + (var == Variant::Naive ? " naive" : " teaching"));
      const Got got = run_on(b, var, in, s, causal(true), 16, 16);
      expect_close(got, ref, tolerance(s));
      double blind_max = 0;
      for (int64_t bh = 0; bh < s.bh(); ++bh)
        for (int64_t i = 0; i < s.lq - s.lk; ++i)
          for (int c = 0; c < s.d; ++c)
            blind_max = std::max(blind_max, double(std::abs(got.dq[size_t((bh * s.lq + i) * s.d + c)])));
      EXPECT_EQ(blind_max, 0.0) << "rows that see no key";
    }
}

// Hkv must divide Hq (and be at most Hq): the same one line as rung 5's, before anything runs.
TEST(FlashAttentionBackward, RefusesKvHeadsNotDividingQs) {
  for (auto [heads, kv] : {std::pair<int64_t, int64_t>{4, 3}, {2, 4}, {6, 4}}) {
    const Shape s = gqa(4, 4, 16, 1, heads, kv);
    std::vector<float> q(size_t(s.bh() * 4 * 16), 0.5f), k(size_t(s.kv_bh() * 4 * 16), 0.5f), v = k;
    std::vector<float> dq(q.size()), dk(k.size()), dv(k.size());
    for (Variant var : {Variant::Teaching, Variant::Naive}) {
      try {
        if (var == Variant::Naive)
          run_naive(Backend::Cpu, q.data(), k.data(), v.data(), q.data(), dq.data(), dk.data(), dv.data(), s, {});
        else
          run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), nullptr, nullptr, q.data(), dq.data(), dk.data(),
                       dv.data(), s, {}, 16, 16);
        ADD_FAILURE() << "Hq=" << heads << " Hkv=" << kv << " accepted";
      } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()), flash_attention::gqa_heads_message(kv, heads));
      }
    }
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
  for (Shape s : {shape(70, 50, 16, 1, 2), shape(50, 70, 16, 1, 2), shape(64, 64, 16, 1, 2), gqa(70, 50, 16, 2, 4, 2)})
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
// With grouped-query attention the program serving query head bh_c runs the group's query heads in order:
// its partials after bh_c's last step hold the dK_j, dV_j of the group's heads up to bh_c (the float64
// reference of those heads alone, each on its kv head), and the result itself when bh_c is the last.
TEST(FlashAttentionBackward, TraceRecomputedPEqualsForwardPAndPartialsFoldToTheResult) {
  const int bm = 16, bn = 16;
  const int64_t kb_c = 2, qb_c = 1;
  struct Case {
    Shape s;
    int64_t bh_c;
  };
  const Case cases[] = {{shape(45, 61, 32, 1, 2), 1}, {gqa(45, 61, 32, 1, 6, 2), 3}, {gqa(45, 61, 32, 1, 6, 2), 4},
                        {gqa(45, 61, 32, 1, 6, 2), 5}};
  for (const Case& cs : cases)
    for (bool c : {false, true})
      for (Backend b : test::backends()) {
        const Shape& s = cs.s;
        const int64_t bh_c = cs.bh_c, kv_c = kv_of(s, bh_c);
        SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text() + " bh " + std::to_string(bh_c) +
                     (c ? " causal" : ""));
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
        // dK_j, dV_j after bh_c's last query step: the group's heads up to bh_c, in float64 one by one; at
        // a query step causality skipped (before bh_c's first computed one), the heads before bh_c
        const int64_t last = t.q_blocks - 1, first_head = bh_c - bh_c % s.group();
        std::vector<double> dk_want(size_t(bn * s.d)), dv_want(dk_want.size()), dk_before;
        for (int64_t head = first_head; head <= bh_c; ++head) {
          if (head == bh_c) dk_before = dk_want;
          const Shape one = shape(s.lq, s.lk, s.d);
          const size_t qo = size_t(head * s.lq * s.d), ko = size_t(kv_c * s.lk * s.d);
          Inputs part{std::vector<float>(in.q.begin() + long(qo), in.q.begin() + long(qo + size_t(s.lq * s.d))),
                      std::vector<float>(in.k.begin() + long(ko), in.k.begin() + long(ko + size_t(s.lk * s.d))),
                      std::vector<float>(in.v.begin() + long(ko), in.v.begin() + long(ko + size_t(s.lk * s.d))),
                      std::vector<float>(in.dout.begin() + long(qo), in.dout.begin() + long(qo + size_t(s.lq * s.d)))};
          const Grads g = reference(part, one, causal(c));
          for (int jj = 0; jj < bn && kb_c * bn + jj < s.lk; ++jj)
            for (int e = 0; e < s.d; ++e) {
              dk_want[size_t(jj * s.d + e)] += g.dk[size_t((kb_c * bn + jj) * s.d + e)];
              dv_want[size_t(jj * s.d + e)] += g.dv[size_t((kb_c * bn + jj) * s.d + e)];
            }
        }
        const std::vector<float> dk_last(h.dk.begin() + long(last * bn * s.d), h.dk.begin() + long((last + 1) * bn * s.d));
        const std::vector<float> dv_last(h.dv.begin() + long(last * bn * s.d), h.dv.begin() + long((last + 1) * bn * s.d));
        EXPECT_LT(rel_err(dk_last, dk_want), tolerance(s)) << "dK_j after query head " << bh_c;
        EXPECT_LT(rel_err(dv_last, dv_want), tolerance(s)) << "dV_j after query head " << bh_c;
        if (h.state[size_t((bh_c * t.k_blocks + kb_c) * t.q_blocks)] == kTileSkipped) {
          const std::vector<float> dk_skip(h.dk.begin(), h.dk.begin() + long(bn * s.d));
          if (bh_c == first_head) EXPECT_EQ(dk_skip, std::vector<float>(dk_skip.size(), 0.0f)) << "skipped step";
          else EXPECT_LT(rel_err(dk_skip, dk_before), tolerance(s)) << "dK_j carried into a skipped step";
        } else {
          EXPECT_FALSE(c) << "the causal cases skip query tile 0 for K/V tile " << kb_c;
        }
        if ((bh_c + 1) % s.group() == 0)  // the group's last query head: the program's result
          for (int jj = 0; jj < bn && kb_c * bn + jj < s.lk; ++jj)
            for (int e = 0; e < s.d; ++e) {
              const size_t g = size_t((kv_c * s.lk + kb_c * bn + jj) * s.d + e), p = size_t((last * bn + jj) * s.d + e);
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
// accumulated with atomics, so two runs may differ in the last bits; dK and dV never do, grouped-query
// attention's included (one program sums a kv head's group in a fixed order).
TEST(FlashAttentionBackward, DeterminismAsDocumented) {
  for (const Shape& s : {shape(77, 91, 32, 1, 2), gqa(77, 91, 32, 1, 4, 1)})  // GQA: dK, dV summed over 4 heads
    for (Backend b : test::backends()) {
      SCOPED_TRACE(std::string(backend_name(b)) + " " + s.text());
      const Inputs in = random_inputs(s);
      const Got a = run_on(b, Variant::Teaching, in, s, causal(true), 16, 16);
      const Got c = run_on(b, Variant::Teaching, in, s, causal(true), 16, 16);
      EXPECT_EQ(a.dk, c.dk);
      EXPECT_EQ(a.dv, c.dv);
      if (b == Backend::Cpu) EXPECT_EQ(a.dq, c.dq);
      else EXPECT_LT(rel_err(a.dq, to_double(c.dq)), 1e-6);
    }
}

// [SECTION] `run flash-attention-backward` with grouped-query attention ------------------------------------

Array arr(std::vector<int64_t> shape) {
  Array a;
  a.shape = std::move(shape);
  a.data = test::random_floats(size_t(a.size()));
  return a;
}

KernelRunRequest gqa_request(const std::string& variant, int64_t heads, int64_t kv, int64_t lq, int64_t lk) {
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = variant;
  r.params = ParamValues(entry().params);
  r.params.set("block_m=16");
  r.params.set("block_n=32");
  r.params.set("causal=1");
  r.inputs["q"] = arr({2, heads, lq, 16});
  r.inputs["k"] = arr({2, kv, lk, 16});
  r.inputs["v"] = arr({2, kv, lk, 16});
  r.inputs["do"] = arr({2, heads, lq, 16});
  return r;
}

// q, do [2, 8, 21, 16] with k, v [2, 2, 70, 16]: dk and dv have k's shape, the gradients the reference's.
TEST(FlashAttentionBackward, EntryRunsGroupedQuery) {
  for (const std::string variant : {"teaching", "naive"}) {
    SCOPED_TRACE(variant);
    const KernelRunRequest r = gqa_request(variant, 8, 2, 21, 70);
    const KernelRunResult res = entry().run(r);
    EXPECT_EQ(res.outputs.at("dq").shape, (std::vector<int64_t>{2, 8, 21, 16}));
    EXPECT_EQ(res.outputs.at("dk").shape, (std::vector<int64_t>{2, 2, 70, 16}));
    EXPECT_EQ(res.outputs.at("dv").shape, (std::vector<int64_t>{2, 2, 70, 16}));
    const Shape s = gqa(21, 70, 16, 2, 8, 2);
    const Inputs in{r.inputs.at("q").data, r.inputs.at("k").data, r.inputs.at("v").data, r.inputs.at("do").data};
    expect_close({res.outputs.at("dq").data, res.outputs.at("dk").data, res.outputs.at("dv").data},
                 library_reference(in, s, causal(true)), tolerance(s));
  }
}

// Bad grouped-query shapes: one line naming the parameter (the InputError `run` prints, exit code 2).
TEST(FlashAttentionBackward, EntryRefusesBadGroupedQueryShapes) {
  for (auto [heads, kv] : {std::pair<int64_t, int64_t>{8, 3}, {4, 8}, {6, 4}})
    for (const std::string variant : {"teaching", "naive", "fast"}) {
      try {
        entry().run(gqa_request(variant, heads, kv, 5, 7));
        ADD_FAILURE() << variant << " Hq=" << heads << " Hkv=" << kv << " accepted";
      } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()), flash_attention::gqa_heads_message(kv, heads)) << variant;
      }
    }
  // --variant fast takes grouped-query attention too: a good Hkv passes the shape checks, and what refuses
  // this request is the backend (fast runs on CUDA only), not Hkv.
  try {
    entry().run(gqa_request("fast", 8, 2, 5, 7));
    ADD_FAILURE() << "fast on the CPU backend accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--variant fast: flash-attention-backward runs it on the CUDA backend only"), std::string::npos)
        << m;
    EXPECT_EQ(m.find("Hkv"), std::string::npos) << m;
  }
  // k and v must agree with each other, and with q in batch and d; do must have q's shape.
  KernelRunRequest r = gqa_request("teaching", 8, 2, 5, 7);
  r.inputs["v"] = arr({2, 4, 7, 16});
  EXPECT_THROW(entry().run(r), InputError);
  r = gqa_request("teaching", 8, 2, 5, 7);
  r.inputs["k"] = r.inputs["v"] = arr({1, 2, 7, 16});
  EXPECT_THROW(entry().run(r), InputError);  // batch 1 against q's 2
  r = gqa_request("teaching", 8, 2, 5, 7);
  r.inputs["k"] = r.inputs["v"] = arr({2, 2, 7, 32});
  EXPECT_THROW(entry().run(r), InputError);  // d 32 against q's 16
  r = gqa_request("teaching", 8, 2, 5, 7);
  r.inputs["do"] = arr({2, 2, 5, 16});
  try {
    entry().run(r);
    ADD_FAILURE() << "do with k's heads accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--in do"), std::string::npos) << e.what();
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
