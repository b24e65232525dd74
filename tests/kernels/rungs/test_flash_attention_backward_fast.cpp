// Tests for kernels/rungs/flash_attention_backward_fast.{h,cu}: rung 6's fast (tensor-core) backward.
//   The rule (issue: "within twice the error of a plain bf16 reference"): on inputs rounded to bf16 / fp16
//   (so the kernel and the references see the same numbers), the fast dQ, dK, dV's error against the
//   float64 backward (kernels/rungs/flash_attention_backward.h, reference()) is at most twice the error of
//   a plain low-precision training step against it, plus a small floor. The plain step, written here:
//     forward as rung 5's plain reference: fp32 scores and softmax, P rounded before P V, O rounded;
//     backward: dP = dO V^T and D = rowsum(dO ∘ O) in fp32, dS = P ∘ (dP - D) in fp32; P and dS rounded
//     before they meet dO, Q and K (dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K, fp32 sums); the
//     three outputs rounded.
//   GPU: lengths on both sides of the 64-row / 64-key tiles, Lq != Lk, causal and not, d 64 and 128 (and 256 on
//   the wgmma paths: its own kernel, the D256 tests; refused on mma.sync),
//   bf16 and fp16, (B, H) > 1, both dQ modes, both main kernels (mma.sync, and wgmma where the sm_90a code
//   runs: its 64-query x 128-key tiles get their own boundary lengths); rows that see no key (dQ exactly 0);
//   outputs and the dQ accumulator poisoned with NaN before the launch; the deterministic mode bitwise
//   repeatable, the atomic mode's dK and dV too; the
//   forward's O and L given or computed; lower-rank inputs; `run` and `bench` wiring. Grouped-query attention
//   (k, v with Hkv < H heads; the kernels of their own) in every path and both dQ modes: ratios 2, 4, 8 at
//   d 64 and 128, bf16 and fp16, odd lengths, Lq != Lk, causal with rows and whole query tiles that see no key,
//   against the float64 reference by the same rule (the plain step sums dK, dV over the group in fp32 and
//   rounds once); the deterministic mode bitwise repeatable; dQ bit for bit the multi-head kernels' on K, V
//   repeated per query head (deterministic mode), dK and dV their group sums.
//   The host references spread their query heads over the machine's threads (test::parallel_for).
//   CPU: the first-query-tile bound against brute force, parameter checks, the plain reference's own
//   accuracy, and --variant fast refused on the CPU backend.
#include "kernels/rungs/flash_attention_backward_fast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/registry.h"
#include "test_util.h"

namespace kl::flash_attention_backward {
namespace {

using flash_attention::key_visible;

// ---- [SECTION] low-precision rounding on the host (round to nearest even, held in a float) ----------
// The same rounding as rung 5's test (tests/kernels/rungs/test_flash_attention_fast.cpp).
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}
float round_fp16(float x) {
  const float a = std::fabs(x);
  if (a >= 65520.f) return std::copysign(INFINITY, x);
  if (a < 6.103515625e-05f) return std::nearbyint(x * 16777216.f) / 16777216.f;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0xFFFu + ((u >> 13) & 1u);
  u &= 0xFFFFE000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}
// "fp32": no rounding (the plain reference's own check).
float round_to(const std::string& dtype, float x) {
  return dtype == "bf16" ? round_bf16(x) : dtype == "fp16" ? round_fp16(x) : x;
}

struct Case {
  int B = 1, H = 1, Lq = 1, Lk = 1, d = 64;
  int Hkv = 0;  // heads of k and v (grouped-query attention), dividing H; 0: H
  bool causal = false, deterministic = false;
  std::string dtype = "bf16";
  float scale = 0;  // 0: 1/sqrt(d)
  FastBackwardPath path = FastBackwardPath::Auto;
  int kv() const { return Hkv > 0 ? Hkv : H; }
  int group() const { return H / kv(); }
  std::string text() const {
    std::ostringstream s;
    s << "B=" << B << " H=" << H << (kv() != H ? " Hkv=" + std::to_string(Hkv) : std::string()) << " Lq=" << Lq
      << " Lk=" << Lk << " d=" << d << (causal ? " causal" : " non-causal")
      << " " << dtype << " scale=" << scale << (deterministic ? " dq=deterministic" : " dq=atomic") << " path="
      << fast_backward_path_name(path);
    return s.str();
  }
};

struct Inputs {
  std::vector<float> q, k, v, dout;
};

Inputs rounded_inputs(const Case& c, float qk_range = 1.5f) {
  const size_t nq = size_t(c.B) * c.H * c.Lq * c.d, nk = size_t(c.B) * c.kv() * c.Lk * c.d;
  Inputs in{test::random_floats(nq, -qk_range, qk_range), test::random_floats(nk, -qk_range, qk_range),
            test::random_floats(nk, -1.f, 1.f), test::random_floats(nq, -1.f, 1.f)};
  for (std::vector<float>* x : {&in.q, &in.k, &in.v, &in.dout})
    for (float& e : *x) e = round_to(c.dtype, e);
  return in;
}

// ---- [SECTION] the plain low-precision training step ---------------------------------------------------
struct Plain {
  std::vector<float> dq, dk, dv;
  std::vector<char> empty_row;  // per (bh, i): the row sees no key
};

// The kv (batch, head) that query (batch, head) bh of c reads.
int64_t kv_of(const Case& c, int64_t bh) { return flash_attention::kv_bh_of(bh, c.H, c.group()); }

// Query heads in parallel (test::parallel_for), each with its own fp32 dK, dV partials; a kv head's dK, dV are
// the fp32 sum of its group's partials in head order, rounded once (without grouped-query attention: the
// head's own sums, as a single-threaded loop gives them).
Plain plain_reference(const Case& c, const Inputs& in) {
  const int64_t d = c.d, lq = c.Lq, lk = c.Lk, heads = int64_t(c.B) * c.H, group = c.group();
  const auto rd = [&](float x) { return round_to(c.dtype, x); };
  Plain r;
  r.dq.assign(in.q.size(), 0.f);
  r.empty_row.assign(size_t(heads * lq), 0);
  std::vector<float> dk_part(size_t(heads * lk * d), 0.f), dv_part(dk_part.size(), 0.f);
  test::parallel_for(heads, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(lk)), dp(static_cast<size_t>(lk)), o(static_cast<size_t>(d)),
        dq(static_cast<size_t>(d));
    for (int64_t bh = begin; bh < end; ++bh)
      for (int64_t i = 0; i < lq; ++i) {
        const float* qi = &in.q[size_t((bh * lq + i) * d)];
        const float* doi = &in.dout[size_t((bh * lq + i) * d)];
        const float* kb = &in.k[size_t(kv_of(c, bh) * lk * d)];
        const float* vb = &in.v[size_t(kv_of(c, bh) * lk * d)];
        float* dk_acc = &dk_part[size_t(bh * lk * d)];
        float* dv_acc = &dv_part[size_t(bh * lk * d)];
        int64_t n = 0;
        float m = -INFINITY;
        for (int64_t j = 0; j < lk; ++j) {
          if (!key_visible(int(i), int(j), c.Lq, c.Lk, c.causal)) continue;
          ++n;
          float s = 0, g = 0;
          for (int64_t e = 0; e < d; ++e) {
            s += qi[e] * kb[j * d + e];
            g += doi[e] * vb[j * d + e];
          }
          p[size_t(j)] = s * c.scale;
          dp[size_t(j)] = g;
          m = std::max(m, p[size_t(j)]);
        }
        if (n == 0) {
          r.empty_row[size_t(bh * lq + i)] = 1;
          continue;
        }
        float l = 0;
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t j = 0; j < n; ++j) {
          const float e = std::exp(p[size_t(j)] - m);
          l += e;
          for (int64_t x = 0; x < d; ++x) o[size_t(x)] += rd(e) * vb[j * d + x];
          p[size_t(j)] = e;
        }
        float D = 0;
        for (int64_t x = 0; x < d; ++x) D += doi[x] * rd(o[size_t(x)] / l);
        std::fill(dq.begin(), dq.end(), 0.f);
        for (int64_t j = 0; j < n; ++j) {
          const float pj = p[size_t(j)] / l, ds = rd(pj * (dp[size_t(j)] - D)), pr = rd(pj);
          for (int64_t x = 0; x < d; ++x) {
            dv_acc[size_t(j * d + x)] += pr * doi[x];
            dk_acc[size_t(j * d + x)] += ds * qi[x];
            dq[size_t(x)] += ds * kb[j * d + x];
          }
        }
        for (int64_t x = 0; x < d; ++x) r.dq[size_t((bh * lq + i) * d + x)] = rd(c.scale * dq[size_t(x)]);
      }
  });
  r.dk.resize(in.k.size());
  r.dv.resize(in.v.size());
  const size_t head = size_t(lk * d);
  for (size_t x = 0; x < r.dk.size(); ++x) {
    const size_t kvb = x / head, e = x % head;
    float sk = dk_part[kvb * size_t(group) * head + e], sv = dv_part[kvb * size_t(group) * head + e];
    for (size_t gi = 1; gi < size_t(group); ++gi) {
      sk += dk_part[(kvb * size_t(group) + gi) * head + e];
      sv += dv_part[(kvb * size_t(group) + gi) * head + e];
    }
    r.dk[x] = rd(c.scale * sk);
    r.dv[x] = rd(sv);
  }
  return r;
}

struct Exact {
  std::vector<double> dq, dk, dv;
};

// The float64 backward (reference()) one query head at a time, the heads in parallel, on its kv head's K and V;
// a kv head's dK, dV the sums over its group (what reference() computes for grouped-query attention: K, V
// repeated per query head, the multi-head chain rule, the copies' gradients summed back).
Exact exact_reference(const Case& c, const Inputs& in) {
  Shape one;
  one.batch = 1, one.heads = 1, one.lq = c.Lq, one.lk = c.Lk, one.d = c.d;
  Options o;
  o.causal = c.causal;
  o.scale = c.scale;
  const int64_t heads = int64_t(c.B) * c.H, hq = int64_t(c.Lq) * c.d, hk = int64_t(c.Lk) * c.d;
  Exact e{std::vector<double>(in.q.size()), std::vector<double>(in.k.size(), 0.0),
          std::vector<double>(in.v.size(), 0.0)};
  std::vector<double> dk_part(size_t(heads * hk)), dv_part(dk_part.size());
  test::parallel_for(heads, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t kv = kv_of(c, bh);
      reference(&in.q[size_t(bh * hq)], &in.k[size_t(kv * hk)], &in.v[size_t(kv * hk)], &in.dout[size_t(bh * hq)], one,
                o, &e.dq[size_t(bh * hq)], &dk_part[size_t(bh * hk)], &dv_part[size_t(bh * hk)]);
    }
  });
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t x = 0; x < hk; ++x) {
      e.dk[size_t(kv_of(c, bh) * hk + x)] += dk_part[size_t(bh * hk + x)];
      e.dv[size_t(kv_of(c, bh) * hk + x)] += dv_part[size_t(bh * hk + x)];
    }
  return e;
}

struct Errors {
  double rel = 0, max_abs = 0, ref_max = 0, norm = 0, ref_norm = 0;  // norm: of the error
};
Errors errors_against(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0, mx = 0, rmax = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = double(got[i]) - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
    mx = std::max(mx, std::fabs(e));
    rmax = std::max(rmax, std::fabs(ref[i]));
  }
  return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), mx, rmax, std::sqrt(num), std::sqrt(den)};
}

// The 2x rule for one output, in norms and in the largest element error. The floors: 1e-5 of the norm,
// one ulp of the dtype at the larger of the output's magnitude and 1e-3 (per element; in the norm, times
// sqrt(n)), and fp32 accumulation noise, 2^-16 of the largest exact gradient of the three (`problem_max`).
// They matter where the exact gradient is ~0: at Lk = 1, P = 1 and dS = dP - D is 0 up to fp32 rounding,
// which the kernel and the plain step (which cancels exactly there) sum in different orders; dK's error
// is then that noise times Q, on the scale of dV, not of dK's exact 0 (on the H200: 2.3e-6 at Lq = 129).
void expect_within_twice_plain(const char* name, const std::vector<float>& fast, const std::vector<float>& plain,
                               const std::vector<double>& exact, const std::string& dtype, double problem_max) {
  ASSERT_EQ(fast.size(), exact.size()) << name;
  const Errors f = errors_against(fast, exact), p = errors_against(plain, exact);
  const double ref_norm = f.ref_norm;
  const double ulp_1e3 = (dtype == "bf16" ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11)) * 1e-3;
  const double fp32_noise = std::ldexp(problem_max, -16);
  const double ulp = ulp_1e3 * std::max(f.ref_max / 1e-3, 1.0) + fp32_noise;
  const double norm_floor = 1e-5 * ref_norm + (ulp_1e3 + fp32_noise) * std::sqrt(double(exact.size()));
  EXPECT_LE(f.norm, 2 * p.norm + norm_floor)
      << name << ": relative-norm error fast " << f.rel << ", plain " << p.rel << " (norm of the exact " << ref_norm << ")";
  EXPECT_LE(f.max_abs, 2 * p.max_abs + ulp) << name << ": max abs error fast " << f.max_abs << ", plain " << p.max_abs;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

Array make_array(std::vector<int64_t> shape, std::vector<float> data) {
  Array a;
  a.shape = std::move(shape);
  a.data = std::move(data);
  return a;
}

#ifdef KL_HAS_CUDA
FastHostResult run_case(const Case& c, const Inputs& in, const Array* o = nullptr, const Array* lse = nullptr) {
  return run_fast_host(make_array({c.B, c.H, c.Lq, c.d}, in.q), make_array({c.B, c.kv(), c.Lk, c.d}, in.k),
                       make_array({c.B, c.kv(), c.Lk, c.d}, in.v), make_array({c.B, c.H, c.Lq, c.d}, in.dout), o, lse,
                       c.causal, c.scale, c.dtype, c.deterministic, c.path);
}

// One case: fresh rounded inputs, the kernel, both references; NaN, empty rows, and the 2x rule.
void check_case(Case c, float qk_range = 1.5f) {
  if (c.scale == 0) c.scale = 1.0f / std::sqrt(float(c.d));
  SCOPED_TRACE(c.text());
  const Inputs in = rounded_inputs(c, qk_range);
  const FastHostResult got = run_case(c, in);
  ASSERT_EQ(got.dq.shape, (std::vector<int64_t>{c.B, c.H, c.Lq, c.d}));
  ASSERT_EQ(got.dk.shape, (std::vector<int64_t>{c.B, c.kv(), c.Lk, c.d}));
  ASSERT_EQ(got.dv.shape, got.dk.shape);
  ASSERT_EQ(test::nan_count(got.dq.data) + test::nan_count(got.dk.data) + test::nan_count(got.dv.data), 0u)
      << "NaN in an output (unwritten elements stay NaN)";
  const Plain plain = plain_reference(c, in);
  size_t nonzero_empty = 0;
  for (size_t x = 0; x < got.dq.data.size(); ++x)
    if (plain.empty_row[x / size_t(c.d)] && got.dq.data[x] != 0.f) ++nonzero_empty;
  ASSERT_EQ(nonzero_empty, 0u) << "rows that see no key must have dQ exactly 0";
  const Exact exact = exact_reference(c, in);
  const double problem_max = std::max({max_abs(exact.dq), max_abs(exact.dk), max_abs(exact.dv)});
  expect_within_twice_plain("dq", got.dq.data, plain.dq, exact.dq, c.dtype, problem_max);
  expect_within_twice_plain("dk", got.dk.data, plain.dk, exact.dk, c.dtype, problem_max);
  expect_within_twice_plain("dv", got.dv.data, plain.dv, exact.dv, c.dtype, problem_max);
}

const int kBatchHeads[6][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 3}, {3, 1}, {1, 3}};

// Every (dtype, d, causal, Lq, Lk) from `lengths`, (B, H) cycling (1 x 1 on the longest pairs).
void sweep(std::initializer_list<int> lengths, bool deterministic, FastBackwardPath path = FastBackwardPath::Auto,
           std::initializer_list<int> dims = {64, 128}) {
  int index = 0;
  for (const char* dtype : {"bf16", "fp16"})
    for (int d : dims)
      for (bool causal : {false, true})
        for (int Lq : lengths)
          for (int Lk : lengths) {
            Case c;
            const int* bh = kBatchHeads[index++ % 6];
            const bool long_pair = Lq >= 200 && Lk >= 200;
            c.B = long_pair ? 1 : bh[0], c.H = long_pair ? 1 : bh[1];
            c.Lq = Lq, c.Lk = Lk, c.d = d, c.causal = causal, c.dtype = dtype, c.deterministic = deterministic;
            c.path = path;
            check_case(c);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

// Scale 1 and inputs up to 2: peaked rows (P near one-hot), many tiles per CTA in both directions.
void peaked_and_long(FastBackwardPath path, std::initializer_list<int> dims = {64, 128}) {
  for (bool det : {false, true})
    for (int d : dims)
      for (bool causal : {false, true}) {
        Case c;
        c.B = 1, c.H = 2, c.Lq = 300, c.Lk = 520, c.d = d, c.causal = causal, c.scale = 1.0f, c.deterministic = det;
        c.path = path;
        check_case(c, 2.0f);
        if (::testing::Test::HasFatalFailure()) return;
        std::swap(c.Lq, c.Lk);
        check_case(c, 2.0f);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// Causal with Lq > Lk: the first Lq - Lk rows see nothing (dQ exactly 0), including whole query tiles
// (Lq = 500, Lk = 17: rows 0..482) that no K/V CTA visits; single-key and single-query cases.
void causal_rows_that_see_little(FastBackwardPath path, std::initializer_list<int> dims = {64, 128}) {
  for (bool det : {false, true})
    for (int d : dims)
      for (auto [Lq, Lk] : {std::pair<int, int>{500, 17}, {129, 1}, {300, 128}, {1, 300}, {65, 64}, {64, 129}}) {
        Case c;
        c.B = 2, c.H = 1, c.Lq = Lq, c.Lk = Lk, c.d = d, c.causal = true, c.deterministic = det;
        c.path = path;
        check_case(c);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// dQ, dK and dV of two runs the same bits.
void expect_same_bits(const FastHostResult& a, const FastHostResult& b) {
  EXPECT_EQ(0, std::memcmp(a.dq.data.data(), b.dq.data.data(), a.dq.data.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.dk.data.data(), b.dk.data.data(), a.dk.data.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.dv.data.data(), b.dv.data.data(), a.dv.data.size() * sizeof(float)));
}

// The deterministic mode gives the same bits run after run (dQ included); the atomic mode's dK and dV do
// too (one CTA owns each), and its dQ agrees with the deterministic one to fp32 summation order.
void bitwise_repeatable(FastBackwardPath path, std::initializer_list<int> dims = {64, 128}) {
  for (int d : dims)
    for (bool causal : {false, true}) {
      Case c;
      c.B = 2, c.H = 2, c.Lq = 777, c.Lk = 1000, c.d = d, c.causal = causal, c.scale = 1.0f / std::sqrt(float(d));
      c.path = path;
      SCOPED_TRACE(c.text());
      const Inputs in = rounded_inputs(c);
      c.deterministic = true;
      const FastHostResult a = run_case(c, in), b = run_case(c, in);
      expect_same_bits(a, b);
      c.deterministic = false;
      const FastHostResult x = run_case(c, in), y = run_case(c, in);
      EXPECT_EQ(0, std::memcmp(x.dk.data.data(), y.dk.data.data(), x.dk.data.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(x.dv.data.data(), y.dv.data.data(), x.dv.data.size() * sizeof(float)));
      // dK and dV: the same arithmetic in both modes (the main kernel with and without its dQ part).
      EXPECT_LT(test::rel_err(a.dk.data, std::vector<double>(x.dk.data.begin(), x.dk.data.end())), 1e-6);
      EXPECT_LT(test::rel_err(a.dv.data, std::vector<double>(x.dv.data.begin(), x.dv.data.end())), 1e-6);
      const std::vector<double> det(a.dq.data.begin(), a.dq.data.end());
      EXPECT_LT(test::rel_err(x.dq.data, det), c.dtype == "bf16" ? 1e-2 : 2e-3);
      // At d = 256 both modes run the dQ pass (fast_backward_dq_by_pass): dQ bit for bit the same.
      if (d == 256) EXPECT_EQ(0, std::memcmp(a.dq.data.data(), x.dq.data.data(), a.dq.data.size() * sizeof(float)));
    }
}

// ---- grouped-query attention ----
// (B, H, Hkv, Lq, Lk): ratios H / Hkv of 2, 4 and 8; lengths one past a tile, one short of one, odd, Lq != Lk
// both ways (the main kernels' 64-row query tiles, the mma.sync kernel's 64-key and the wgmma kernels'
// 128-key K/V tiles); causal with Lq = 200 over Lk = 61: rows 0..138 see no key, query tiles 0 and 1 entirely;
// a single query row over 300 keys. B * H stays small: the host references are the cost.
const int kGqaShapes[5][5] = {{2, 4, 2, 65, 129}, {1, 8, 2, 130, 63}, {1, 8, 1, 77, 200}, {1, 4, 1, 200, 61},
                              {3, 2, 1, 1, 300}};

// Every (dtype, d, causal) with every shape of kGqaShapes, in one dQ mode, through one path.
void grouped_query_sweep(FastBackwardPath path, bool deterministic, std::initializer_list<int> dims = {64, 128}) {
  for (const char* dtype : {"bf16", "fp16"})
    for (int d : dims)
      for (bool causal : {false, true})
        for (const auto& g : kGqaShapes) {
          Case c;
          c.B = g[0], c.H = g[1], c.Hkv = g[2], c.Lq = g[3], c.Lk = g[4];
          c.d = d, c.causal = causal, c.dtype = dtype, c.deterministic = deterministic, c.path = path;
          check_case(c);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// Grouped-query attention's deterministic mode gives the same bits run after run; the atomic mode's dK and dV
// too (one CTA per K/V tile and kv head sums its group in registers, in a fixed order), the same as the
// deterministic mode's to fp32 rounding.
void grouped_query_bitwise_repeatable(FastBackwardPath path, std::initializer_list<int> dims = {64, 128}) {
  for (int d : dims)
    for (bool causal : {false, true}) {
      Case c;
      c.B = 2, c.H = 8, c.Hkv = 2, c.Lq = 333, c.Lk = 280, c.d = d, c.causal = causal;
      c.scale = 1.0f / std::sqrt(float(d));
      c.path = path;
      SCOPED_TRACE(c.text());
      const Inputs in = rounded_inputs(c);
      c.deterministic = true;
      const FastHostResult a = run_case(c, in), b = run_case(c, in);
      EXPECT_TRUE(test::same_bits(a.dq.data, b.dq.data));
      EXPECT_TRUE(test::same_bits(a.dk.data, b.dk.data));
      EXPECT_TRUE(test::same_bits(a.dv.data, b.dv.data));
      EXPECT_EQ(test::nan_count(a.dq.data) + test::nan_count(a.dk.data) + test::nan_count(a.dv.data), 0u);
      c.deterministic = false;
      const FastHostResult x = run_case(c, in), y = run_case(c, in);
      EXPECT_TRUE(test::same_bits(x.dk.data, y.dk.data));
      EXPECT_TRUE(test::same_bits(x.dv.data, y.dv.data));
      EXPECT_LT(test::rel_err(a.dk.data, std::vector<double>(x.dk.data.begin(), x.dk.data.end())), 1e-6);
      EXPECT_LT(test::rel_err(a.dv.data, std::vector<double>(x.dv.data.begin(), x.dv.data.end())), 1e-6);
      EXPECT_LT(test::rel_err(x.dq.data, std::vector<double>(a.dq.data.begin(), a.dq.data.end())), 1e-2);
    }
}

// Grouped-query attention is multi-head attention on K, V repeated per query head (PyTorch's
// repeat_interleave), given the same forward state (O and L computed on the host from the repeated heads):
// the deterministic dQ pass does the same arithmetic on the same bits either way, so dQ is equal bit for bit;
// dK and dV are the repeated heads' sums over each group (those rounded per head first: to bf16 rounding).
void grouped_query_is_repeated_heads(FastBackwardPath path, std::initializer_list<int> dims = {64, 128}) {
  for (int d : dims)
    for (bool causal : {false, true}) {
      Case g;
      g.B = 2, g.H = 8, g.Hkv = 2, g.Lq = 150, g.Lk = 131, g.d = d, g.causal = causal, g.scale = 0.1f;
      g.deterministic = true, g.path = path;
      SCOPED_TRACE(g.text());
      const Inputs in = rounded_inputs(g);
      Case m = g;
      m.Hkv = 0;
      Inputs rep = in;
      const size_t head = size_t(g.Lk) * size_t(g.d);
      rep.k.resize(size_t(g.B) * g.H * head);
      rep.v.resize(rep.k.size());
      for (int64_t bh = 0; bh < int64_t(g.B) * g.H; ++bh) {
        std::copy_n(&in.k[size_t(kv_of(g, bh)) * head], head, &rep.k[size_t(bh) * head]);
        std::copy_n(&in.v[size_t(kv_of(g, bh)) * head], head, &rep.v[size_t(bh) * head]);
      }
      Shape s;
      s.batch = m.B, s.heads = m.H, s.lq = m.Lq, s.lk = m.Lk, s.d = m.d;
      Options opt;
      opt.causal = m.causal;
      opt.scale = m.scale;
      std::vector<float> o(in.q.size()), lse(size_t(s.bh() * s.lq));
      forward(Backend::Cpu, rep.q.data(), rep.k.data(), rep.v.data(), o.data(), lse.data(), s, opt, 32, 32);
      const Array ao = make_array({g.B, g.H, g.Lq, g.d}, o), al = make_array({g.B, g.H, g.Lq}, lse);
      const FastHostResult got = run_case(g, in, &ao, &al), want = run_case(m, rep, &ao, &al);
      EXPECT_TRUE(test::same_bits(got.dq.data, want.dq.data)) << "dQ";
      std::vector<double> dk_sum(got.dk.data.size(), 0.0), dv_sum(dk_sum.size(), 0.0);
      for (int64_t bh = 0; bh < int64_t(g.B) * g.H; ++bh)
        for (size_t x = 0; x < head; ++x) {
          dk_sum[size_t(kv_of(g, bh)) * head + x] += want.dk.data[size_t(bh) * head + x];
          dv_sum[size_t(kv_of(g, bh)) * head + x] += want.dv.data[size_t(bh) * head + x];
        }
      EXPECT_LT(test::rel_err(got.dk.data, dk_sum), 1e-2) << "dK";
      EXPECT_LT(test::rel_err(got.dv.data, dv_sum), 1e-2) << "dV";
    }
}

// Sets an environment variable for one scope (fast_backward_path reads KL_FLASH_BWD_PATH per call).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};
#endif

// The wgmma tests run where the sm_90a code does (an H100/H200); elsewhere they say why they skip.
#define KL_REQUIRE_WGMMA()                                                                                   \
  do {                                                                                                       \
    KL_REQUIRE_CUDA();                                                                                       \
    if (!fast_backward_wgmma_available()) GTEST_SKIP() << "no sm_90a code on this device (the wgmma path)"; \
  } while (0)

// ---- [SECTION] GPU tests ------------------------------------------------------------------------------
#ifdef KL_HAS_CUDA
// 63 | 64 | 65 and 127 | 128 | 129: one row or key short of a tile, exactly a tile, one past.
TEST(FlashAttentionBackwardFast, AtomicDqAroundEveryTileBoundary) {
  KL_REQUIRE_CUDA();
  sweep({1, 63, 64, 65, 129, 200}, false, FastBackwardPath::MmaSync);
}

TEST(FlashAttentionBackwardFast, DeterministicDqAroundEveryTileBoundary) {
  KL_REQUIRE_CUDA();
  sweep({1, 63, 65, 128, 200}, true, FastBackwardPath::MmaSync);
}

TEST(FlashAttentionBackwardFast, PeakedSoftmaxAndLongRows) {
  KL_REQUIRE_CUDA();
  peaked_and_long(FastBackwardPath::MmaSync);
}

TEST(FlashAttentionBackwardFast, CausalRowsThatSeeNothingOrOneKey) {
  KL_REQUIRE_CUDA();
  causal_rows_that_see_little(FastBackwardPath::MmaSync);
}

TEST(FlashAttentionBackwardFast, DeterministicModeIsBitwiseRepeatable) {
  KL_REQUIRE_CUDA();
  bitwise_repeatable(FastBackwardPath::MmaSync);
}

// ---- the wgmma main kernel (sm_90a): the same checks, its tiles 64 queries x 128 keys ----
// 63 | 64 | 65 queries, 127 | 128 | 129 and 257 keys: both sides of every tile boundary.
TEST(FlashAttentionBackwardFast, WgmmaAtomicDqAroundEveryTileBoundary) {
  KL_REQUIRE_WGMMA();
  sweep({1, 63, 65, 127, 129, 257}, false, FastBackwardPath::Wgmma);
}

TEST(FlashAttentionBackwardFast, WgmmaDeterministicDqAroundEveryTileBoundary) {
  KL_REQUIRE_WGMMA();
  sweep({1, 64, 127, 129, 200, 257}, true, FastBackwardPath::Wgmma);  // the dQ pass's 128-row tiles too
}

TEST(FlashAttentionBackwardFast, WgmmaPeakedSoftmaxAndLongRows) {
  KL_REQUIRE_WGMMA();
  peaked_and_long(FastBackwardPath::Wgmma);
}

TEST(FlashAttentionBackwardFast, WgmmaCausalRowsThatSeeNothingOrOneKey) {
  KL_REQUIRE_WGMMA();
  causal_rows_that_see_little(FastBackwardPath::Wgmma);
}

TEST(FlashAttentionBackwardFast, WgmmaDeterministicModeIsBitwiseRepeatable) {
  KL_REQUIRE_WGMMA();
  bitwise_repeatable(FastBackwardPath::Wgmma);
}

// ---- wgmma-tma, the default (Q_i, dO_i by bulk tensor copies, dQ by bulk tensor reduce-adds; at d = 64 128 query
// rows a step, so 127 | 129 and 257 cross its boundaries, and 63 | 65 leave the second warpgroup's rows empty or
// nearly): the atomic mode's checks (the deterministic mode below; grouped-query attention below) ----
TEST(FlashAttentionBackwardFast, WgmmaTmaAtomicDqAroundEveryTileBoundary) {
  KL_REQUIRE_WGMMA();
  sweep({1, 63, 65, 127, 129, 257}, false, FastBackwardPath::WgmmaTma);
}

// wgmma-tma at d = 128 takes 80 query rows a step (dQ^T = K^T dS^T, one dQ stage): 79 | 80 | 81 and 159 | 160 | 161
// queries cross its boundaries (the last tile's rows past Lq clipped by the maps), against keys on both sides of the
// 128-key tile, both masks (causal bottom-right: Lq > Lk leaves rows that see nothing), both dtypes.
TEST(FlashAttentionBackwardFast, WgmmaTma80RowStepsAroundEveryTileBoundary) {
  KL_REQUIRE_WGMMA();
  int index = 0;
  for (const char* dtype : {"bf16", "fp16"})
    for (int Lq : {79, 80, 81, 159, 160, 161, 257})
      for (int Lk : {1, 127, 129, 300})
        for (bool causal : {false, true}) {
          Case c;
          const int* bh = kBatchHeads[index++ % 6];
          c.B = bh[0], c.H = bh[1], c.Lq = Lq, c.Lk = Lk, c.d = 128, c.causal = causal, c.dtype = dtype;
          c.deterministic = false, c.path = FastBackwardPath::WgmmaTma;
          check_case(c);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

TEST(FlashAttentionBackwardFast, WgmmaTmaPeakedSoftmaxAndLongRows) {
  KL_REQUIRE_WGMMA();
  peaked_and_long(FastBackwardPath::WgmmaTma);
}

TEST(FlashAttentionBackwardFast, WgmmaTmaCausalRowsThatSeeNothingOrOneKey) {
  KL_REQUIRE_WGMMA();
  causal_rows_that_see_little(FastBackwardPath::WgmmaTma);
}

// Case c on the wgmma path, then on wgmma-tma, from the same rounded inputs: {wgmma's, wgmma-tma's}.
std::pair<FastHostResult, FastHostResult> on_wgmma_then_tma(Case c) {
  const Inputs in = rounded_inputs(c);
  c.path = FastBackwardPath::Wgmma;
  FastHostResult w = run_case(c, in);
  c.path = FastBackwardPath::WgmmaTma;
  return {std::move(w), run_case(c, in)};
}

// Against the wgmma kernel on one input: dK and dV the same (the same products from the same registers; only how
// Q, dO and dS reach shared memory differs, not their bits; at d = 128 wgmma-tma steps 80 query
// rows, not 64, but dV and dK still take the same k16 products into the same accumulators in the same order), dQ to
// fp32 summation order.
TEST(FlashAttentionBackwardFast, WgmmaTmaAgreesWithWgmma) {
  KL_REQUIRE_WGMMA();
  for (const char* dtype : {"bf16", "fp16"})
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        Case c;
        c.B = 2, c.H = 2, c.Lq = 333, c.Lk = 444, c.d = d, c.causal = causal, c.scale = 1.0f / std::sqrt(float(d));
        c.dtype = dtype;
        c.deterministic = false;
        SCOPED_TRACE(c.text());
        const auto [w, x] = on_wgmma_then_tma(c);
        EXPECT_LT(test::rel_err(x.dk.data, std::vector<double>(w.dk.data.begin(), w.dk.data.end())), 1e-6);
        EXPECT_LT(test::rel_err(x.dv.data, std::vector<double>(w.dv.data.begin(), w.dv.data.end())), 1e-6);
        EXPECT_EQ(test::nan_count(x.dq.data), 0u);
        EXPECT_LT(test::rel_err(x.dq.data, std::vector<double>(w.dq.data.begin(), w.dq.data.end())),
                  c.dtype == "bf16" ? 1e-2 : 2e-3);
      }
}

// The deterministic mode on wgmma-tma (its dK/dV kernel's Q_i and dO_i by TMA, L_i and D_i by cp.async) against
// it on wgmma (the same kernel's body on cp.async loads), multi-head and grouped-query (4 query heads over 4 or 1
// kv heads), d = 64 and 128, both masks, Lq != Lk with tails: every output bit for bit (the same products of
// the same operands; the same dQ pass); and against the float64 reference around every tile boundary.
TEST(FlashAttentionBackwardFast, WgmmaTmaDeterministicModeIsWgmmasBitForBit) {
  KL_REQUIRE_WGMMA();
  for (int group : {1, 4})
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        Case c;
        c.B = 2, c.H = 4, c.Hkv = 4 / group, c.Lq = 333, c.Lk = 444, c.d = d, c.causal = causal;
        c.scale = 1.0f / std::sqrt(float(d));
        c.deterministic = true;
        SCOPED_TRACE(c.text());
        const auto [w, x] = on_wgmma_then_tma(c);
        EXPECT_EQ(x.dk.data, w.dk.data);
        EXPECT_EQ(x.dv.data, w.dv.data);
        EXPECT_EQ(x.dq.data, w.dq.data);
      }
  sweep({1, 64, 127, 129, 200, 257}, true, FastBackwardPath::WgmmaTma);
  grouped_query_sweep(FastBackwardPath::WgmmaTma, true);
}

// The deterministic mode's ordered adds (fast_backward_ordered_dq: wgmma-tma, plain heads, Lq and Lk from 512; on
// an H100/H200 the plans rotated without the mask, causal pairs under it): against the float64 reference with tails
// on both lengths (one tile past, Lq != Lk both ways; at the shortest lengths that run it, 512 and 700; at d = 128 on
// 80-row steps from 2049 without the mask, from 4097 under it), bf16 and fp16.
TEST(FlashAttentionBackwardFast, WgmmaTmaOrderedDqAgainstTheReference) {
  KL_REQUIRE_WGMMA();
  for (const char* dtype : {"bf16", "fp16"})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (auto [Lq, Lk] :
             {std::pair<int, int>{2049, 2177}, {2177, 2049}, {512, 700}, {700, 512}, {4097, 4225}, {4225, 4097}}) {
          if (Lq > 4096 && !(d == 128 && causal)) continue;  // the 80-row causal steps only
          Case c;
          c.B = 1, c.H = 1, c.Lq = Lq, c.Lk = Lk, c.d = d, c.causal = causal, c.dtype = dtype;
          c.deterministic = true, c.path = FastBackwardPath::WgmmaTma;
          check_case(c);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// The ordered adds run after run: the same bits (dQ, dK, dV), and against the atomic mode dQ to fp32 summation
// order, dK and dV to a rounding step (the ordered kernel's CTAs may walk their query tiles from another start,
// ordered_dq_start, so the fp32 sums of dK and dV differ in order too). Lk = 17000 is 133 tiles of 128 keys, more
// than an H200's 132 SMs: ascending turns without the mask, the last key tile launched first under it; 13 heads of
// 2048 keys are more heads than gangs (eight gangs of 16 CTAs on 132 SMs): five take two heads in turn, under the
// mask the second walked back on the paired K/V tile (at d = 64 its lightest tile a head of one step, the case that
// once raced for the dK/dV staging); on inputs too long for the float64 reference.
TEST(FlashAttentionBackwardFast, WgmmaTmaOrderedDqIsBitwiseRepeatable) {
  KL_REQUIRE_WGMMA();
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (auto [B, H, Lq, Lk] : {std::array<int, 4>{2, 2, 2100, 3000}, {1, 1, 17000, 17000}, {1, 13, 2048, 2048}}) {
        Case c;
        c.B = B, c.H = H, c.Lq = Lq, c.Lk = Lk, c.d = d, c.causal = causal, c.scale = 1.0f / std::sqrt(float(d));
        c.path = FastBackwardPath::WgmmaTma;
        SCOPED_TRACE(c.text());
        const Inputs in = rounded_inputs(c);
        c.deterministic = true;
        const FastHostResult a = run_case(c, in), b = run_case(c, in);
        expect_same_bits(a, b);
        c.deterministic = false;
        const FastHostResult x = run_case(c, in);
        EXPECT_LT(test::rel_err(a.dq.data, std::vector<double>(x.dq.data.begin(), x.dq.data.end())), 1e-2);
        EXPECT_LT(test::rel_err(a.dk.data, std::vector<double>(x.dk.data.begin(), x.dk.data.end())), 1e-2);
        EXPECT_LT(test::rel_err(a.dv.data, std::vector<double>(x.dv.data.begin(), x.dv.data.end())), 1e-2);
      }
}

// The default mode from L = 512 to kBwdAtomicFromL - 1 (d = 64 causal: to kBwdAtomicFromLCausal64 - 1; plain heads,
// wgmma-tma): the ordered kernel, so bit for bit the deterministic mode's result, run after run (Lq != Lk both ways,
// both masks, d = 64 and 128); at the top the atomic kernel again, within fp32 summation order of it.
TEST(FlashAttentionBackwardFast, WgmmaTmaDefaultModeBelowAtomicFromLIsTheOrderedKernel) {
  KL_REQUIRE_WGMMA();
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      const int kTop = causal && d == 64 ? kBwdAtomicFromLCausal64 : kBwdAtomicFromL;
      for (auto [Lq, Lk] : {std::pair<int, int>{600, kTop - 24}, {kTop - 24, 600}, {kTop, kTop}}) {
        Case c;
        c.B = 1, c.H = 3, c.Lq = Lq, c.Lk = Lk, c.d = d, c.causal = causal, c.scale = 1.0f / std::sqrt(float(d));
        c.path = FastBackwardPath::WgmmaTma;
        SCOPED_TRACE(c.text());
        const Inputs in = rounded_inputs(c);
        c.deterministic = true;
        const FastHostResult det = run_case(c, in);
        c.deterministic = false;
        const FastHostResult a = run_case(c, in);
        if (Lq < kTop) {
          expect_same_bits(a, det);
          expect_same_bits(run_case(c, in), det);
        } else {
          EXPECT_LT(test::rel_err(a.dq.data, std::vector<double>(det.dq.data.begin(), det.dq.data.end())), 1e-2);
          EXPECT_LT(test::rel_err(a.dk.data, std::vector<double>(det.dk.data.begin(), det.dk.data.end())), 1e-2);
        }
      }
    }
}

// ---- grouped-query attention in every path: mma.sync, wgmma, wgmma-tma; both dQ modes ----
TEST(FlashAttentionBackwardFast, GroupedQueryAtomicDq) {
  KL_REQUIRE_CUDA();
  grouped_query_sweep(FastBackwardPath::MmaSync, false);
}

TEST(FlashAttentionBackwardFast, GroupedQueryDeterministicDq) {
  KL_REQUIRE_CUDA();
  grouped_query_sweep(FastBackwardPath::MmaSync, true);
}

TEST(FlashAttentionBackwardFast, GroupedQueryDeterministicModeIsBitwiseRepeatable) {
  KL_REQUIRE_CUDA();
  grouped_query_bitwise_repeatable(FastBackwardPath::MmaSync);
}

TEST(FlashAttentionBackwardFast, GroupedQueryIsMultiHeadOnRepeatedKv) {
  KL_REQUIRE_CUDA();
  grouped_query_is_repeated_heads(FastBackwardPath::MmaSync);
}

TEST(FlashAttentionBackwardFast, WgmmaGroupedQueryAtomicDq) {
  KL_REQUIRE_WGMMA();
  grouped_query_sweep(FastBackwardPath::Wgmma, false);
}

TEST(FlashAttentionBackwardFast, WgmmaGroupedQueryDeterministicDq) {
  KL_REQUIRE_WGMMA();
  grouped_query_sweep(FastBackwardPath::Wgmma, true);
}

TEST(FlashAttentionBackwardFast, WgmmaGroupedQueryDeterministicModeIsBitwiseRepeatable) {
  KL_REQUIRE_WGMMA();
  grouped_query_bitwise_repeatable(FastBackwardPath::Wgmma);
}

TEST(FlashAttentionBackwardFast, WgmmaGroupedQueryIsMultiHeadOnRepeatedKv) {
  KL_REQUIRE_WGMMA();
  grouped_query_is_repeated_heads(FastBackwardPath::Wgmma);
}

TEST(FlashAttentionBackwardFast, WgmmaTmaGroupedQueryAtomicDq) {
  KL_REQUIRE_WGMMA();
  grouped_query_sweep(FastBackwardPath::WgmmaTma, false);
}

TEST(FlashAttentionBackwardFast, WgmmaTmaGroupedQueryIsMultiHeadOnRepeatedKv) {
  KL_REQUIRE_WGMMA();
  grouped_query_is_repeated_heads(FastBackwardPath::WgmmaTma);
}

// ---- head dimension 256: a dK/dV wgmma kernel of its own (64 keys a CTA, its warpgroups splitting the columns),
// which both wgmma paths run, then the wgmma dQ pass in both dQ modes; its 64-key and 64-query tiles and the dQ
// pass's (128 rows, 48 keys) get their boundary lengths ----
TEST(FlashAttentionBackwardFast, D256DefaultModeAroundEveryTileBoundary) {
  KL_REQUIRE_WGMMA();
  sweep({1, 63, 65, 97, 128, 200}, false, FastBackwardPath::WgmmaTma, {256});
}

TEST(FlashAttentionBackwardFast, D256DeterministicDqAroundEveryTileBoundary) {
  KL_REQUIRE_WGMMA();
  sweep({1, 49, 64, 129}, true, FastBackwardPath::Wgmma, {256});
}

TEST(FlashAttentionBackwardFast, D256PeakedSoftmaxAndLongRows) {
  KL_REQUIRE_WGMMA();
  peaked_and_long(FastBackwardPath::Wgmma, {256});
}

TEST(FlashAttentionBackwardFast, D256CausalRowsThatSeeNothingOrOneKey) {
  KL_REQUIRE_WGMMA();
  causal_rows_that_see_little(FastBackwardPath::WgmmaTma, {256});
}

TEST(FlashAttentionBackwardFast, D256DeterministicModeIsBitwiseRepeatable) {
  KL_REQUIRE_WGMMA();
  bitwise_repeatable(FastBackwardPath::WgmmaTma, {256});
}

TEST(FlashAttentionBackwardFast, D256GroupedQueryDefaultMode) {
  KL_REQUIRE_WGMMA();
  grouped_query_sweep(FastBackwardPath::WgmmaTma, false, {256});
}

TEST(FlashAttentionBackwardFast, D256GroupedQueryDeterministicDq) {
  KL_REQUIRE_WGMMA();
  grouped_query_sweep(FastBackwardPath::Wgmma, true, {256});
}

TEST(FlashAttentionBackwardFast, D256GroupedQueryDeterministicModeIsBitwiseRepeatable) {
  KL_REQUIRE_WGMMA();
  grouped_query_bitwise_repeatable(FastBackwardPath::WgmmaTma, {256});
}

TEST(FlashAttentionBackwardFast, D256GroupedQueryIsMultiHeadOnRepeatedKv) {
  KL_REQUIRE_WGMMA();
  grouped_query_is_repeated_heads(FastBackwardPath::WgmmaTma, {256});
}

// The mma.sync path has no d = 256 kernel: asked for one, a line naming d, its value and what runs it.
TEST(FlashAttentionBackwardFast, D256RefusedOnMmaSync) {
  KL_REQUIRE_CUDA();
  Case c;
  c.Lq = c.Lk = 65, c.d = 256, c.path = FastBackwardPath::MmaSync;
  c.scale = 1.0f / 16;
  const Inputs in = rounded_inputs(c);
  try {
    run_case(c, in);
    FAIL() << "d = 256 ran on mma.sync";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("d=256"), std::string::npos) << what;
    EXPECT_NE(what.find("{64, 128} on the mma.sync path"), std::string::npos) << what;
    EXPECT_NE(what.find("wgmma kernel only"), std::string::npos) << what;
  }
}

// `run flash-attention-backward --variant fast` with k, v of fewer heads than q: dk, dv of k's shape.
TEST(FlashAttentionBackwardFast, RegistryRunsGroupedQuery) {
  KL_REQUIRE_CUDA();
  KernelRunRequest r;
  r.backend = Backend::Cuda;
  r.variant = "fast";
  const KernelEntry e = entry();
  r.params = ParamValues(e.params);
  r.params.set("causal=1");
  const int64_t B = 2, H = 8, Hkv = 2, Lq = 33, Lk = 80, d = 64;
  r.inputs["q"] = make_array({B, H, Lq, d}, test::random_floats(size_t(B * H * Lq * d)));
  r.inputs["do"] = make_array({B, H, Lq, d}, test::random_floats(size_t(B * H * Lq * d)));
  r.inputs["k"] = make_array({B, Hkv, Lk, d}, test::random_floats(size_t(B * Hkv * Lk * d)));
  r.inputs["v"] = make_array({B, Hkv, Lk, d}, test::random_floats(size_t(B * Hkv * Lk * d)));
  const KernelRunResult res = e.run(r);
  EXPECT_EQ(res.outputs.at("dq").shape, (std::vector<int64_t>{B, H, Lq, d}));
  EXPECT_EQ(res.outputs.at("dk").shape, (std::vector<int64_t>{B, Hkv, Lk, d}));
  EXPECT_EQ(res.outputs.at("dv").shape, (std::vector<int64_t>{B, Hkv, Lk, d}));
  for (const char* name : {"dq", "dk", "dv"}) EXPECT_EQ(test::nan_count(res.outputs.at(name).data), 0u) << name;
}

// The two main kernels on one input: dK and dV within a few ulps of each other (both fp32 sums of the same
// rounded P, dS; different order), dQ too.
TEST(FlashAttentionBackwardFast, WgmmaAgreesWithMmaSync) {
  KL_REQUIRE_WGMMA();
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      Case c;
      c.B = 1, c.H = 3, c.Lq = 333, c.Lk = 444, c.d = d, c.causal = causal, c.scale = 1.0f / std::sqrt(float(d));
      c.deterministic = true;
      SCOPED_TRACE(c.text());
      const Inputs in = rounded_inputs(c);
      c.path = FastBackwardPath::MmaSync;
      const FastHostResult a = run_case(c, in);
      c.path = FastBackwardPath::Wgmma;
      const FastHostResult w = run_case(c, in);
      for (const auto& [name, x, y] : {std::tuple<const char*, const Array*, const Array*>{"dq", &a.dq, &w.dq},
                                       {"dk", &a.dk, &w.dk},
                                       {"dv", &a.dv, &w.dv}})
        EXPECT_LT(test::rel_err(y->data, std::vector<double>(x->data.begin(), x->data.end())), 1e-2) << name;
    }
}

// The kernel choice: by default (unset or auto) wgmma where it runs, else mma.sync; mma.sync with
// KL_FLASH_BWD_PATH=mma; wgmma when asked where it runs, an InputError naming the setting where it does not;
// another value refused. Runs without a device too.
TEST(FlashAttentionBackwardFast, PathChoice) {
  const bool wgmma = fast_backward_wgmma_available();
  std::printf("wgmma backward on this device: %s\n", wgmma ? "yes" : "no");
  const FastBackwardPath fallback = wgmma ? FastBackwardPath::WgmmaTma : FastBackwardPath::MmaSync;
  unsetenv("KL_FLASH_BWD_PATH");
  EXPECT_EQ(fast_backward_path(), fallback);  // unset: the default
  {
    ScopedEnv env("KL_FLASH_BWD_PATH", "auto");
    EXPECT_EQ(fast_backward_path(), fallback);
    EXPECT_EQ(fast_backward_path(FastBackwardPath::MmaSync), FastBackwardPath::MmaSync);
  }
  {
    ScopedEnv env("KL_FLASH_BWD_PATH", "mma");
    EXPECT_EQ(fast_backward_path(), FastBackwardPath::MmaSync);
  }
  {
    ScopedEnv env("KL_FLASH_BWD_PATH", "tensor-magic");
    EXPECT_THROW(fast_backward_path(), InputError);
  }
  {
    ScopedEnv env("KL_FLASH_BWD_PATH", "wgmma-bulk");  // the removed candidate: refused, with what is allowed
    try {
      fast_backward_path();
      FAIL() << "wgmma-bulk accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("mma, wgmma, wgmma-tma or auto"), std::string::npos) << e.what();
    }
  }
  for (const char* name : {"wgmma", "wgmma-tma"}) {
    SCOPED_TRACE(name);
    const FastBackwardPath want = std::string(name) == "wgmma" ? FastBackwardPath::Wgmma : FastBackwardPath::WgmmaTma;
    ScopedEnv env("KL_FLASH_BWD_PATH", name);
    if (wgmma) {
      EXPECT_EQ(fast_backward_path(), want);
      EXPECT_EQ(fast_backward_path(FastBackwardPath::MmaSync), FastBackwardPath::MmaSync);  // explicit wins
    } else {
      try {
        fast_backward_path();
        FAIL() << name << " accepted without sm_90a code";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("KL_FLASH_BWD_PATH=") + name + ":"), std::string::npos)
            << e.what();
      }
      EXPECT_THROW(fast_backward_path(want), InputError);
    }
  }
}

// The forward's O and L given (rung 6's forward() on the host, from the rounded inputs) or computed
// on the device: both pass the rule.
TEST(FlashAttentionBackwardFast, GivenForwardState) {
  KL_REQUIRE_CUDA();
  for (int d : {64, 128}) {
    Case c;
    c.B = 1, c.H = 2, c.Lq = 150, c.Lk = 90, c.d = d, c.causal = true, c.scale = 0.1f;
    SCOPED_TRACE(c.text());
    const Inputs in = rounded_inputs(c);
    Shape s;
    s.batch = c.B, s.heads = c.H, s.lq = c.Lq, s.lk = c.Lk, s.d = c.d;
    Options opt;
    opt.causal = c.causal;
    opt.scale = c.scale;
    std::vector<float> o(in.q.size()), lse(size_t(s.bh() * s.lq));
    forward(Backend::Cpu, in.q.data(), in.k.data(), in.v.data(), o.data(), lse.data(), s, opt, 32, 32);
    const Array ao = make_array({c.B, c.H, c.Lq, c.d}, o), al = make_array({c.B, c.H, c.Lq}, lse);
    const FastHostResult got = run_case(c, in, &ao, &al);
    const Plain plain = plain_reference(c, in);
    const Exact exact = exact_reference(c, in);
    const double problem_max = std::max({max_abs(exact.dq), max_abs(exact.dk), max_abs(exact.dv)});
    expect_within_twice_plain("dq", got.dq.data, plain.dq, exact.dq, c.dtype, problem_max);
    expect_within_twice_plain("dk", got.dk.data, plain.dk, exact.dk, c.dtype, problem_max);
    expect_within_twice_plain("dv", got.dv.data, plain.dv, exact.dv, c.dtype, problem_max);
  }
}

// [L, d] and [H, L, d] are the B = 1 (and H = 1) cases of the same kernels.
TEST(FlashAttentionBackwardFast, LowerRankInputs) {
  KL_REQUIRE_CUDA();
  const int L = 70, d = 64;
  Case c;
  c.B = 1, c.H = 2, c.Lq = L, c.Lk = L, c.d = d, c.causal = true, c.scale = 0.125f, c.deterministic = true;
  const Inputs in = rounded_inputs(c);
  const FastHostResult r4 = run_case(c, in);
  const FastHostResult r3 = run_fast_host(make_array({2, L, d}, in.q), make_array({2, L, d}, in.k),
                                          make_array({2, L, d}, in.v), make_array({2, L, d}, in.dout), nullptr,
                                          nullptr, true, 0.125f, "bf16", true);
  EXPECT_EQ(r3.dq.shape, (std::vector<int64_t>{2, L, d}));
  EXPECT_EQ(r3.dq.data, r4.dq.data);
  EXPECT_EQ(r3.dk.data, r4.dk.data);
  auto head0 = [&](const std::vector<float>& x) { return std::vector<float>(x.begin(), x.begin() + L * d); };
  const FastHostResult r2 =
      run_fast_host(make_array({L, d}, head0(in.q)), make_array({L, d}, head0(in.k)), make_array({L, d}, head0(in.v)),
                    make_array({L, d}, head0(in.dout)), nullptr, nullptr, true, 0.125f, "bf16", true);
  EXPECT_EQ(r2.dv.shape, (std::vector<int64_t>{L, d}));
  EXPECT_EQ(r2.dv.data, head0(r4.dv.data));
}

// `run flash-attention-backward --variant fast` through the registry entry: dq, dk, dv of the right shapes.
TEST(FlashAttentionBackwardFast, RegistryRunsTheFastVariant) {
  KL_REQUIRE_CUDA();
  KernelRunRequest r;
  r.backend = Backend::Cuda;
  r.variant = "fast";
  const KernelEntry e = entry();
  r.params = ParamValues(e.params);
  r.params.set("causal=1");
  r.params.set("deterministic=1");
  const int64_t B = 1, H = 2, Lq = 33, Lk = 80, d = 128;
  r.inputs["q"] = make_array({B, H, Lq, d}, test::random_floats(size_t(B * H * Lq * d)));
  r.inputs["do"] = make_array({B, H, Lq, d}, test::random_floats(size_t(B * H * Lq * d)));
  r.inputs["k"] = make_array({B, H, Lk, d}, test::random_floats(size_t(B * H * Lk * d)));
  r.inputs["v"] = make_array({B, H, Lk, d}, test::random_floats(size_t(B * H * Lk * d)));
  const KernelRunResult res = e.run(r);
  ASSERT_EQ(res.outputs.count("dq"), 1u);
  EXPECT_EQ(res.outputs.at("dq").shape, (std::vector<int64_t>{B, H, Lq, d}));
  EXPECT_EQ(res.outputs.at("dk").shape, (std::vector<int64_t>{B, H, Lk, d}));
  EXPECT_EQ(res.outputs.at("dv").shape, (std::vector<int64_t>{B, H, Lk, d}));
  EXPECT_EQ(test::nan_count(res.outputs.at("dq").data), 0u);
}

TEST(FlashAttentionBackwardFast, BenchQuickGivesRows) {
  KL_REQUIRE_CUDA();
  std::vector<const char*> paths = {"mma"};
  if (fast_backward_wgmma_available()) paths.insert(paths.end(), {"wgmma", "wgmma-tma"});
  for (const char* path : paths) {
    ScopedEnv env("KL_FLASH_BWD_PATH", path);  // the bench times fast_backward_path()'s kernel
    const std::vector<bench::Row> rows = bench_fast(Backend::Cuda, true);
    // d in {64, 128} x causal in {no, yes} x dQ {atomic, deterministic}, L = 512; on the wgmma paths d = 256 x
    // causal in {no, yes}, one row each (dq=deterministic: both modes run the same launches there)
    const bool mma = std::string(path) == "mma";
    ASSERT_EQ(rows.size(), mma ? 8u : 10u);
    for (const bench::Row& r : rows) {
      SCOPED_TRACE(r.shape);
      const bool d256 = r.shape.find(" d=256 ") != std::string::npos;
      EXPECT_FALSE(mma && d256);
      if (d256) EXPECT_NE(r.shape.find(" dq=deterministic "), std::string::npos);
      const std::string name = std::string(" ") + (mma ? "mma.sync" : d256 ? "wgmma-d256" : path);
      EXPECT_EQ(r.variant, "fast");
      EXPECT_GT(r.ms, 0);
      EXPECT_GT(r.tflops, 0);
      EXPECT_EQ(r.shape.substr(r.shape.size() - name.size()), name);
    }
  }
}
#endif

// ---- [SECTION] CPU tests ------------------------------------------------------------------------------
// first_query_tile against brute force: the first query tile with a row that sees a key of the K/V tile.
TEST(FlashAttentionBackwardFastHost, FirstQueryTileIsTheFirstThatSeesTheBlock) {
  for (bool causal : {false, true})
    for (int Lq : {1, 17, 63, 64, 65, 130, 300})
      for (int Lk : {1, 17, 63, 64, 65, 130, 300})
        for (int bm : {16, 64})
          for (int bn : {16, 64})
            for (int nb = 0; nb < flash_attention::ceil_div(Lk, bn); ++nb) {
              const int m_blocks = flash_attention::ceil_div(Lq, bm);
              int want = m_blocks;
              for (int mb = m_blocks - 1; mb >= 0; --mb) {
                bool sees = false;
                for (int i = mb * bm; i < std::min(Lq, mb * bm + bm) && !sees; ++i)
                  for (int j = nb * bn; j < std::min(Lk, nb * bn + bn) && !sees; ++j) sees = key_visible(i, j, Lq, Lk, causal);
                if (sees) want = mb;
                else if (want != m_blocks) break;  // tiles before the first that sees it see nothing
              }
              ASSERT_EQ(first_query_tile(nb, Lq, Lk, bm, bn, causal), want)
                  << "Lq=" << Lq << " Lk=" << Lk << " bm=" << bm << " bn=" << bn << " n_block=" << nb
                  << (causal ? " causal" : "");
            }
}

// The launch order: every (tile, unit) once; section 1 the grid's own order; inside a section, the tile the slow
// index, so each section's first CTAs are its units' tile 0 (the heaviest, for the dK/dV kernels).
TEST(FlashAttentionBackwardFastHost, CtaOrderVisitsEveryTileOnceHeaviestFirstPerSection) {
  for (int tiles : {1, 3, 16})
    for (int units : {1, 5, 8, 13})
      for (int section : {1, 2, 4, 8, 16}) {
        std::vector<int> seen(size_t(tiles * units), 0);
        for (int i = 0; i < tiles * units; ++i) {
          const BwdCtaAt at = bwd_cta_in_order(i, tiles, units, section);
          ASSERT_TRUE(at.tile >= 0 && at.tile < tiles && at.unit >= 0 && at.unit < units)
              << "i=" << i << " tiles=" << tiles << " units=" << units << " section=" << section;
          ++seen[size_t(at.unit * tiles + at.tile)];
          if (section == 1) EXPECT_TRUE(at.tile == i % tiles && at.unit == i / tiles) << "i=" << i;
          const int first = i / (section * tiles) * section;  // the section's first unit
          const int n = std::min(section, units - first);
          EXPECT_EQ(at.unit / section * section, first) << "i=" << i;
          EXPECT_EQ(at.tile, (i - first * tiles) / n) << "i=" << i << " tiles=" << tiles << " units=" << units;
        }
        for (int c : seen) ASSERT_EQ(c, 1) << "tiles=" << tiles << " units=" << units << " section=" << section;
      }
  // Sections: the largest power of two of units fitting 40 MiB. d = 128, L = 2048 (Q, dO, dQ: 2 MiB a head):
  // 16 heads; L = 16384: 2; a unit past the budget: 1; never more than the units.
  FastBackwardParams p;
  p.B = 8, p.H = 16, p.Lq = p.Lk = 2048, p.d = 128, p.causal = true;
  EXPECT_EQ(bwd_l2_section(int64_t(p.Lq) * p.d * 8, 128), 16);
  EXPECT_EQ(bwd_l2_section(int64_t(16384) * 128 * 8, 16), 2);
  EXPECT_EQ(bwd_l2_section(int64_t(64) << 20, 16), 1);
  EXPECT_EQ(bwd_l2_section(1024, 6), 4);
  // The dK/dV kernels under the mask: CTA 16 of the grid (16 tiles, 16 heads, 8 batches) is tile 1 of head 0
  // (the section's 16 heads take tile 0 first); without the mask, tile 0 of head 1 (the grid's order).
  BwdCta c = bwd_main_cta(p, 16, 16, 16, 8);
  EXPECT_TRUE(c.tile == 1 && c.h == 0 && c.b == 0) << c.tile << " " << c.h << " " << c.b;
  c = bwd_main_cta(p, 17, 16, 16, 8);
  EXPECT_TRUE(c.tile == 1 && c.h == 1 && c.b == 0) << c.tile << " " << c.h << " " << c.b;
  c = bwd_main_cta(p, 16 * 16 + 3, 16, 16, 8);  // the second section: batch 1
  EXPECT_TRUE(c.tile == 0 && c.h == 3 && c.b == 1) << c.tile << " " << c.h << " " << c.b;
  p.causal = false;
  c = bwd_main_cta(p, 16, 16, 16, 8);
  EXPECT_TRUE(c.tile == 0 && c.h == 1 && c.b == 0) << c.tile << " " << c.h << " " << c.b;
  p.causal = true, p.Lq = p.Lk = 1024;  // causal rows shorter than kBwdOrderFromLq: the grid's order too
  c = bwd_main_cta(p, 16, 16, 16, 8);
  EXPECT_TRUE(c.tile == 0 && c.h == 1 && c.b == 0) << c.tile << " " << c.h << " " << c.b;
}

// ---- [SECTION] CPU: the deterministic mode's ordered dQ adds, simulated ---------------------------------
// The ordered kernel's protocol (flash_attention_backward_fast_ordered_sm90.cuh) over whole launches: B * H
// heads of N K/V CTAs, started in grid order (x fastest; `reverse` maps column x to tile N - 1 - x) as slots free
// on `sms` multiprocessors, one CTA each; with the plan's gangs, min(gang, heads) x N CTAs, CTA (j, g) taking tile j
// of heads g, g + gangs, ... one after another. A CTA walks its tiles from ordered_dq_start (wrapping at M); its dQ
// warp waits for its turn at each tile in that order, adds, and counts the turn up (the kernel has two dQ warps, one
// per consumer warpgroup, each walking the same tiles on a counter of its own: one counter stands for either). Every
// resident CTA takes one action per round, in an order shuffled each round. Checked, for 64- and 128-row query tiles:
// no launch deadlocks; each query tile's counter ends at the number of K/V tiles that see it (first_query_tile), so
// every one of them added exactly once, in rank order; the ranks at a tile are 0 .. count - 1. And the accumulator it
// leaves, as a count of adds per tile: left as it was (garbage) but the rows ordered_dq_unreached_rows zeroes, each
// tile's rank 0 storing, the rest adding: every tile ends at its count, and no add lands on garbage.
TEST(FlashAttentionBackwardFastHost, OrderedDqAddsCompleteInRankOrder) {
  constexpr int BN = 128;
  struct Cta {
    std::vector<int> tiles, heads, js;  // the (query tile, head, K/V tile) of each step
    std::vector<bool> flipped;          // the step's head walked back (CausalPairs' odd heads)
    size_t next = 0;
  };
  uint32_t rng = 12345u;
  auto rand_below = [&](uint32_t n) {
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) % n;
  };
  auto run = [&](int BM, int heads, int Lq, int Lk, bool causal, int sms) {
    const int N = flash_attention::ceil_div(Lk, BN), M = flash_attention::ceil_div(Lq, BM);
    const OrderedDq plan = ordered_dq_plan(Lq, Lk, BM, BN, causal, sms);
    SCOPED_TRACE("BM=" + std::to_string(BM) + " heads=" + std::to_string(heads) + " Lq=" + std::to_string(Lq) +
                 " Lk=" + std::to_string(Lk) + (causal ? " causal" : "") + " sms=" + std::to_string(sms) +
                 " mode=" + std::to_string(int(plan.mode)) + " reverse=" + std::to_string(plan.reverse) +
                 " gang=" + std::to_string(plan.gang));
    for (bool flipped : {false, true})
      for (int m = 0; m < M; ++m) {
        std::vector<int> ranks;
        for (int j = 0; j < N; ++j)
          if (first_query_tile(j, Lq, Lk, BM, BN, causal) <= m)
            ranks.push_back(ordered_dq_rank(plan, m, j, Lq, Lk, BM, BN, flipped && ordered_dq_flipped(plan, 1)));
        std::sort(ranks.begin(), ranks.end());
        for (size_t r = 0; r < ranks.size(); ++r) ASSERT_EQ(ranks[r], int(r)) << "tile " << m;
      }
    std::vector<int> counters(size_t(heads) * M, 0);
    constexpr int kGarbage = -1000000;
    std::vector<int> acc(size_t(heads) * M, kGarbage);
    const int unreached = ordered_dq_unreached_rows(Lq, Lk, BM, BN, causal);
    for (int head = 0; head < heads; ++head)
      for (int m = 0; m * BM < unreached; ++m) acc[size_t(head) * M + m] = 0;
    const int gangs = plan.gang ? std::min(plan.gang, heads) : 0;
    auto make = [&](int linear) {
      Cta c;
      int k = 0;  // the CTA's k-th head
      for (int head = linear / N; head < heads; head += gangs ? gangs : heads, ++k) {
        const int j = ordered_dq_tile(plan, linear % N, k, N);
        const bool flipped = ordered_dq_flipped(plan, k);
        const int first = first_query_tile(j, Lq, Lk, BM, BN, causal);
        const int start = ordered_dq_start(plan, j, first, M);
        for (int s = 0; s < M - first; ++s) {
          c.tiles.push_back(ordered_dq_step_tile(start, flipped, M, s)), c.heads.push_back(head);
          c.js.push_back(j), c.flipped.push_back(flipped);
        }
      }
      return c;
    };
    std::vector<Cta> resident;
    int launched = 0;
    const int total = (gangs ? gangs : heads) * N;
    for (int round = 0;; ++round) {
      while (int(resident.size()) < sms && launched < total) resident.push_back(make(launched++));
      if (resident.empty()) break;
      bool moved = false;
      for (size_t i = resident.size(); i > 1; --i) std::swap(resident[i - 1], resident[rand_below(uint32_t(i))]);
      for (Cta& c : resident) {
        if (c.next == c.tiles.size()) continue;
        int& counter = counters[size_t(c.heads[c.next]) * M + c.tiles[c.next]];
        const int rank = ordered_dq_rank(plan, c.tiles[c.next], c.js[c.next], Lq, Lk, BM, BN, c.flipped[c.next]);
        if (counter != rank) continue;  // not its turn yet
        int& a = acc[size_t(c.heads[c.next]) * M + c.tiles[c.next]];
        ASSERT_TRUE(rank == 0 || a >= 0) << "an add onto garbage at tile " << c.tiles[c.next];
        a = rank == 0 ? 1 : a + 1;
        ++counter;
        ++c.next;
        moved = true;
      }
      const size_t before = resident.size();
      resident.erase(std::remove_if(resident.begin(), resident.end(), [](const Cta& c) { return c.next == c.tiles.size(); }),
                     resident.end());
      ASSERT_TRUE(moved || resident.size() < before) << "deadlock in round " << round;
    }
    for (int head = 0; head < heads; ++head)
      for (int m = 0; m < M; ++m) {
        int want = 0;
        for (int j = 0; j < N; ++j) want += first_query_tile(j, Lq, Lk, BM, BN, causal) <= m ? 1 : 0;
        ASSERT_EQ(counters[size_t(head) * M + m], want) << "head " << head << " tile " << m;
        ASSERT_EQ(acc[size_t(head) * M + m], want) << "head " << head << " tile " << m;
        ASSERT_EQ(want == 0, m * BM < unreached) << "head " << head << " tile " << m;
      }
  };
  for (int BM : {64, 80, 128})
    for (bool causal : {false, true})
      for (int sms : {1, 3, 8, 132})
        for (auto [Lq, Lk] : {std::pair<int, int>{1, 1}, {64, 128}, {777, 1000}, {1000, 777}, {2048, 2048},
                              {130, 2000}, {500, 17}, {17, 500}, {4096, 4096}})
          for (int heads : {1, 3, 7}) {
            run(BM, heads, Lq, Lk, causal, sms);
            if (::testing::Test::HasFatalFailure()) return;
          }
  EXPECT_EQ(ordered_dq_plan(4096, 4096, 64, BN, false, 132).mode, OrderedDqMode::Rotated);
  EXPECT_EQ(ordered_dq_plan(4096, 4096, 64, BN, false, 132).shift, 2);
  EXPECT_EQ(ordered_dq_plan(4096, 4096, 64, BN, false, 132).gang, 4);  // 32 K/V tiles: four gangs on 132 SMs
  EXPECT_EQ(ordered_dq_plan(32768, 32768, 64, BN, false, 132).mode, OrderedDqMode::Ascending);
  // Under the mask: causal pairs in gangs where a head's K/V tiles fit the SMs (32 of them: four gangs; 64: two),
  // else the causal order, last key tile first.
  EXPECT_EQ(ordered_dq_plan(4096, 4096, 64, BN, true, 132).mode, OrderedDqMode::CausalPairs);
  EXPECT_EQ(ordered_dq_plan(4096, 4096, 64, BN, true, 132).gang, 4);
  EXPECT_EQ(ordered_dq_plan(8192, 8192, 64, BN, true, 132).gang, 2);
  EXPECT_EQ(ordered_dq_plan(32768, 32768, 64, BN, true, 132).mode, OrderedDqMode::Causal);
  EXPECT_EQ(ordered_dq_plan(32768, 32768, 64, BN, true, 132).reverse, 1);
  EXPECT_EQ(ordered_dq_plan(64, 64, 64, BN, true, 132).mode, OrderedDqMode::Causal);  // one K/V tile
}

// Which kernel adds dQ (pure predicates, as run_fast resolves p): the deterministic mode's ordered adds from
// Lq, Lk = 512 on wgmma-tma with plain heads, d = 64 and 128, and an accumulator; the default mode on the same
// kernel where both lengths are also below kBwdAtomicFromL (d = 64 causal: kBwdAtomicFromLCausal64); everything
// else on the pass or the atomic kernel.
TEST(FlashAttentionBackwardFastHost, OrderedKernelRunsWhereItMeasuredFaster) {
  float accum = 0;
  FastBackwardParams p;
  p.B = 1, p.H = 2, p.Lq = p.Lk = 512, p.d = 128, p.path = FastBackwardPath::WgmmaTma, p.dq_accum = &accum;
  EXPECT_TRUE(fast_backward_default_runs_ordered(p));
  p.Lq = kBwdAtomicFromL - 1, p.Lk = 600;
  EXPECT_TRUE(fast_backward_default_runs_ordered(p));
  for (auto [Lq, Lk] : {std::pair<int, int>{kBwdAtomicFromL, 600}, {600, kBwdAtomicFromL}, {511, 600}, {600, 511},
                        {4096, 4096}}) {
    p.Lq = Lq, p.Lk = Lk;
    EXPECT_FALSE(fast_backward_default_runs_ordered(p)) << Lq << " " << Lk;
  }
  p.causal = true;  // d = 128 under the mask: below kBwdAtomicFromL, as without it
  p.Lq = p.Lk = kBwdAtomicFromL - 1;
  EXPECT_TRUE(fast_backward_default_runs_ordered(p));
  p.Lq = p.Lk = kBwdAtomicFromL;
  EXPECT_FALSE(fast_backward_default_runs_ordered(p));
  p.d = 64;  // d = 64 under the mask: up to kBwdAtomicFromLCausal64 - 1
  p.Lq = kBwdAtomicFromL, p.Lk = kBwdAtomicFromLCausal64 - 1;
  EXPECT_TRUE(fast_backward_default_runs_ordered(p));
  for (auto [Lq, Lk] :
       {std::pair<int, int>{kBwdAtomicFromLCausal64, 600}, {600, kBwdAtomicFromLCausal64}, {511, 600}}) {
    p.Lq = Lq, p.Lk = Lk;
    EXPECT_FALSE(fast_backward_default_runs_ordered(p)) << Lq << " " << Lk;
  }
  p.causal = false, p.d = 128;
  p.Lq = p.Lk = 512;
  FastBackwardParams q = p;
  q.deterministic = true;  // the mode itself: the ordered kernel from 512 on
  EXPECT_FALSE(fast_backward_default_runs_ordered(q));
  EXPECT_TRUE(fast_backward_ordered_dq(q));
  q.Lq = q.Lk = 16384;
  EXPECT_TRUE(fast_backward_ordered_dq(q));
  q.Lq = 511;
  EXPECT_FALSE(fast_backward_ordered_dq(q));
  EXPECT_TRUE(fast_backward_dq_by_pass(q));
  for (auto change : std::vector<void (*)(FastBackwardParams&)>{
           [](FastBackwardParams& x) { x.d = 256; }, [](FastBackwardParams& x) { x.H_kv = 1; },
           [](FastBackwardParams& x) { x.path = FastBackwardPath::Wgmma; },
           [](FastBackwardParams& x) { x.dq_accum = nullptr; }}) {
    FastBackwardParams x = p;
    change(x);
    EXPECT_FALSE(fast_backward_default_runs_ordered(x));
  }
  EXPECT_FALSE(fast_backward_ordered_dq(p));  // the default mode's own predicate: run_fast sets deterministic
}

// Where wgmma-tma takes 80 query rows a step (fast_backward_steps80, as run_fast resolves p): d = 128 on plain heads;
// the atomic kernel at every length under both masks; the ordered kernel from kBwdAtomicFromL without the mask and
// from kBwdOrdered80CausalFromL under it (64 rows below, where 80 read slower); never where the maps were refused, at
// d = 64 or 256, or on grouped-query heads.
TEST(FlashAttentionBackwardFastHost, EightyRowStepsWhereTheyMeasuredFaster) {
  float accum = 0;
  FastBackwardParams p;
  p.B = 1, p.H = 2, p.d = 128, p.path = FastBackwardPath::WgmmaTma, p.dq_accum = &accum;
  for (bool causal : {false, true})
    for (int L : {1, 512, 2047, 2048, 16384}) {
      p.causal = causal, p.Lq = p.Lk = L;
      EXPECT_TRUE(fast_backward_steps80(p, true)) << "atomic, causal " << causal << " L " << L;
      EXPECT_FALSE(fast_backward_steps80(p, false)) << "maps refused, causal " << causal << " L " << L;
    }
  p.deterministic = true;  // the ordered kernel (from Lq, Lk = 512)
  for (bool causal : {false, true}) {
    p.causal = causal;
    const int from = causal ? kBwdOrdered80CausalFromL : kBwdAtomicFromL;
    for (auto [Lq, Lk, steps80] : {std::tuple<int, int, bool>{from, from, true}, {16384, from, true},
                                   {from - 1, from, false}, {from, from - 1, false}, {512, 512, false}}) {
      p.Lq = Lq, p.Lk = Lk;
      ASSERT_TRUE(fast_backward_ordered_dq(p)) << Lq << " " << Lk;
      EXPECT_EQ(fast_backward_steps80(p, true), steps80) << "ordered, causal " << causal << " " << Lq << " " << Lk;
    }
  }
  EXPECT_GT(kBwdOrdered80CausalFromL, kBwdAtomicFromL);  // under the mask 80 rows read 0.95x at 2048
  p.Lq = p.Lk = 8192;
  for (auto change : std::vector<void (*)(FastBackwardParams&)>{[](FastBackwardParams& x) { x.d = 64; },
                                                                [](FastBackwardParams& x) { x.d = 256; },
                                                                [](FastBackwardParams& x) { x.H_kv = 1; }})
    for (bool det : {false, true}) {
      FastBackwardParams x = p;
      x.deterministic = det;
      change(x);
      EXPECT_FALSE(fast_backward_steps80(x, true)) << "d " << x.d << " H_kv " << x.H_kv << " det " << det;
    }
}

// ---- [SECTION] CPU: the kernels' fragment addressing, on an emulated warp -------------------------------
// ldmatrix.x4 and mma.m16n8k16 as the PTX ISA defines them (g = lane / 4, t = lane % 4): matrix i's row r
// comes from the address of lane 8i + r; register i of lane l holds matrix i's (row l/4, columns 2(l%4)..+1),
// with .trans its (rows 2(l%4)..+1, column l/4). A regs: a0 (g, 2t..) a1 (g+8, 2t..) a2 (g, 2t+8..)
// a3 (g+8, 2t+8..); B: b0 (k 2t.., n g) b1 (k 2t+8.., n g); C: c0 c1 (g, 2t..) c2 c3 (g+8, 2t..).
// One step of the main kernel (all 8 warps: S, dP, the P / dS store, dV, dK, dQ) and of the dQ pass
// (4 warps, dS as the A operand from the accumulators) through frag::'s addresses, against plain products.
using Reg = std::array<double, 2>;
using WarpRegs = std::array<std::array<Reg, 4>, 32>;
using Acc = std::array<std::array<double, 4>, 32>;

struct Tile {
  int rows, row_len;
  std::vector<double> dense, swz;  // [rows][row_len] and the swizzled copy the kernel's shared memory holds
};
Tile make_tile(int rows, int row_len) {
  const std::vector<float> r = test::random_floats(size_t(rows) * row_len);
  Tile t{rows, row_len, std::vector<double>(r.begin(), r.end()), {}};
  t.swz.assign(t.dense.size(), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < row_len; ++c) t.swz[size_t(frag::swizzled(row_len, r, c >> 3) + (c & 7))] = t.dense[size_t(r * row_len + c)];
  return t;
}

template <class F>
WarpRegs ldmatrix_x4(const std::vector<double>& swz, bool trans, F offset) {
  WarpRegs out{};
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) {
      const int r0 = trans ? 2 * (l % 4) : l / 4, c0 = trans ? l / 4 : 2 * (l % 4);
      for (int h = 0; h < 2; ++h) {
        const int r = trans ? r0 + h : r0, c = trans ? c0 : c0 + h;
        out[size_t(l)][size_t(i)][size_t(h)] = swz[size_t(offset(8 * i + r) + c)];
      }
    }
  return out;
}

void mma(Acc& acc, const WarpRegs& a, const WarpRegs& b, int b_lo) {  // B regs b_lo, b_lo + 1 of `b`
  double A[16][16] = {}, B[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = a[size_t(l)][0][size_t(h)];
      A[g + 8][2 * t + h] = a[size_t(l)][1][size_t(h)];
      A[g][2 * t + 8 + h] = a[size_t(l)][2][size_t(h)];
      A[g + 8][2 * t + 8 + h] = a[size_t(l)][3][size_t(h)];
      B[2 * t + h][g] = b[size_t(l)][size_t(b_lo)][size_t(h)];
      B[2 * t + 8 + h][g] = b[size_t(l)][size_t(b_lo + 1)][size_t(h)];
    }
  }
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) {
      const int m = l / 4 + 8 * (e >> 1), n = 2 * (l % 4) + (e & 1);
      for (int k = 0; k < 16; ++k) acc[size_t(l)][size_t(e)] += A[m][k] * B[k][n];
    }
}

double dense_product(const Tile& x, bool x_t, const Tile& y, bool y_t, int i, int j) {  // (op(X) op(Y))[i][j]
  const int inner = x_t ? x.rows : x.row_len;
  double acc = 0;
  for (int k = 0; k < inner; ++k) {
    const double a = x_t ? x.dense[size_t(k * x.row_len + i)] : x.dense[size_t(i * x.row_len + k)];
    const double b = y_t ? y.dense[size_t(j * y.row_len + k)] : y.dense[size_t(k * y.row_len + j)];
    acc += a * b;
  }
  return acc;
}

// acc[j] holds rows row0 + g (+8), columns col0 + 8j + 2t (+1) of `want` (i, j) -> value.
template <class F>
void expect_acc(const std::vector<Acc>& acc, int row0, int col0, F want, const char* what) {
  for (size_t j = 0; j < acc.size(); ++j)
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + l / 4 + 8 * (e >> 1), c = col0 + int(j) * 8 + 2 * (l % 4) + (e & 1);
        ASSERT_NEAR(acc[j][size_t(l)][size_t(e)], want(r, c), 1e-9) << what << " row " << r << " col " << c;
      }
}

void emulate_main_step(int D) {
  constexpr int BM = 64, BN = 64;
  const int half = D / 2;
  const Tile Q = make_tile(BM, D), dO = make_tile(BM, D), K = make_tile(BN, D), V = make_tile(BN, D);
  Tile P{BM, BN, std::vector<double>(BM * BN), std::vector<double>(BM * BN)}, dS = P;
  for (int warp = 0; warp < 8; ++warp) {  // S = Q K^T, dP = dO V^T; stored as the kernel stores P and dS
    const int wr = warp & 3, wc = warp >> 2;
    std::vector<Acc> s(4, Acc{}), dp(4, Acc{});
    for (int kk = 0; kk < D / 16; ++kk) {
      auto a_at = [&](int lane) { return wr * 16 * D + frag::a_offset(D, lane, kk); };
      const WarpRegs aq = ldmatrix_x4(Q.swz, false, a_at), ado = ldmatrix_x4(dO.swz, false, a_at);
      for (int nn = 0; nn < 2; ++nn) {
        auto b_at = [&](int lane) { return frag::b_rows_are_n_offset(D, lane, kk, wc * 32 + nn * 16); };
        const WarpRegs bk = ldmatrix_x4(K.swz, false, b_at), bv = ldmatrix_x4(V.swz, false, b_at);
        mma(s[size_t(2 * nn)], aq, bk, 0);
        mma(s[size_t(2 * nn + 1)], aq, bk, 2);
        mma(dp[size_t(2 * nn)], ado, bv, 0);
        mma(dp[size_t(2 * nn + 1)], ado, bv, 2);
      }
    }
    expect_acc(s, wr * 16, wc * 32, [&](int i, int j) { return dense_product(Q, false, K, true, i, j); }, "S");
    expect_acc(dp, wr * 16, wc * 32, [&](int i, int j) { return dense_product(dO, false, V, true, i, j); }, "dP");
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 4; ++e) {
          const int srow = wr * 16 + l / 4 + 8 * (e >> 1), col = wc * 32 + j * 8 + 2 * (l % 4) + (e & 1);
          const size_t off = size_t(frag::swizzled(BN, srow, col >> 3) + (col & 7));
          P.swz[off] = s[size_t(j)][size_t(l)][size_t(e)];
          dS.swz[off] = dp[size_t(j)][size_t(l)][size_t(e)];
          P.dense[size_t(srow * BN + col)] = s[size_t(j)][size_t(l)][size_t(e)];
          dS.dense[size_t(srow * BN + col)] = dp[size_t(j)][size_t(l)][size_t(e)];
        }
  }
  for (int warp = 0; warp < 8; ++warp) {  // dV += P^T dO, dK += dS^T Q, dQ = dS K
    const int wr = warp & 3, wc = warp >> 2;
    std::vector<Acc> dv(size_t(half / 8), Acc{}), dk = dv, dq = dv;
    for (int kk = 0; kk < BM / 16; ++kk) {
      auto at_at = [&](int lane) { return frag::a_trans_offset(BN, lane, kk, wr * 16); };
      const WarpRegs ap = ldmatrix_x4(P.swz, true, at_at), ads = ldmatrix_x4(dS.swz, true, at_at);
      for (int dn = 0; dn < half / 16; ++dn) {
        auto b_at = [&](int lane) { return frag::b_rows_are_k_offset(D, lane, kk, wc * half + dn * 16); };
        const WarpRegs bdo = ldmatrix_x4(dO.swz, true, b_at), bq = ldmatrix_x4(Q.swz, true, b_at);
        mma(dv[size_t(2 * dn)], ap, bdo, 0);
        mma(dv[size_t(2 * dn + 1)], ap, bdo, 2);
        mma(dk[size_t(2 * dn)], ads, bq, 0);
        mma(dk[size_t(2 * dn + 1)], ads, bq, 2);
      }
    }
    for (int kk = 0; kk < BN / 16; ++kk) {
      const WarpRegs a =
          ldmatrix_x4(dS.swz, false, [&](int lane) { return wr * 16 * BN + frag::a_offset(BN, lane, kk); });
      for (int dn = 0; dn < half / 16; ++dn) {
        const WarpRegs bk = ldmatrix_x4(
            K.swz, true, [&](int lane) { return frag::b_rows_are_k_offset(D, lane, kk, wc * half + dn * 16); });
        mma(dq[size_t(2 * dn)], a, bk, 0);
        mma(dq[size_t(2 * dn + 1)], a, bk, 2);
      }
    }
    expect_acc(dv, wr * 16, wc * half, [&](int i, int j) { return dense_product(P, true, dO, false, i, j); }, "dV");
    expect_acc(dk, wr * 16, wc * half, [&](int i, int j) { return dense_product(dS, true, Q, false, i, j); }, "dK");
    expect_acc(dq, wr * 16, wc * half, [&](int i, int j) { return dense_product(dS, false, K, false, i, j); }, "dQ");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

void emulate_dq_pass_step(int D) {
  constexpr int BN = 64;
  const Tile dO = make_tile(64, D), K = make_tile(BN, D), V = make_tile(BN, D);
  for (int warp = 0; warp < 4; ++warp) {
    std::vector<Acc> dp(BN / 8, Acc{}), dq(size_t(D / 8), Acc{});
    for (int kk = 0; kk < D / 16; ++kk) {
      const WarpRegs ado =
          ldmatrix_x4(dO.swz, false, [&](int lane) { return warp * 16 * D + frag::a_offset(D, lane, kk); });
      for (int nn = 0; nn < BN / 16; ++nn) {
        const WarpRegs bv =
            ldmatrix_x4(V.swz, false, [&](int lane) { return frag::b_rows_are_n_offset(D, lane, kk, nn * 16); });
        mma(dp[size_t(2 * nn)], ado, bv, 0);
        mma(dp[size_t(2 * nn + 1)], ado, bv, 2);
      }
    }
    for (int kk = 0; kk < BN / 16; ++kk) {  // the accumulators of tiles 2kk, 2kk+1 as the A fragment
      WarpRegs a{};
      for (int l = 0; l < 32; ++l)
        for (int h = 0; h < 2; ++h) {
          a[size_t(l)][0][size_t(h)] = dp[size_t(2 * kk)][size_t(l)][size_t(h)];
          a[size_t(l)][1][size_t(h)] = dp[size_t(2 * kk)][size_t(l)][size_t(2 + h)];
          a[size_t(l)][2][size_t(h)] = dp[size_t(2 * kk + 1)][size_t(l)][size_t(h)];
          a[size_t(l)][3][size_t(h)] = dp[size_t(2 * kk + 1)][size_t(l)][size_t(2 + h)];
        }
      for (int dn = 0; dn < D / 16; ++dn) {
        const WarpRegs bk =
            ldmatrix_x4(K.swz, true, [&](int lane) { return frag::b_rows_are_k_offset(D, lane, kk, dn * 16); });
        mma(dq[size_t(2 * dn)], a, bk, 0);
        mma(dq[size_t(2 * dn + 1)], a, bk, 2);
      }
    }
    Tile dS{64, BN, std::vector<double>(64 * BN), {}};
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < BN; ++j) dS.dense[size_t(i * BN + j)] = dense_product(dO, false, V, true, i, j);
    expect_acc(dq, warp * 16, 0, [&](int i, int j) { return dense_product(dS, false, K, false, i, j); }, "dQ pass");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(FlashAttentionBackwardFastHost, FragmentAddressingOnAnEmulatedWarp) {
  for (int D : {64, 128}) {
    SCOPED_TRACE("d=" + std::to_string(D));
    emulate_main_step(D);
    if (HasFatalFailure()) return;
    emulate_dq_pass_step(D);
    if (HasFatalFailure()) return;
  }
}

// ---- [SECTION] CPU: the wgmma kernel's dS transpose through shared memory, on an emulated CTA ----------
// Element (m, k) of a K-major A operand in the 128-byte swizzle as the tensor cores read it, the operand starting
// at byte `start` of `smem` (one entry a 2-byte element): row m at start + (m / 8) * 1024 + (m % 8) * 128 + 2k,
// address bits [4,7) XORed with [7,10).
double read_swizzled_a(const std::vector<double>& smem, uint32_t start, int m, int k) {
  const uint32_t lin = start + uint32_t(m / 8) * 1024 + uint32_t(m % 8) * 128 + uint32_t(k) * 2;
  const uint32_t addr = lin ^ (((lin >> 7) & 7) << 4);
  return smem.at(addr / 2);
}

// The two warpgroups' dS^T accumulators (64 keys x 64 queries each, sm90_device.cuh's layout: element 4j + e
// of thread (warp w, lane) is row 16w + lane/4 + 8 (e / 2), column 8j + 2 (lane % 4) + e % 2), packed as the
// kernel packs them (pairs 8kk + 2r, +1), stored at wgmma_frag::ds_store_byte, then read back the way the
// tensor cores read a K-major A operand with the 128-byte swizzle (row m of a 64 x 16 k-step at
// start + (m / 8) * 1024 + (m % 8) * 128 + 2k, address bits [4,7) XORed with [7,10)), at the k-step starts
// the kernel gives dQ = dS K (d = 128: 8 steps over all 128 keys; d = 64: 4 steps over each warpgroup's 64).
TEST(FlashAttentionBackwardFastHost, WgmmaDsTransposeOnAnEmulatedCta) {
  constexpr int kQueries = 64, kKeys = 128;
  std::vector<double> ds_t(size_t(kKeys) * kQueries);  // dS^T [key][query]
  for (size_t i = 0; i < ds_t.size(); ++i) ds_t[i] = double(i) + 0.5;
  std::vector<double> smem(size_t(kQueries) * kKeys * 2 / 2, -1.0);  // by 2-byte element
  std::vector<int> writes(smem.size(), 0);
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int kk = 0; kk < 4; ++kk)
          for (int r = 0; r < 4; ++r)
            for (int hh = 0; hh < 2; ++hh) {
              const int i = 8 * kk + 2 * r + hh, j = i / 4, e = i % 4;  // the accumulator element packed there
              const int key = 64 * wg + 16 * warp + lane / 4 + 8 * (e / 2), query = 8 * j + 2 * (lane % 4) + e % 2;
              const uint32_t byte = wgmma_frag::ds_store_byte(wg, warp, lane, kk, r, hh);
              ASSERT_EQ(byte % 2, 0u);
              ASSERT_LT(byte / 2, smem.size());
              smem[byte / 2] = ds_t[size_t(key) * kQueries + query];
              ++writes[byte / 2];
            }
  for (int w : writes) ASSERT_EQ(w, 1) << "every element of the dS tile written exactly once";
  auto read_a = [&](uint32_t start, int m, int k) { return read_swizzled_a(smem, start, m, k); };
  for (int kk = 0; kk < kKeys / 16; ++kk) {  // d = 128: k-step kk over keys 16 kk ..
    const uint32_t start = uint32_t(kk >> 2) * (kQueries * 128) + uint32_t(kk & 3) * 32;
    for (int m = 0; m < kQueries; ++m)
      for (int k = 0; k < 16; ++k)
        ASSERT_EQ(read_a(start, m, k), ds_t[size_t(16 * kk + k) * kQueries + m]) << "kk " << kk << " m " << m << " k " << k;
  }
  for (int wg = 0; wg < 2; ++wg)  // d = 64: warpgroup wg's k-steps over its own keys 64 wg ..
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t start = uint32_t(wg) * (kQueries * 128) + uint32_t(kk) * 32;
      for (int m = 0; m < kQueries; ++m)
        for (int k = 0; k < 16; ++k)
          ASSERT_EQ(read_a(start, m, k), ds_t[size_t(64 * wg + 16 * kk + k) * kQueries + m]) << "wg " << wg << " kk " << kk;
    }
}

// wgmma-tma's dS store: stmatrix.x4.trans emulated (lane L's register i, half hh, holds
// (row L/4, column 2 (L%4) + hh) of 8 x 8 matrix i, written to memory row 2 (L%4) + hh, element L/4, the
// row's address given by lane 8i + that row) puts every element exactly where the 16-bit stores put it.
TEST(FlashAttentionBackwardFastHost, WgmmaTmaStmatrixStoresLikeTheElementStores) {
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int kk = 0; kk < 4; ++kk)
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < 4; ++i)
            for (int hh = 0; hh < 2; ++hh) {
              const int mem_row = 2 * (lane % 4) + hh;
              const uint32_t row_start = wgmma_frag::ds_stmatrix_byte(wg, warp, 8 * i + mem_row, kk);
              ASSERT_EQ(row_start % 16, 0u) << "stmatrix rows are 16-byte aligned";
              const uint32_t byte = row_start + uint32_t(lane / 4) * 2;
              ASSERT_EQ(byte, wgmma_frag::ds_store_byte(wg, warp, lane, kk, i, hh))
                  << "wg " << wg << " warp " << warp << " kk " << kk << " lane " << lane << " matrix " << i;
            }
}

// The dQ staging stores of `groups` column groups of 8 by every warp of both warpgroups (group j at the j-th
// store, straight from the accumulator): within its warpgroup's groups / 4 boxes, and a half-warp's float2 stores
// (rows g .. g + 3, four lanes a row) meet exactly two to a bank: rows g and g ^ 1 put the same 16-byte chunk in
// the same place of the 128-byte swizzle: the select-free store's cost (until 2026-12-05 the stores turned the
// group by the row, conflict-free, at three selects a value; the A/B in docs/perf-log.md chose these).
void expect_staging_two_way(int groups) {
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int j = 0; j < groups; ++j)
        for (int r = 0; r < 2; ++r)
          for (int half = 0; half < 2; ++half) {
            std::array<int, 32> banks{};
            for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
              const uint32_t byte = wgmma_frag::dq_stage_byte(wg, 16 * warp + lane / 4 + 8 * r, 8 * j + 2 * (lane % 4));
              ASSERT_LT(byte, uint32_t(wg * 2 + groups / 4) * 64 * 128) << "past the warpgroup's boxes";
              ++banks[(byte / 4) % 32];
              ++banks[(byte / 4 + 1) % 32];
            }
            for (int b : banks)
              ASSERT_TRUE(b == 0 || b == 2) << groups << " groups, wg " << wg << " warp " << warp << " j " << j;
          }
}

// wgmma-tma's dQ staging: each warpgroup's 64 x 64 block holds every (row, column) once, as two
// boxes of 64 rows x 128 bytes in the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8): what the
// bulk tensor copy reads), and a half-warp's float2 stores (rows g .. g + 3 of its warp, four lanes a row, at
// column group j at the j-th store) meet two to a bank (expect_staging_two_way).
TEST(FlashAttentionBackwardFastHost, WgmmaTmaDqStagingLayout) {
  std::vector<int> seen(size_t(FastBackwardTraitsSm90<128>::kDqStageBytes / 4), 0);
  for (int wg = 0; wg < 2; ++wg)
    for (int row = 0; row < 64; ++row)
      for (int col = 0; col < 64; ++col) {
        const uint32_t byte = wgmma_frag::dq_stage_byte(wg, row, col);
        const uint32_t box = uint32_t(wg * 2 + col / 32) * 64 * 128;
        ASSERT_EQ(byte, box + uint32_t(row) * 128 + uint32_t((((col % 32) / 4) ^ (row % 8)) * 16 + (col % 4) * 4));
        ++seen.at(byte / 4);
      }
  int used = 0;
  for (int n : seen) {
    ASSERT_LE(n, 1);
    used += n;
  }
  EXPECT_EQ(used, 2 * 64 * 64);
  // K_j, V_j (128 keys), two stages of Q_i and dO_i and dS at the wgmma-tma tiles' query rows (d = 64: 128, d = 128:
  // 64), L and D, 1 KiB of alignment, two dQ stages, the mbarriers.
  auto tma_bytes = [](int d, int rows) {
    return int64_t(2 * 128 * d + 4 * rows * d + rows * 128) * 2 + 4 * rows * 4 + 1024 + 2 * (2 * 2 * 64 * 128) + 64;
  };
  EXPECT_EQ(FastBackwardTraitsSm90<64>::kBlockMTma, 128);
  EXPECT_EQ(FastBackwardTraitsSm90<128>::kBlockMTma, 64);
  EXPECT_EQ(FastBackwardTraitsSm90<64>::kSmemBytesTma, tma_bytes(64, 128));
  EXPECT_EQ(FastBackwardTraitsSm90<128>::kSmemBytesTma, tma_bytes(128, 64));
  EXPECT_LE(FastBackwardTraitsSm90<64>::kSmemBytesTma, 227 * 1024) << "past the H100/H200's per-block limit";
  EXPECT_LE(FastBackwardTraitsSm90<128>::kSmemBytesTma, 227 * 1024) << "past the H100/H200's per-block limit";
  // Each warpgroup stages a 64 x 64 block, two boxes: d = 128 its 64 columns of the tile's 64 rows, d = 64 its 64
  // rows of the tile's 128.
  expect_staging_two_way(8);
}

// The 80-row steps' dQ^T staging fills one stage (two warpgroups, two boxes of 80 rows x 32 fp32
// columns each) once, and each warp's store of one accumulator element (lanes: columns g and rows 2 t4 + e of
// the wgmma layout) touches 32 distinct banks.
TEST(FlashAttentionBackwardFastHost, WgmmaTma80RowDqStagingLayout) {
  using Tr = FastBackwardTraitsSm90<128>;
  constexpr int kRows = Tr::kBlockM80;
  std::vector<int> seen(size_t(Tr::kDqStageBytes80 / 4), 0);
  for (int wg = 0; wg < 2; ++wg)
    for (int row = 0; row < kRows; ++row)
      for (int col = 0; col < 64; ++col) {
        const uint32_t byte = wgmma_frag::dq_stage_byte<kRows>(wg, row, col);
        ++seen.at(byte / 4);
        // stage_dq_t's addressing: 8 rows on is one swizzle period, 1024 bytes, on.
        if (row >= 8) ASSERT_EQ(byte, wgmma_frag::dq_stage_byte<kRows>(wg, row - 8, col) + 1024);
      }
  for (int n : seen) ASSERT_EQ(n, 1);
  for (int warp = 0; warp < 4; ++warp)
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < kRows / 8; ++j)
        for (int e = 0; e < 2; ++e) {
          std::set<uint32_t> banks;
          for (int lane = 0; lane < 32; ++lane) {
            const int row = 8 * j + 2 * (lane % 4) + e, col = 16 * warp + lane / 4 + 8 * r;
            banks.insert(wgmma_frag::dq_stage_byte<kRows>(0, row, col) / 4 % 32);
          }
          EXPECT_EQ(banks.size(), 32u) << warp << " " << r << " " << j << " " << e;
        }
  EXPECT_EQ(Tr::kSmemBytesTma80 % 16, 0);
  EXPECT_LE(Tr::kSmemBytesTma80, 227 * 1024) << "past the H100/H200's per-block limit";
  // The dQ stage starts 1024-byte aligned (the swizzle's period) after K_j, V_j, the Q_i and dO_i stages, dS and
  // the padded L and D.
  EXPECT_EQ((2 * 128 * 128 * 2 + 4 * kRows * 128 * 2 + kRows * 128 * 2 + 4 * kRows * 4 + Tr::kStatsPad80) % 1024, 0);
}

// wgmma-tma at d = 64 (128 query rows a step): both warpgroups' dS^T (64 keys x 128 queries each) stored by
// stmatrix.x4.trans, emulated as above, at ds_stmatrix_byte(..., 128) fill the dS tile [128 queries][128 keys]
// once, and the tensor cores' K-major, 128-byte-swizzled A read at the kernel's dQ k-step starts (warpgroup wg:
// queries 64 wg .., k-step kk over keys 16 kk .., in key block kk / 4) gives dS there.
TEST(FlashAttentionBackwardFastHost, WgmmaTmaWideDsTransposeOnAnEmulatedCta) {
  constexpr int kQueries = 128, kKeys = 128;
  std::vector<double> ds_t(size_t(kKeys) * kQueries);  // dS^T [key][query]
  for (size_t i = 0; i < ds_t.size(); ++i) ds_t[i] = double(i) + 0.5;
  std::vector<double> smem(size_t(kQueries) * kKeys, -1.0);  // by 2-byte element
  std::vector<int> writes(smem.size(), 0);
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int kk = 0; kk < kQueries / 16; ++kk)
          for (int i = 0; i < 4; ++i)
            for (int hh = 0; hh < 2; ++hh) {
              const int el = 8 * kk + 2 * i + hh, j = el / 4, e = el % 4;  // the accumulator element packed there
              const int key = 64 * wg + 16 * warp + lane / 4 + 8 * (e / 2), query = 8 * j + 2 * (lane % 4) + e % 2;
              const int mem_row = 2 * (lane % 4) + hh;
              const uint32_t row_start = wgmma_frag::ds_stmatrix_byte(wg, warp, 8 * i + mem_row, kk, kQueries);
              ASSERT_EQ(row_start % 16, 0u) << "stmatrix rows are 16-byte aligned";
              const uint32_t byte = row_start + uint32_t(lane / 4) * 2;
              ASSERT_LT(byte / 2, smem.size());
              smem[byte / 2] = ds_t[size_t(key) * kQueries + query];
              ++writes[byte / 2];
            }
  for (int w : writes) ASSERT_EQ(w, 1) << "every element of the dS tile written exactly once";
  auto read_a = [&](uint32_t start, int m, int k) { return read_swizzled_a(smem, start, m, k); };
  for (int wg = 0; wg < 2; ++wg)
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const uint32_t start = uint32_t(kk >> 2) * (kQueries * 128) + uint32_t(wg) * (64 * 128) + uint32_t(kk & 3) * 32;
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k)
          ASSERT_EQ(read_a(start, m, k), ds_t[size_t(16 * kk + k) * kQueries + 64 * wg + m])
              << "wg " << wg << " kk " << kk << " m " << m << " k " << k;
    }
}

// The d = 256 kernel's tiles (K_j, V_j, two stages of Q_i and dO_i, P^T in fp32, L and D) fit the H100/H200, and
// P^T's hand-over is one float4 per thread per 4 registers: 128 threads x 32 registers.
TEST(FlashAttentionBackwardFastHost, WgmmaD256TilesFit) {
  using Tr = FastBackwardTraitsSm90D256;
  EXPECT_LE(Tr::kSmemBytes, 227 * 1024) << "past the H100/H200's per-block limit";
  EXPECT_EQ(Tr::kXBytes, 128 * (Tr::kBlockM / 2) * 4);
}

// The wgmma dQ pass's tiles (Q_i, dO_i and two stages of K_j, V_j) fit the H100/H200 at every head dimension, and
// its key tile is whole 16-key wgmma steps.
TEST(FlashAttentionBackwardFastHost, WgmmaDqPassTilesFit) {
  auto check = [](auto traits) {
    using Tr = decltype(traits);
    SCOPED_TRACE(Tr::kHeadDim);
    EXPECT_LE(Tr::kSmemBytes, 227 * 1024) << "past the H100/H200's per-block limit";
    EXPECT_EQ(Tr::kBlockN % 16, 0);
    EXPECT_LE(Tr::kBlockN, 256);  // one wgmma's N
  };
  check(FastDqTraitsSm90<64>{});
  check(FastDqTraitsSm90<128>{});
  check(FastDqTraitsSm90<256>{});
}

// The plain reference rounds where it says: in fp32 (no rounding) it is the float64 backward to fp32
// accuracy; in bf16 / fp16 its error is that of the rounding, well above fp32's and well below 5%. With
// grouped-query attention too (H = 4 over Hkv = 2 and 1), where the float64 side, one query head at a time
// in parallel, is bit for bit reference() on the whole grouped shape.
TEST(FlashAttentionBackwardFastHost, PlainReferenceIsTheRoundedComputation) {
  for (int hkv : {0, 2, 1})
    for (const char* dtype : {"fp32", "bf16", "fp16"}) {
      Case c;
      c.B = 1, c.H = 2, c.Lq = 70, c.Lk = 90, c.d = 64, c.causal = true, c.dtype = dtype, c.scale = 0.125f;
      if (hkv > 0) c.B = 2, c.H = 4, c.Hkv = hkv;
      SCOPED_TRACE(c.text());
      const Inputs in = rounded_inputs(c);
      const Plain p = plain_reference(c, in);
      const Exact e = exact_reference(c, in);
      if (hkv > 0) {
        Shape s;
        s.batch = c.B, s.heads = c.H, s.kv_heads = c.Hkv, s.lq = c.Lq, s.lk = c.Lk, s.d = c.d;
        Options o;
        o.causal = c.causal;
        o.scale = c.scale;
        Exact whole{std::vector<double>(in.q.size()), std::vector<double>(in.k.size()),
                    std::vector<double>(in.v.size())};
        reference(in.q.data(), in.k.data(), in.v.data(), in.dout.data(), s, o, whole.dq.data(), whole.dk.data(),
                  whole.dv.data());
        EXPECT_EQ(e.dq, whole.dq);
        EXPECT_EQ(e.dk, whole.dk);
        EXPECT_EQ(e.dv, whole.dv);
      }
      using Pair = std::tuple<const char*, const std::vector<float>*, const std::vector<double>*>;
      for (const auto& [name, got, ref] :
           {Pair{"dq", &p.dq, &e.dq}, Pair{"dk", &p.dk, &e.dk}, Pair{"dv", &p.dv, &e.dv}}) {
        const double err = errors_against(*got, *ref).rel;
        if (std::string(dtype) == "fp32") EXPECT_LT(err, 1e-5) << name;
        else {
          EXPECT_GT(err, std::string(dtype) == "bf16" ? 3e-4 : 4e-5) << name;
          EXPECT_LT(err, 5e-2) << name;
        }
      }
    }
}

TEST(FlashAttentionBackwardFastHost, ParamsAreChecked) {
  FastBackwardParams p;
  p.B = p.H = 1, p.Lq = p.Lk = 16, p.d = 32, p.scale = 0.1f;
  try {
    validate_fast(p);
    FAIL() << "d = 32 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("d"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("{64, 128, 256}"), std::string::npos) << e.what();
  }
  p.d = 64;
  p.scale = 0;
  EXPECT_THROW(validate_fast(p), InputError);
  p.scale = 0.1f;
  EXPECT_THROW(validate_fast(p), InputError);  // null pointers
  // H_kv: 0 (H) or a divisor of H; checked before the pointers, one line naming it.
  p.H = 8;
  for (int bad : {-1, 3, 16}) {
    p.H_kv = bad;
    try {
      validate_fast(p);
      FAIL() << "H_kv = " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("H_kv=" + std::to_string(bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("a divisor of H=8"), std::string::npos) << e.what();
    }
  }
  for (int good : {0, 1, 2, 4, 8}) {
    p.H_kv = good;
    try {
      validate_fast(p);
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find("H_kv"), std::string::npos) << e.what();  // the null pointers' line
    }
    EXPECT_EQ(kv_heads(p), good == 0 ? 8 : good);
    EXPECT_EQ(grouped_query(p), good != 0 && good != 8);
  }
}

// --variant fast on the CPU backend: one line naming the variant and the backend (exit 2 on the command line).
TEST(FlashAttentionBackwardFastHost, RefusedOnTheCpuBackend) {
  const KernelEntry e = entry();
  ASSERT_NE(std::find(e.variants.begin(), e.variants.end(), "fast"), e.variants.end());
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = "fast";
  r.params = ParamValues(e.params);
  r.inputs["q"] = make_array({4, 64}, std::vector<float>(256, 0.5f));
  r.inputs["k"] = r.inputs["q"];
  r.inputs["v"] = r.inputs["q"];
  r.inputs["do"] = r.inputs["q"];
  try {
    e.run(r);
    FAIL() << "fast ran on the CPU backend";
  } catch (const InputError& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("--variant fast"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kl::flash_attention_backward
