// Tests for kernels/flash_attention_fast.{h,cu}: the fast (tensor-core) FlashAttention forward.
//   Host reference: float64 attention on the same low-precision-rounded inputs; and "plain" attention in
//   the low precision (fp32 dot products of rounded inputs, fp32 softmax, P rounded to bf16/fp16 before
//   P V with fp32 accumulation, output rounded): FlashAttention's rule is that the fast kernel's error
//   against float64 is at most twice the plain low-precision error (plus a small floor).
//   Device function: run_fast_host (float32 -> bf16/fp16 on the device, kernel, float32 back; the output
//   is poisoned with NaN before the launch).
//   Shapes: Lq, Lk in {1, 17, 64, 127, 128, 129, 1000} (every pair), d in {64, 128}, causal and not,
//   bf16 and fp16, (B, H) cycling through {1,2,3}^2; a peaked-softmax sweep (scale 1); rows that see no
//   key; determinism (a race shows as a moving result). Grouped-query attention: H / H_kv in {1, 2, 4, 8}
//   over odd lengths, Lq != Lk, causal, on every kernel; and GQA's output bit-identical to the same
//   kernel's on k and v repeated per query head (repeat_interleave: query head h reads kv head h / group).
//   Head dimension 256 (its own, smaller tiles: mma.sync 128 x 32, wgmma 128 x 80 in 2 stages): odd lengths,
//   Lq != Lk, causal, bf16 and fp16, grouped-query ratios 1 and 4, on every kernel.
//   CPU-only: the tile-count, causal-skip and mask bounds against brute force; parameter validation.
#include "kernels/rungs/flash_attention_fast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/runtime/buffer.h"
#include "test_util.h"

namespace kl::flash_attention {
namespace {

#ifndef KL_HAS_CUDA
// CPU-only builds (cpu and asan presets, machines without nvcc) declare none of the CUDA-only entry
// points; the tests that call them skip themselves (KL_REQUIRE_CUDA) before it matters.
bool fast_wgmma_kernels_loaded() { return false; }
bool run_fast_wgmma(const FastParams&, bool = false) { return false; }
bool run_fast_wgmma_persistent(const FastParams&, FastPath) { return false; }
void run_fast_mma_sync(const FastParams&) {}
#endif

// ---- [SECTION] low-precision rounding on the host (round to nearest even, held in a float) ----------
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;  // inf / NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}
float round_fp16(float x) {
  const float a = std::fabs(x);
  if (a >= 65520.f) return std::copysign(INFINITY, x);
  if (a < 6.103515625e-05f) {  // fp16 subnormal range: multiples of 2^-24
    return std::nearbyint(x * 16777216.f) / 16777216.f;
  }
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0xFFFu + ((u >> 13) & 1u);  // 23 - 10 = 13 mantissa bits dropped
  u &= 0xFFFFE000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}
float round_to(const std::string& dtype, float x) { return dtype == "bf16" ? round_bf16(x) : round_fp16(x); }

struct Shape {
  int B = 1, H = 1, Lq = 1, Lk = 1, d = 64;
  int H_kv = 0;  // heads of k and v (grouped-query attention); 0: H
  bool causal = false;
  std::string dtype = "bf16";
  float scale = 0;  // 0: 1/sqrt(d)
  int kv() const { return H_kv > 0 ? H_kv : H; }
  std::string text() const {
    std::ostringstream s;
    s << "B=" << B << " H=" << H << " H_kv=" << kv() << " Lq=" << Lq << " Lk=" << Lk << " d=" << d
      << (causal ? " causal" : " non-causal") << " " << dtype << " scale=" << scale;
    return s.str();
  }
};

struct References {
  std::vector<double> exact;  // float64 attention of the rounded inputs
  std::vector<float> plain;   // the same computed plainly in the low precision
  std::vector<char> empty_row;  // per (b, h, i): the row sees no key
};

// Both references in one pass over the scores. k and v hold B * H_kv heads; query head h (of H) reads
// kv head h / (H / H_kv), written out here independently of the kernels' kv_head_of. The rows are spread
// over the machine's threads (test::parallel_for): each row's arithmetic is the same whichever thread runs it.
References references(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v) {
  References r;
  const int64_t rows = int64_t(s.B) * s.H * s.Lq;
  r.exact.assign(size_t(rows) * s.d, 0.0);
  r.plain.assign(size_t(rows) * s.d, 0.f);
  r.empty_row.assign(size_t(rows), 0);
  const int group = s.H / s.kv();
  test::parallel_for(rows, [&](int64_t first, int64_t last) {
    std::vector<double> sc(size_t(s.Lk));
    std::vector<float> sf(size_t(s.Lk));
    std::vector<double> od(size_t(s.d));
    std::vector<float> of(size_t(s.d));
    for (int64_t row = first; row < last; ++row) {
      const int bh = int(row / s.Lq), i = int(row % s.Lq);
      const int kv_bh = (bh / s.H) * s.kv() + (bh % s.H) / group;
      const float* qi = &q[size_t(row) * s.d];
      const float* kb = &k[size_t(kv_bh) * s.Lk * s.d];
      const float* vb = &v[size_t(kv_bh) * s.Lk * s.d];
      int visible = 0;
      double md = -INFINITY;
      float mf = -INFINITY;
      for (int j = 0; j < s.Lk; ++j) {
        if (!key_visible(i, j, s.Lq, s.Lk, s.causal)) continue;
        ++visible;
        double dd = 0;
        float df = 0;
        for (int c = 0; c < s.d; ++c) {
          dd += double(qi[c]) * kb[size_t(j) * s.d + c];
          df += qi[c] * kb[size_t(j) * s.d + c];
        }
        sc[size_t(j)] = dd * s.scale;
        sf[size_t(j)] = df * s.scale;
        md = std::max(md, sc[size_t(j)]);
        mf = std::max(mf, sf[size_t(j)]);
      }
      if (visible == 0) {
        r.empty_row[size_t(row)] = 1;
        continue;
      }
      std::fill(od.begin(), od.end(), 0.0);
      std::fill(of.begin(), of.end(), 0.f);
      double ld = 0;
      float lf = 0;
      for (int j = 0; j < s.Lk; ++j) {
        if (!key_visible(i, j, s.Lq, s.Lk, s.causal)) continue;
        const double pd = std::exp(sc[size_t(j)] - md);
        const float pf = std::exp(sf[size_t(j)] - mf);
        const float pr = round_to(s.dtype, pf);
        ld += pd;
        lf += pf;
        for (int c = 0; c < s.d; ++c) {
          od[size_t(c)] += pd * vb[size_t(j) * s.d + c];
          of[size_t(c)] += pr * vb[size_t(j) * s.d + c];
        }
      }
      for (int c = 0; c < s.d; ++c) {
        r.exact[size_t(row) * s.d + c] = od[size_t(c)] / ld;
        r.plain[size_t(row) * s.d + c] = round_to(s.dtype, of[size_t(c)] / lf);
      }
    }
  });
  return r;
}

struct Errors {
  double rel = 0, max_abs = 0;
};
template <class V>
Errors errors_against(const V& out, const std::vector<double>& ref) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = double(out[i]) - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
    mx = std::max(mx, std::fabs(e));
  }
  return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), mx};
}

Array make_array(std::vector<int64_t> shape, std::vector<float> data) {
  Array a;
  a.shape = std::move(shape);
  a.data = std::move(data);
  return a;
}

// Runs one case: fresh inputs (rounded to the dtype, so the kernel and the references see the same
// numbers), the kernel, both references; checks NaN, empty rows, and the 2x rule.
void check_case(Shape s, float input_range = 1.5f) {
  if (s.scale == 0) s.scale = 1.0f / std::sqrt(float(s.d));
  SCOPED_TRACE(s.text());
  const size_t nq = size_t(s.B) * s.H * s.Lq * s.d, nk = size_t(s.B) * s.kv() * s.Lk * s.d;
  std::vector<float> q = test::random_floats(nq, -input_range, input_range);
  std::vector<float> k = test::random_floats(nk, -input_range, input_range);
  std::vector<float> v = test::random_floats(nk, -1.f, 1.f);
  for (float& x : q) x = round_to(s.dtype, x);
  for (float& x : k) x = round_to(s.dtype, x);
  for (float& x : v) x = round_to(s.dtype, x);

  const Array out = run_fast_host(make_array({s.B, s.H, s.Lq, s.d}, q), make_array({s.B, s.kv(), s.Lk, s.d}, k),
                                  make_array({s.B, s.kv(), s.Lk, s.d}, v), s.causal, s.scale, s.dtype);
  ASSERT_EQ(out.shape, (std::vector<int64_t>{s.B, s.H, s.Lq, s.d}));
  ASSERT_EQ(out.data.size(), nq);

  const References ref = references(s, q, k, v);
  size_t non_finite = 0, nonzero_empty = 0;
  for (size_t i = 0; i < nq; ++i) {
    if (!std::isfinite(out.data[i])) ++non_finite;
    if (ref.empty_row[i / size_t(s.d)] && out.data[i] != 0.f) ++nonzero_empty;
  }
  ASSERT_EQ(non_finite, 0u) << "NaN/inf in the output (unwritten elements stay NaN)";
  ASSERT_EQ(nonzero_empty, 0u) << "rows that see no key must be exactly 0";

  const Errors fast = errors_against(out.data, ref.exact);
  const Errors plain = errors_against(ref.plain, ref.exact);
  double ref_max = 0;
  for (double x : ref.exact) ref_max = std::max(ref_max, std::fabs(x));
  const double ulp = (s.dtype == "bf16" ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11)) * std::max(ref_max, 1e-3);
  EXPECT_LE(fast.rel, 2 * plain.rel + 1e-5) << "relative-norm error: fast " << fast.rel << ", plain " << plain.rel;
  EXPECT_LE(fast.max_abs, 2 * plain.max_abs + ulp)
      << "max abs error: fast " << fast.max_abs << ", plain " << plain.max_abs;
  // A sanity bound independent of the plain reference: bf16 lands near 3e-3, fp16 near 4e-4.
  EXPECT_LT(fast.rel, s.dtype == "bf16" ? 2e-2 : 4e-3) << "relative-norm error " << fast.rel;
}

const int kBatchHeads[9][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 3}, {3, 2}, {3, 3}, {1, 3}, {3, 1}, {2, 2}};

// Every (dtype, d, causal, Lq, Lk) with Lq and Lk from `lengths`, batch and heads cycling through
// kBatchHeads (1 on the long pairs, to keep the float64 reference cheap).
void sweep(std::initializer_list<int> lengths, std::initializer_list<int> dims = {64, 128}) {
  int index = 0;
  for (const char* dtype : {"bf16", "fp16"})
    for (int d : dims)
      for (bool causal : {false, true})
        for (int Lq : lengths)
          for (int Lk : lengths) {
            Shape s;
            const int* bh = kBatchHeads[index++ % 9];
            s.B = (Lq >= 1000 || Lk >= 1000) ? 1 : bh[0];
            s.H = (Lq >= 1000 && Lk >= 1000) ? 1 : bh[1];
            s.Lq = Lq, s.Lk = Lk, s.d = d, s.causal = causal, s.dtype = dtype;
            check_case(s);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

// Grouped-query attention: H = ratio * H_kv query heads over H_kv in {1, 2} kv heads, ratios 1, 2, 4, 8;
// odd lengths and Lq != Lk (every pair of `lengths`), causal and not, d in {64, 128}, bf16 and fp16
// alternating, B in {1, 2}. Long pairs take H_kv = 1 and B = 1 (the float64 reference is on the host).
void gqa_sweep(std::initializer_list<int> lengths, std::initializer_list<int> dims = {64, 128},
               std::initializer_list<int> ratios = {1, 2, 4, 8}) {
  int index = 0;
  for (int ratio : ratios)
    for (int d : dims)
      for (bool causal : {false, true})
        for (int Lq : lengths)
          for (int Lk : lengths) {
            const bool long_pair = Lq >= 1000 || Lk >= 1000;
            Shape s;
            s.H_kv = long_pair ? 1 : 1 + index % 2;
            s.H = ratio * s.H_kv;
            s.B = long_pair ? 1 : 1 + (index / 2) % 2;
            s.Lq = Lq, s.Lk = Lk, s.d = d, s.causal = causal;
            s.dtype = index++ % 3 == 2 ? "fp16" : "bf16";
            check_case(s);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

// ---- [SECTION] GPU tests ------------------------------------------------------------------------------
TEST(FlashAttentionFast, MatchesReferenceOnEveryLengthPair) {
  KL_REQUIRE_CUDA();
  sweep({1, 17, 64, 127, 128, 129, 1000});
}

TEST(FlashAttentionFast, EveryBatchHeadCombination) {
  KL_REQUIRE_CUDA();
  for (const auto& bh : kBatchHeads)
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        Shape s;
        s.B = bh[0], s.H = bh[1], s.Lq = 129, s.Lk = 200, s.d = d, s.causal = causal;
        s.dtype = (bh[0] + bh[1]) % 2 ? "fp16" : "bf16";
        check_case(s);
        if (HasFatalFailure()) return;
      }
}

TEST(FlashAttentionFast, GroupedQueryAttentionMatchesReference) {
  KL_REQUIRE_CUDA();
  gqa_sweep({1, 17, 127, 129, 1000});
}

// Sets an environment variable for one scope (the kernel choice reads KL_FLASH_FAST_PATH per call).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// Random inputs: q [B, H, Lq, d], k and v [B, H_kv, Lk, d] (H_kv = H unless given).
struct Qkv {
  Array q, k, v;
};
Qkv random_qkv(int B, int H, int Lq, int Lk, int d, int H_kv = 0) {
  if (H_kv == 0) H_kv = H;
  return {make_array({B, H, Lq, d}, test::random_floats(size_t(B) * H * Lq * d)),
          make_array({B, H_kv, Lk, d}, test::random_floats(size_t(B) * H_kv * Lk * d)),
          make_array({B, H_kv, Lk, d}, test::random_floats(size_t(B) * H_kv * Lk * d))};
}
// The fast forward in bf16 on the kernel KL_FLASH_FAST_PATH=path names.
Array run_on_path(const char* path, const Qkv& in, bool causal, float scale) {
  ScopedEnv env("KL_FLASH_FAST_PATH", path);
  return run_fast_host(in.q, in.k, in.v, causal, scale, "bf16");
}
// The two outputs hold the same floats, bit for bit.
bool same_bits(const Array& a, const Array& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
}

// The kernels that take d = 256 on this device: the default (wgmma with TMA on an H100/H200) and mma.sync.
std::vector<std::pair<const char*, FastPath>> d256_paths() {
  std::vector<std::pair<const char*, FastPath>> v = {{"mma", FastPath::MmaSync}};
  if (fast_wgmma_kernels_loaded()) v.insert(v.begin(), {"wgmma", FastPath::Wgmma});
  return v;
}

// d = 256: every pair of odd lengths (around the tiles: 32 and 80 keys, 128 queries), Lq != Lk, causal and
// not, bf16 and fp16, on each kernel; then grouped-query ratios 1 and 4 and long rows crossing many tiles.
TEST(FlashAttentionFast, HeadDim256MatchesReference) {
  KL_REQUIRE_CUDA();
  for (auto [name, path] : d256_paths()) {
    ScopedEnv env("KL_FLASH_FAST_PATH", name);
    ASSERT_EQ(fast_path(), path);
    SCOPED_TRACE(name);
    sweep({1, 17, 79, 81, 129, 161}, {256});
    if (HasFatalFailure()) return;
    gqa_sweep({1, 33, 127, 1000}, {256}, {1, 4});
    if (HasFatalFailure()) return;
    for (bool causal : {false, true}) {
      Shape s;
      s.B = 1, s.H = 2, s.Lq = 257, s.Lk = 1201, s.d = 256, s.causal = causal, s.scale = 1.0f;
      check_case(s, 2.0f);  // peaked scores: the max moves across many tiles
      if (HasFatalFailure()) return;
    }
  }
}

// Large scores (scale 1, inputs up to 2): the max moves often and alpha is far from 1, so a wrong
// rescale shows; also long rows that cross many tiles.
TEST(FlashAttentionFast, PeakedSoftmaxAndLongRows) {
  KL_REQUIRE_CUDA();
  for (const char* dtype : {"bf16", "fp16"})
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        Shape s;
        s.B = 1, s.H = 2, s.Lq = 300, s.Lk = 2049, s.d = d, s.causal = causal, s.dtype = dtype, s.scale = 1.0f;
        check_case(s, 2.0f);
        if (HasFatalFailure()) return;
      }
}

// Causal with Lq > Lk: the first Lq - Lk rows see nothing and must be exactly 0, including whole query
// blocks that visit no K/V tile at all (Lq = 1000, Lk = 17: rows 0..982).
TEST(FlashAttentionFast, RowsThatSeeNothingAreZero) {
  KL_REQUIRE_CUDA();
  for (int d : {64, 128})
    for (auto [Lq, Lk] : {std::pair<int, int>{1000, 17}, {129, 1}, {300, 128}, {256, 129}}) {
      Shape s;
      s.B = 2, s.H = 1, s.Lq = Lq, s.Lk = Lk, s.d = d, s.causal = true;
      check_case(s);
      if (HasFatalFailure()) return;
    }
}

// The same inputs twice give bit-identical outputs: a missing barrier or a read of unwritten shared
// memory shows as a moving result.
TEST(FlashAttentionFast, Deterministic) {
  KL_REQUIRE_CUDA();
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("d=" + std::to_string(d) + (causal ? " causal" : " non-causal"));
      const Qkv in = random_qkv(2, 2, 777, 1000, d);
      const float scale = 1.0f / std::sqrt(float(d));
      const Array a = run_fast_host(in.q, in.k, in.v, causal, scale, "bf16");
      const Array b = run_fast_host(in.q, in.k, in.v, causal, scale, "bf16");
      EXPECT_TRUE(same_bits(a, b));
    }
}

// Rank 2 and 3 inputs ([L, d], [H, L, d]) are the B = 1 (and H = 1) cases of the same kernel.
TEST(FlashAttentionFast, LowerRankInputs) {
  KL_REQUIRE_CUDA();
  const int L = 65, d = 64;
  const std::vector<float> q = test::random_floats(size_t(2) * L * d), k = test::random_floats(size_t(2) * L * d),
                           v = test::random_floats(size_t(2) * L * d);
  const Array o3 = run_fast_host(make_array({2, L, d}, q), make_array({2, L, d}, k), make_array({2, L, d}, v), true,
                                 0.125f, "fp16");
  const Array o4 = run_fast_host(make_array({1, 2, L, d}, q), make_array({1, 2, L, d}, k),
                                 make_array({1, 2, L, d}, v), true, 0.125f, "fp16");
  EXPECT_EQ(o3.shape, (std::vector<int64_t>{2, L, d}));
  EXPECT_EQ(o3.data, o4.data);
  const std::vector<float> q2(q.begin(), q.begin() + L * d), k2(k.begin(), k.begin() + L * d),
      v2(v.begin(), v.begin() + L * d);
  const Array o2 = run_fast_host(make_array({L, d}, q2), make_array({L, d}, k2), make_array({L, d}, v2), true, 0.125f,
                                 "fp16");
  EXPECT_EQ(o2.shape, (std::vector<int64_t>{L, d}));
  EXPECT_EQ(o2.data, std::vector<float>(o4.data.begin(), o4.data.begin() + L * d));
}

// A reduced length-pair sweep through the kernel KL_FLASH_FAST_PATH names.
void reduced_sweep(const char* path, FastPath expected) {
  ScopedEnv env("KL_FLASH_FAST_PATH", path);
  ASSERT_EQ(fast_path(), expected);
  sweep({1, 64, 127, 129, 1000});
  if (::testing::Test::HasFatalFailure()) return;
  gqa_sweep({17, 129, 1000});
}

// On an H100/H200 the sweeps above run the wgmma (TMA) kernels; the mma.sync kernel (the fallback
// everywhere else, and where no tensor map can be made) gets a reduced sweep of its own here.
TEST(FlashAttentionFast, MmaSyncKernelMatchesReference) {
  KL_REQUIRE_CUDA();
  reduced_sweep("mma", FastPath::MmaSync);
}
// The TMA kernel with the late rescale (KL_FLASH_FAST_PATH=wgmma-late): the reduced sweep, d = 256, peaked
// scores (alpha far from 1 at every tile, so a rescale applied to the wrong P V shows), and the same bits
// as the TMA kernel (the same multiplies on O in the same order, only issued later).
TEST(FlashAttentionFast, LateRescaleTmaKernelMatchesReference) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  reduced_sweep("wgmma-late", FastPath::WgmmaLate);
  if (HasFatalFailure()) return;
  {
    ScopedEnv env("KL_FLASH_FAST_PATH", "wgmma-late");
    sweep({1, 79, 81, 161}, {256});
    if (HasFatalFailure()) return;
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        Shape s;
        s.B = 1, s.H = 2, s.Lq = 300, s.Lk = 2049, s.d = d, s.causal = causal, s.scale = 1.0f;
        check_case(s, 2.0f);
        if (HasFatalFailure()) return;
      }
  }
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("d=" + std::to_string(d) + (causal ? " causal" : " non-causal"));
      const Qkv in = random_qkv(2, 5, 333, 517, d);
      const float scale = 1.0f / std::sqrt(float(d));
      EXPECT_TRUE(same_bits(run_on_path("wgmma-late", in, causal, scale), run_on_path("wgmma", in, causal, scale)));
    }
}

// The persistent paths (KL_FLASH_FAST_PATH=wgmma-persistent, -q2-late, -late, -m192): the reduced sweep,
// d = 256 odd lengths, grouped-query ratios 1, 2, 4, 8 at every head dimension, rows that see nothing, and
// shapes with many more tiles than SMs (each block loops over several tiles: the Q, K/V stage and turn
// phases carry from tile to tile), including causal Lq > Lk, where tiles with no key sit between tiles with
// work (and, for q2-late, the two Q tiles alternate over tiles with and without work). The launch itself is
// checked to be the persistent kernel's (no quiet fallback).
// d = 256 odd lengths, grouped-query ratios at every head dimension, rows that see nothing, long peaked rows.
void persistent_edge_cases() {
  sweep({1, 79, 81, 161}, {256});
  if (::testing::Test::HasFatalFailure()) return;
  gqa_sweep({33, 1000}, {64, 128, 256});
  if (::testing::Test::HasFatalFailure()) return;
  for (int d : {64, 128, 256})
    for (auto [Lq, Lk] : {std::pair<int, int>{1000, 17}, {129, 1}, {300, 128}}) {
      Shape s;
      s.B = 2, s.H = 1, s.Lq = Lq, s.Lk = Lk, s.d = d, s.causal = true;
      check_case(s);
      if (::testing::Test::HasFatalFailure()) return;
    }
  Shape peaked;  // long rows, the max moving across many tiles
  peaked.B = 1, peaked.H = 2, peaked.Lq = 300, peaked.Lk = 2049, peaked.d = 128, peaked.causal = true;
  peaked.scale = 1.0f;
  check_case(peaked, 2.0f);
}
std::vector<std::pair<const char*, FastPath>> persistent_paths() {
  return {{"wgmma-persistent", FastPath::WgmmaPersistent},
          {"wgmma-persistent-q2-late", FastPath::WgmmaPersistentQ2Late},
          {"wgmma-persistent-late", FastPath::WgmmaPersistentLate},
          {"wgmma-persistent-m192", FastPath::WgmmaPersistentM192}};
}
// Every case below: each persistent path is the default's kernel at some shape (fast_kernel_for).
void persistent_sweep(const char* name, FastPath path) {
  {
    SCOPED_TRACE(name);
    reduced_sweep(name, path);
    if (::testing::Test::HasFatalFailure()) return;
    ScopedEnv env("KL_FLASH_FAST_PATH", name);
    persistent_edge_cases();
    if (::testing::Test::HasFatalFailure()) return;
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        Shape many;  // 2 x 40 x 3 = 240 tiles
        many.B = 2, many.H = 40, many.Lq = 300, many.Lk = 300, many.d = d, many.causal = causal;
        many.dtype = causal ? "fp16" : "bf16";
        check_case(many);
        if (::testing::Test::HasFatalFailure()) return;
        Shape sparse;  // 3 x 50 x 4 = 600 tiles; causal: the first 250 rows of every head see nothing
        sparse.B = 3, sparse.H = 50, sparse.H_kv = 10, sparse.Lq = 400, sparse.Lk = 150, sparse.d = d;
        sparse.causal = causal;
        check_case(sparse);
        if (::testing::Test::HasFatalFailure()) return;
      }
    // Every contiguous shape takes the persistent kernel itself.
    for (int d : {64, 128, 256}) {
      FastParams p;
      p.B = 2, p.H = 3, p.Lq = 129, p.Lk = 200, p.d = d, p.scale = 0.1f, p.causal = true;
      Buffer<uint16_t> q(Backend::Cuda, size_t(6) * 129 * d), k(Backend::Cuda, size_t(6) * 200 * d),
          v(Backend::Cuda, size_t(6) * 200 * d), o(Backend::Cuda, size_t(6) * 129 * d);
      q.fill_bytes(0x3C), k.fill_bytes(0x3C), v.fill_bytes(0x3C);
      p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data();
      set_contiguous_strides(p);
      EXPECT_TRUE(run_fast_wgmma_persistent(p, path)) << "d=" << d;
      mem::synchronize(Backend::Cuda);
    }
  }
}
TEST(FlashAttentionFast, PersistentKernelMatchesReference) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  persistent_sweep("wgmma-persistent", FastPath::WgmmaPersistent);
}
TEST(FlashAttentionFast, PersistentQ2LateKernelMatchesReference) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  persistent_sweep("wgmma-persistent-q2-late", FastPath::WgmmaPersistentQ2Late);
}
TEST(FlashAttentionFast, PersistentLateKernelMatchesReference) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  persistent_sweep("wgmma-persistent-late", FastPath::WgmmaPersistentLate);
}
// Three consumer warpgroups in a ring (192 rows at d = 64): every case, the turns' ring included.
TEST(FlashAttentionFast, PersistentM192KernelMatchesReference) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  persistent_sweep("wgmma-persistent-m192", FastPath::WgmmaPersistentM192);
}
// 160 keys a tile at d = 128 (q2-late's kernel elsewhere): every case, the key tail tiles included (no power of
// two is a multiple of 160). Not bit-identical to the 128-key kernels: the keys fold in other groups.
TEST(FlashAttentionFast, PersistentQ2LateN160KernelMatchesReference) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  persistent_sweep("wgmma-persistent-q2-late-n160", FastPath::WgmmaPersistentQ2LateN160);
}
// The persistent kernels' same inputs twice give bit-identical outputs, and the same bits as the TMA kernel (same tiles, same arithmetic order per tile; only
// which block runs a tile changes).
TEST(FlashAttentionFast, PersistentKernelsEqualTmaKernel) {
  KL_REQUIRE_CUDA();
  if (!fast_wgmma_kernels_loaded()) GTEST_SKIP() << "no sm_90a code on this device";
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("d=" + std::to_string(d) + (causal ? " causal" : " non-causal"));
      const Qkv in = random_qkv(3, 60, 333, 517, d);  // 540 tiles: four or five per block
      const float scale = 1.0f / std::sqrt(float(d));
      const Array base = run_on_path("wgmma", in, causal, scale);
      size_t nan = 0;
      for (float x : base.data) nan += std::isnan(x) ? 1 : 0;
      ASSERT_EQ(nan, 0u);
      for (auto [name, path] : persistent_paths()) {
        ScopedEnv env("KL_FLASH_FAST_PATH", name);
        ASSERT_EQ(fast_path(), path);
        const Array a = run_fast_host(in.q, in.k, in.v, causal, scale, "bf16");
        const Array b = run_fast_host(in.q, in.k, in.v, causal, scale, "bf16");
        EXPECT_TRUE(same_bits(a, b)) << name << " moved";
        EXPECT_TRUE(same_bits(a, base)) << name << " differs from wgmma";
      }
    }
}

// Each query head of a GQA call gives exactly what the same kernel gives on multi-head inputs whose k and
// v repeat each kv head `group` times in a row (PyTorch's repeat_interleave(group, dim=1)): the index map
// is h / group, the arithmetic unchanged. Bit-identical, on every kernel the device has.
TEST(FlashAttentionFast, GroupedQueryEqualsRepeatedKv) {
  KL_REQUIRE_CUDA();
  std::vector<const char*> paths = {"mma"};
  if (fast_wgmma_kernels_loaded())
    for (FastPath named : kNamedWgmmaPaths) paths.push_back(fast_path_name(named));
  for (const char* path : paths)
    for (int d : {64, 128, 256})
      for (auto [H, H_kv] : {std::pair<int, int>{8, 1}, {8, 2}, {8, 4}, {6, 3}})
        for (bool causal : {false, true}) {
          ScopedEnv env("KL_FLASH_FAST_PATH", path);
          const int B = 2, Lq = 333, Lk = 517, group = H / H_kv;
          SCOPED_TRACE(std::string(path) + " d=" + std::to_string(d) + " H=" + std::to_string(H) +
                       " H_kv=" + std::to_string(H_kv) + (causal ? " causal" : ""));
          const Qkv in = random_qkv(B, H, Lq, Lk, d, H_kv);
          auto repeat = [&](const Array& a) {
            Array r = make_array({B, H, Lk, d}, std::vector<float>(size_t(B) * H * Lk * d));
            const size_t head = size_t(Lk) * d;
            for (int b = 0; b < B; ++b)
              for (int h = 0; h < H; ++h)
                std::copy_n(&a.data[(size_t(b) * H_kv + h / group) * head], head, &r.data[(size_t(b) * H + h) * head]);
            return r;
          };
          const float scale = 1.0f / std::sqrt(float(d));
          const Array gqa = run_fast_host(in.q, in.k, in.v, causal, scale, "bf16");
          const Array mha = run_fast_host(in.q, repeat(in.k), repeat(in.v), causal, scale, "bf16");
          size_t nan = 0;
          for (float x : gqa.data) nan += std::isnan(x) ? 1 : 0;
          ASSERT_EQ(nan, 0u);
          EXPECT_TRUE(same_bits(gqa, mha));
        }
}

// The kernel choice: wgmma exactly where the sm_90a code runs; the override is checked.
// The default on sm_90a picks its kernel by shape (as measured, docs/perf-log.md): the persistent kernel
// (d = 64 on 192 query rows without the mask and from L = 1025 to 4096 with it, else 128 rows, there two Q
// tiles + late rescale up to L = 512; d = 128 two Q tiles + late rescale, without the mask past L = 2048 on 160
// keys a tile; d = 256 late rescale) but on long causal rows (Lq > 8192; d = 256: Lq > 4096) and d = 256
// non-causal past Lq = 2048, which take the TMA kernel with the late rescale; every named path stays itself.
TEST(FlashAttentionFastHost, ByShapeChoosesTheKernelThatMeasuredFastest) {
  auto kernel = [](int L, int d, bool causal) {
    FastParams p;
    p.B = 1, p.H = 1, p.Lq = p.Lk = L, p.d = d, p.causal = causal;
    return fast_kernel_for(FastPath::WgmmaByShape, p);
  };
  for (bool causal : {false, true}) {
    EXPECT_EQ(kernel(512, 64, causal), causal ? FastPath::WgmmaPersistentQ2Late : FastPath::WgmmaPersistentM192);
    for (int L : {513, 1024, 8192})
      EXPECT_EQ(kernel(L, 64, causal), causal ? FastPath::WgmmaPersistent : FastPath::WgmmaPersistentM192);
    for (int L : {1025, 2048, 4096}) EXPECT_EQ(kernel(L, 64, causal), FastPath::WgmmaPersistentM192);
    for (int L : {512, 2048}) EXPECT_EQ(kernel(L, 128, causal), FastPath::WgmmaPersistentQ2Late);
    for (int L : {2049, 4096, 8192})
      EXPECT_EQ(kernel(L, 128, causal),
                causal ? FastPath::WgmmaPersistentQ2Late : FastPath::WgmmaPersistentQ2LateN160);
    EXPECT_EQ(kernel(4097, 64, causal), causal ? FastPath::WgmmaPersistent : FastPath::WgmmaPersistentM192);
    EXPECT_EQ(kernel(16384, 64, causal), causal ? FastPath::WgmmaLate : FastPath::WgmmaPersistentM192);
    EXPECT_EQ(kernel(8193, 128, causal), causal ? FastPath::WgmmaLate : FastPath::WgmmaPersistentQ2LateN160);
    EXPECT_EQ(kernel(16384, 128, causal), causal ? FastPath::WgmmaLate : FastPath::WgmmaPersistentQ2LateN160);
    EXPECT_EQ(kernel(2048, 256, causal), FastPath::WgmmaPersistentLate);
  }
  EXPECT_EQ(kernel(4096, 256, true), FastPath::WgmmaPersistentLate);
  EXPECT_EQ(kernel(4097, 256, true), FastPath::WgmmaLate);
  EXPECT_EQ(kernel(2049, 256, false), FastPath::WgmmaLate);
  FastParams p;
  p.Lq = 512, p.d = 64;
  for (FastPath named : {FastPath::MmaSync, FastPath::Wgmma, FastPath::WgmmaLate, FastPath::WgmmaPersistentLate})
    EXPECT_EQ(fast_kernel_for(named, p), named);
}

#ifdef KL_HAS_CUDA
// KL_FLASH_FAST_PATH, with or without a device: an unknown value is refused naming every kernel it may name;
// each name gives its own kernel where the sm_90a code runs and is refused, saying why, where it does not.
TEST(FlashAttentionFastHost, PathNamesAreTheirKernelsAndAnUnknownOneListsThemAll) {
  {
    ScopedEnv env("KL_FLASH_FAST_PATH", "tensor-magic");
    try {
      fast_path();
      FAIL() << "tensor-magic was taken";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("KL_FLASH_FAST_PATH=tensor-magic"), std::string::npos) << m;
      EXPECT_NE(m.find("mma, "), std::string::npos) << m;
      EXPECT_NE(m.find("or auto (unset)"), std::string::npos) << m;
      for (FastPath path : kNamedWgmmaPaths)
        EXPECT_NE(m.find(std::string(fast_path_name(path)) + (path == std::end(kNamedWgmmaPaths)[-1] ? " or" : ",")),
                  std::string::npos)
            << fast_path_name(path) << " not listed: " << m;
    }
  }
  for (FastPath path : kNamedWgmmaPaths) {
    ScopedEnv env("KL_FLASH_FAST_PATH", fast_path_name(path));
    if (fast_wgmma_kernels_loaded()) {
      EXPECT_EQ(fast_path(), path) << fast_path_name(path);
    } else {
      try {
        fast_path();
        ADD_FAILURE() << fast_path_name(path) << " was taken without the sm_90a code";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("no sm_90a code"), std::string::npos) << e.what();
      }
    }
  }
}

// The paths removed in issue 29 (no shape's default: docs/perf-log.md has their figures) are refused like any
// unknown name, on every machine: one line naming KL_FLASH_FAST_PATH, the value and the values allowed now.
TEST(FlashAttentionFastHost, RemovedPathNamesAreRefusedWithTheAllowedOnes) {
  const std::string allowed =
      "mma, wgmma, wgmma-late, wgmma-persistent, wgmma-persistent-q2-late, wgmma-persistent-late, "
      "wgmma-persistent-m192, wgmma-persistent-q2-late-n160 or auto (unset)";
  for (const char* removed : {"wgmma-cpasync", "wgmma-persistent-q2", "wgmma-persistent-q2-late-cross",
                              "wgmma-persistent-late-n176", "wgmma-persistent-m192-cross"}) {
    ScopedEnv env("KL_FLASH_FAST_PATH", removed);
    try {
      fast_path();
      ADD_FAILURE() << removed << " was taken";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("KL_FLASH_FAST_PATH=") + removed + " is out of range: allowed " + allowed);
    }
    for (FastPath path : kNamedWgmmaPaths) EXPECT_STRNE(fast_path_name(path), removed);
  }
}
#endif

TEST(FlashAttentionFast, PathChoice) {
  KL_REQUIRE_CUDA();
  const FastPath path = fast_path();
  std::printf("fast path on this device: %s\n", fast_path_name(path));
  EXPECT_EQ(path == FastPath::WgmmaByShape, fast_wgmma_kernels_loaded());
  {
    ScopedEnv env("KL_FLASH_FAST_PATH", "auto");
    EXPECT_EQ(fast_path(), path);
  }
  if (fast_wgmma_kernels_loaded()) {
    ScopedEnv env("KL_FLASH_FAST_PATH", "wgmma");
    EXPECT_EQ(fast_path(), FastPath::Wgmma);
  }
  {
    ScopedEnv env("KL_FLASH_FAST_PATH", "mma");
    EXPECT_EQ(fast_path(), FastPath::MmaSync);
  }
  {
    ScopedEnv env("KL_FLASH_FAST_PATH", "tensor-magic");
    EXPECT_THROW(fast_path(), InputError);
  }
  if (!fast_wgmma_kernels_loaded()) {
    ScopedEnv env("KL_FLASH_FAST_PATH", "wgmma");
    EXPECT_THROW(fast_path(), InputError);
  }
  for (auto [name, want] : persistent_paths()) {  // by name, refused without sm_90a
    ScopedEnv env("KL_FLASH_FAST_PATH", name);
    if (fast_wgmma_kernels_loaded())
      EXPECT_EQ(fast_path(), want);
    else
      EXPECT_THROW(fast_path(), InputError);
  }
  if (fast_wgmma_kernels_loaded()) {
    // The TMA kernel takes every contiguous shape the sweeps use (no quiet fallback to mma.sync).
    // Grouped-query shapes too (the K/V maps have H_kv heads).
    for (auto [Lq, Lk] : {std::pair<int, int>{1, 1}, {1000, 17}, {129, 2049}})
      for (int d : {64, 128, 256})
        for (int h_kv : {0, 1}) {
        SCOPED_TRACE("Lq=" + std::to_string(Lq) + " Lk=" + std::to_string(Lk) + " d=" + std::to_string(d) +
                     " H_kv=" + std::to_string(h_kv));
        FastParams p;
        p.B = 2, p.H = 3, p.H_kv = h_kv, p.Lq = Lq, p.Lk = Lk, p.d = d, p.scale = 0.1f;
        Buffer<uint16_t> q(Backend::Cuda, size_t(6) * Lq * d), k(Backend::Cuda, size_t(6) * Lk * d),
            v(Backend::Cuda, size_t(6) * Lk * d), o(Backend::Cuda, size_t(6) * Lq * d);
        q.fill_bytes(0x3C), k.fill_bytes(0x3C), v.fill_bytes(0x3C);
        p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data();
        set_contiguous_strides(p);
        EXPECT_TRUE(run_fast_wgmma(p));
        mem::synchronize(Backend::Cuda);
        }
  }
}

TEST(FlashAttentionFast, BenchQuickGivesRows) {
  KL_REQUIRE_CUDA();
  const std::vector<bench::Row> rows = bench_fast(Backend::Cuda, true);
  // d in {64, 128, 256} x causal in {no, yes}, L = 512; then the grouped-query rows (d = 128, causal and not)
  ASSERT_EQ(rows.size(), 8u);
  for (const bench::Row& r : rows) {
    SCOPED_TRACE(r.shape);
    EXPECT_GT(r.ms, 0);
    EXPECT_GT(r.tflops, 0);
  }
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(rows[i].shape.find(" H=16 Hkv=" + std::to_string(kGqaBenchKvHeads) + " L=512 d=128") != std::string::npos,
              i >= 6)
        << rows[i].shape;
  for (size_t i = 4; i < 6; ++i) EXPECT_NE(rows[i].shape.find(" H=8 L=512 d=256"), std::string::npos) << rows[i].shape;
}

// ---- [SECTION] CPU tests: input checks ------------------------------------------------------------------
TEST(FlashAttentionFastHost, BenchShapesAreSelectedInTheListsOrder) {
  const FastBenchSpec spec = fast_bench_spec(false, {64, 128, 256}, true);
  ASSERT_EQ(spec.shapes.size(), 42u);
  EXPECT_EQ(select_bench_shapes(spec, "").shapes.size(), 42u);
  // Two parts: the grouped-query L = 1024 row without the mask after the two d = 256 L = 16384 rows.
  const FastBenchSpec s = select_bench_shapes(spec, "L=16384 d=256,Hkv=2 L=1024 d=128 non-causal");
  ASSERT_EQ(s.shapes.size(), 3u);
  EXPECT_EQ(fast_bench_shape_text(s.shapes[0]), "B=1 H=8 L=16384 d=256 non-causal");
  EXPECT_EQ(fast_bench_shape_text(s.shapes[1]), "B=1 H=8 L=16384 d=256 causal");
  EXPECT_EQ(fast_bench_shape_text(s.shapes[2]), "B=16 H=16 Hkv=2 L=1024 d=128 non-causal");
  EXPECT_EQ(s.elements(), spec.elements());
  // A part named twice is timed twice.
  EXPECT_EQ(select_bench_shapes(spec, "Hkv=2 L=1024 d=128 causal,Hkv=2 L=1024 d=128 causal").shapes.size(), 2u);
  // A part that names nothing (here a grouped-query row of the backward's bench, which has none) is refused.
  const FastBenchSpec backward = fast_bench_spec(false, {64, 128, 256}, false);
  try {
    select_bench_shapes(backward, "L=512 d=64,Hkv=2");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("KL_FLASH_BENCH_SHAPES"), std::string::npos) << m;
    EXPECT_NE(m.find("\"Hkv=2\""), std::string::npos) << m;
    EXPECT_NE(m.find("36 shapes"), std::string::npos) << m;
  }
  EXPECT_THROW(select_bench_shapes(spec, "L=512,"), InputError);  // an empty part
}

TEST(FlashAttentionFastHost, RunFastHostRejectsBadInput) {
  auto arr = [](std::vector<int64_t> shape) {
    Array a;
    a.shape = shape;
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    a.data.assign(size_t(n), 0.5f);
    return a;
  };
  EXPECT_THROW(run_fast_host(arr({1, 1, 8, 32}), arr({1, 1, 8, 32}), arr({1, 1, 8, 32}), false, 0.1f, "bf16"),
               InputError);  // d = 32
  EXPECT_THROW(run_fast_host(arr({1, 1, 8, 64}), arr({1, 1, 9, 64}), arr({1, 1, 8, 64}), false, 0.1f, "bf16"),
               InputError);  // k, v differ
  // k and v's heads must divide q's (grouped-query attention): 2 of 3, and 2 of 1, are refused.
  EXPECT_THROW(run_fast_host(arr({1, 3, 8, 64}), arr({1, 2, 8, 64}), arr({1, 2, 8, 64}), false, 0.1f, "bf16"),
               InputError);
  EXPECT_THROW(run_fast_host(arr({1, 1, 8, 64}), arr({1, 2, 8, 64}), arr({1, 2, 8, 64}), false, 0.1f, "bf16"),
               InputError);
  EXPECT_THROW(run_fast_host(arr({3, 8, 64}), arr({2, 8, 64}), arr({2, 8, 64}), false, 0.1f, "bf16"), InputError);
  EXPECT_THROW(run_fast_host(arr({2, 2, 8, 64}), arr({1, 2, 8, 64}), arr({1, 2, 8, 64}), false, 0.1f, "bf16"),
               InputError);  // batch differs
  EXPECT_THROW(run_fast_host(arr({1, 4, 8, 64}), arr({1, 2, 8, 64}), arr({1, 1, 8, 64}), false, 0.1f, "bf16"),
               InputError);  // k and v differ in heads
  EXPECT_THROW(run_fast_host(arr({8, 64}), arr({1, 8, 64}), arr({1, 8, 64}), false, 0.1f, "bf16"), InputError);
  EXPECT_THROW(run_fast_host(arr({64}), arr({64}), arr({64}), false, 0.1f, "bf16"), InputError);  // rank 1
  EXPECT_THROW(run_fast_host(arr({8, 64}), arr({8, 128}), arr({8, 128}), false, 0.1f, "bf16"), InputError);
  EXPECT_THROW(run_fast_host(arr({1, 1, 8, 64}), arr({1, 1, 8, 64}), arr({1, 1, 8, 64}), false, 0.1f, "fp8"),
               InputError);
  EXPECT_THROW(run_fast_host(arr({1, 1, 8, 64}), arr({1, 1, 8, 64}), arr({1, 1, 8, 64}), false, 0.f, "bf16"),
               InputError);
  EXPECT_THROW(run_fast_host(arr({1, 1, 8, 64}), arr({1, 1, 8, 64}), arr({1, 1, 8, 64}), false, NAN, "bf16"),
               InputError);
  for (int64_t d : {96, 512}) {
    try {
      run_fast_host(arr({1, 1, 8, d}), arr({1, 1, 8, d}), arr({1, 1, 8, d}), false, 0.1f, "bf16");
      FAIL() << "d=" << d << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("d=" + std::to_string(d)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("{64, 128, 256}"), std::string::npos) << e.what();
    }
  }
}

FastParams valid_params() {
  FastParams p;
  p.q = p.k = p.v = reinterpret_cast<void*>(uintptr_t(0x10000));
  p.o = reinterpret_cast<void*>(uintptr_t(0x20000));
  p.B = 2, p.H = 3, p.Lq = 100, p.Lk = 50, p.d = 128, p.scale = 0.1f;
  set_contiguous_strides(p);
  return p;
}

TEST(FlashAttentionFastHost, ValidateNamesTheBadParameter) {
  EXPECT_NO_THROW(validate(valid_params()));
  auto expect_bad = [](FastParams p, const char* name) {
    try {
      validate(p);
      ADD_FAILURE() << "accepted a bad " << name;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name, 0), 0u) << e.what();
    }
  };
  FastParams p = valid_params();
  p.d = 96;
  expect_bad(p, "d=");
  p.d = 512;
  expect_bad(p, "d=");
  p = valid_params(), p.d = 256;
  set_contiguous_strides(p);
  EXPECT_NO_THROW(validate(p));
  p = valid_params(), p.Lq = 0;
  expect_bad(p, "Lq=");
  p = valid_params(), p.Lk = -1;
  expect_bad(p, "Lk=");
  p = valid_params(), p.B = 0;
  expect_bad(p, "B=");
  p = valid_params(), p.H = 70000;
  expect_bad(p, "H=");
  p = valid_params(), p.H_kv = 2;  // does not divide H = 3
  expect_bad(p, "H_kv=");
  p = valid_params(), p.H_kv = 6;  // more kv heads than query heads
  expect_bad(p, "H_kv=");
  p = valid_params(), p.H_kv = -1;
  expect_bad(p, "H_kv=");
  for (int h_kv : {0, 1, 3}) {
    p = valid_params(), p.H_kv = h_kv;
    set_contiguous_strides(p);
    EXPECT_NO_THROW(validate(p)) << "H_kv=" << h_kv;
  }
  p = valid_params(), p.scale = 0;
  expect_bad(p, "scale=");
  p = valid_params(), p.scale = INFINITY;
  expect_bad(p, "scale=");
  p = valid_params(), p.q = reinterpret_cast<void*>(uintptr_t(0x10008));
  expect_bad(p, "q=");
  p = valid_params(), p.o = nullptr;
  expect_bad(p, "o=");
  p = valid_params(), p.k_row_stride = 132;
  expect_bad(p, "stride=");
  p = valid_params(), p.v_row_stride = 64;  // < d
  expect_bad(p, "row stride=");
}

TEST(FlashAttentionFastHost, TileShapes) {
  for (FastPath path : {FastPath::MmaSync, FastPath::Wgmma, FastPath::WgmmaLate, FastPath::WgmmaPersistent,
                        FastPath::WgmmaPersistentQ2Late, FastPath::WgmmaPersistentLate, FastPath::WgmmaPersistentM192,
                        FastPath::WgmmaPersistentQ2LateN160, FastPath::WgmmaByShape})
  for (int d : {64, 128, 256}) {
    SCOPED_TRACE(std::string(fast_path_name(path)) + " d=" + std::to_string(d));
    const FastTileShape t = fast_tile_shape(d, path);
    if (path != FastPath::MmaSync) EXPECT_EQ(t.block_m % 64, 0);  // whole warpgroups of 64 rows
    EXPECT_EQ(t.head_dim, d);
    EXPECT_EQ(t.block_m, t.warps * 16);  // one warp per 16 query rows
    EXPECT_EQ(t.block_n % 16, 0);
    const bool q2 = path == FastPath::WgmmaPersistentQ2Late || path == FastPath::WgmmaPersistentQ2LateN160;
    const bool two_q = (q2 && d < 256) || (d == 64 && path == FastPath::WgmmaPersistentM192);
    if (path == FastPath::WgmmaPersistentQ2LateN160 && d == 128) EXPECT_EQ(t.block_n, 160);
    EXPECT_EQ(t.q_tiles, two_q ? 2 : 1);
    EXPECT_EQ(t.o_tiles, (path == FastPath::WgmmaPersistentQ2Late && d == 128) || t.block_m == 192 ? 1 : 0);
    EXPECT_EQ(t.smem_bytes, int64_t((t.q_tiles + t.o_tiles) * t.block_m + 2 * t.stages * t.block_n) * d * 2);
    // Fits the H100/H200 opt-in limit (the wgmma kernels ask for 1 KiB more to align their tiles, and
    // room for their mbarriers).
    EXPECT_LE(t.smem_bytes + (path != FastPath::MmaSync ? 1024 + 128 : 0), 227 * 1024);
  }
  EXPECT_THROW(fast_tile_shape(32), InputError);
  EXPECT_THROW(fast_tile_shape(512), InputError);
  // d = 256 shrinks the tiles: the TMA kernel keeps kBlockM 128 but 80 keys in 2 stages (224 KiB, where
  // d = 128's 128 keys in 3 stages would need 448 KiB); mma.sync keeps 32 keys (128 KiB).
  const FastTileShape w = fast_tile_shape(256, FastPath::Wgmma), w128 = fast_tile_shape(128, FastPath::Wgmma);
  EXPECT_EQ(w.block_m, 128);
  EXPECT_EQ(w.block_n, 80);
  EXPECT_EQ(w.stages, 2);
  EXPECT_EQ(w.smem_bytes, 224 * 1024);
  EXPECT_EQ(int64_t(w128.block_m + 2 * w128.stages * w128.block_n) * 256 * 2, 448 * 1024);
  // q2-late at d = 128: the second Q tile takes one K/V stage's place (2 x 32 + 2 x 64 KiB), and O's tile for
  // its bulk tensor stores the 32 KiB left.
  const FastTileShape q2 = fast_tile_shape(128, FastPath::WgmmaPersistentQ2Late);
  EXPECT_EQ(q2.stages, 2);
  EXPECT_EQ(q2.smem_bytes, 224 * 1024);
  // m192 at d = 64: three warpgroups of 64 rows, two Q tiles of 24 KiB + 3 x 32 KiB, and O's 24 KiB for its
  // stores.
  const FastTileShape m192 = fast_tile_shape(64, FastPath::WgmmaPersistentM192);
  EXPECT_EQ(m192.block_m, 192);
  EXPECT_EQ(m192.warps, 12);
  EXPECT_EQ(m192.q_tiles, 2);
  EXPECT_EQ(m192.smem_bytes, 168 * 1024);
  EXPECT_EQ(fast_tile_shape(128, FastPath::WgmmaPersistentM192).block_m, 128);
  const FastTileShape m = fast_tile_shape(256, FastPath::MmaSync);
  EXPECT_EQ(m.block_n, 32);
  EXPECT_EQ(m.smem_bytes, 128 * 1024);
}

// ---- [SECTION] CPU tests: the tile logic the kernel runs, against brute force ------------------------
TEST(FlashAttentionFastHost, LastVisibleKeyIsKeyVisible) {
  for (int Lq : {1, 5, 64, 129})
    for (int Lk : {1, 3, 64, 200})
      for (bool causal : {false, true})
        for (int i = 0; i < Lq + 130; ++i)  // rows past Lq too (the kernel's partial last block)
          for (int j = 0; j < Lk + 3; ++j)
            ASSERT_EQ(key_visible(i, j, Lq, Lk, causal), j <= last_visible_key(i, Lq, Lk, causal))
                << "Lq=" << Lq << " Lk=" << Lk << " causal=" << causal << " i=" << i << " j=" << j;
}

TEST(FlashAttentionFastHost, TileCountsAndMasksMatchBruteForce) {
  const int lengths[] = {1, 2, 17, 63, 64, 65, 127, 128, 129, 200, 257, 1000};
  for (auto bm_bn : {std::pair<int, int>{128, 64}, {128, 128}, {64, 64}, {64, 128}, {128, 80}, {128, 32}})
    for (int Lq : lengths)
      for (int Lk : lengths)
        for (bool causal : {false, true}) {
          const int bm = bm_bn.first, bn = bm_bn.second;
          SCOPED_TRACE("block_m=" + std::to_string(bm) + " block_n=" + std::to_string(bn) + " Lq=" +
                       std::to_string(Lq) + " Lk=" + std::to_string(Lk) + (causal ? " causal" : ""));
          const int all_tiles = ceil_div(Lk, bn);
          for (int mb = 0; mb < ceil_div(Lq, bm); ++mb) {
            // Brute force: the last tile holding a key some real row (i < Lq) of the block sees.
            int needed = 0;
            for (int i = mb * bm; i < std::min(Lq, mb * bm + bm); ++i)
              for (int j = 0; j < Lk; ++j)
                if (key_visible(i, j, Lq, Lk, causal)) needed = std::max(needed, j / bn + 1);
            const int n_tiles = key_tiles_for_block(mb, Lq, Lk, bm, bn, causal);
            ASSERT_GE(n_tiles, needed) << "m_block " << mb << " skips a tile with visible keys";
            ASSERT_LE(n_tiles, all_tiles);
            if (!causal) ASSERT_EQ(n_tiles, all_tiles);
            if (mb * bm + bm <= Lq) ASSERT_EQ(n_tiles, needed) << "m_block " << mb << " visits a fully masked tile";
            for (int nb = 0; nb < all_tiles; ++nb) {
              // The kernel's rows include those past Lq in a partial block (zero Q rows, never stored).
              bool all_visible = true;
              for (int i = mb * bm; i < mb * bm + bm; ++i)
                for (int j = nb * bn; j < nb * bn + bn; ++j)
                  if (!key_visible(i, j, Lq, Lk, causal)) all_visible = false;
              ASSERT_EQ(tile_needs_mask(mb, nb, Lq, Lk, bm, bn, causal), !all_visible)
                  << "m_block " << mb << " n_block " << nb;
            }
          }
        }
}

// The persistent kernels' tile order: every (query block, head, batch) exactly once, in the non-persistent
// grid's order (blockIdx.x fastest, causal query blocks last-first).
TEST(FlashAttentionFastHost, PersistentTileOrderCoversEveryTileOnce) {
  for (auto [n_m, H, B] : {std::tuple<int, int, int>{1, 1, 1}, {3, 2, 5}, {4, 32, 32}, {128, 16, 1}, {7, 3, 2}})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("n_m=" + std::to_string(n_m) + " H=" + std::to_string(H) + " B=" + std::to_string(B) +
                   (causal ? " causal" : ""));
      const int total = n_m * H * B;
      std::vector<int> seen(size_t(total), 0);
      for (int idx = 0; idx < total; ++idx) {
        const PersistentTile t = persistent_tile(idx, n_m, H, B, causal);
        ASSERT_TRUE(t.m_block >= 0 && t.m_block < n_m && t.h >= 0 && t.h < H && t.b >= 0 && t.b < B) << idx;
        ++seen[size_t((t.b * H + t.h) * n_m + t.m_block)];
        const int x = idx % n_m;  // x = query block (reversed for causal), y = head, z = batch
        ASSERT_EQ(t.m_block, causal ? n_m - 1 - x : x) << idx;
        ASSERT_EQ(t.h, (idx / n_m) % H) << idx;
        ASSERT_EQ(t.b, idx / (n_m * H)) << idx;
      }
      for (int c : seen) ASSERT_EQ(c, 1);
    }
}

// The snake hands every tile index to exactly one block, and it balances the blocks' causal work where
// the plain round robin does not (the reason causal tiles go out in a snake): at L = 512, d = 128 on 132
// SMs (4 query blocks a head, 132 = 0 mod 4, so round robin gives block 0 every head's heaviest block).
TEST(FlashAttentionFastHost, PersistentSnakeBalancesCausalWork) {
  for (auto [total, G] : {std::pair<int, int>{1, 1}, {5, 3}, {2048, 132}, {4096, 132}, {131, 132}, {265, 132}}) {
    std::vector<int> seen(size_t(total), 0);
    for (int c = 0; c < G; ++c)
      for (int k = 0; k * G < total; ++k) {
        const int idx = persistent_index(k, c, G, true);
        if (idx < total) ++seen[size_t(idx)];
        ASSERT_EQ(persistent_index(k, c, G, false), c + k * G);
      }
    for (int n : seen) ASSERT_EQ(n, 1) << "total " << total << " G " << G;
  }
  auto spread = [](int n_m, int H, int B, bool snake) {
    const int G = 132, total = n_m * H * B, L = n_m * 128;
    std::vector<double> work(G, 0.0);
    for (int c = 0; c < G; ++c)
      for (int k = 0; k * G < total; ++k) {
        const int idx = persistent_index(k, c, G, snake);
        if (idx >= total) continue;
        const PersistentTile t = persistent_tile(idx, n_m, H, B, true);
        work[size_t(c)] += key_tiles_for_block(t.m_block, L, L, 128, 128, true);
      }
    double mean = 0, most = 0;
    for (double w : work) mean += w / G, most = std::max(most, w);
    return most / mean;
  };
  EXPECT_GT(spread(128, 16, 1, false), 1.3);  // L = 16384
  EXPECT_LT(spread(4, 16, 32, true), 1.04);  // L = 512
  EXPECT_GT(spread(4, 16, 32, false), 1.5);
}

TEST(FlashAttentionFastHost, CheckHostShapesFillsDimensions) {
  auto arr = [](std::vector<int64_t> shape) {
    Array a;
    a.shape = shape;
    return a;
  };
  FastParams p;
  check_host_shapes(arr({3, 5, 7, 64}), arr({3, 5, 9, 64}), arr({3, 5, 9, 64}), p);
  EXPECT_EQ(p.B, 3);
  EXPECT_EQ(p.H, 5);
  EXPECT_EQ(p.Lq, 7);
  EXPECT_EQ(p.Lk, 9);
  EXPECT_EQ(p.d, 64);
  check_host_shapes(arr({5, 7, 128}), arr({5, 9, 128}), arr({5, 9, 128}), p);
  EXPECT_EQ(p.B, 1);
  EXPECT_EQ(p.H, 5);
  check_host_shapes(arr({2, 8, 7, 256}), arr({2, 2, 9, 256}), arr({2, 2, 9, 256}), p);
  EXPECT_EQ(p.d, 256);
  EXPECT_EQ(p.H_kv, 2);
  check_host_shapes(arr({7, 128}), arr({9, 128}), arr({9, 128}), p);
  EXPECT_EQ(p.B, 1);
  EXPECT_EQ(p.H, 1);
  EXPECT_EQ(p.Lq, 7);
  EXPECT_THROW(check_host_shapes(arr({0, 64}), arr({9, 64}), arr({9, 64}), p), InputError);  // Lq = 0
  // Grouped-query attention: k and v with H_kv heads dividing q's H.
  check_host_shapes(arr({3, 8, 7, 64}), arr({3, 2, 9, 64}), arr({3, 2, 9, 64}), p);
  EXPECT_EQ(p.H, 8);
  EXPECT_EQ(p.H_kv, 2);
  check_host_shapes(arr({6, 7, 128}), arr({3, 9, 128}), arr({3, 9, 128}), p);
  EXPECT_EQ(p.H, 6);
  EXPECT_EQ(p.H_kv, 3);
  check_host_shapes(arr({3, 5, 7, 64}), arr({3, 5, 9, 64}), arr({3, 5, 9, 64}), p);
  EXPECT_EQ(p.H_kv, 5);
  for (auto [h_q, h_kv] : {std::pair<int64_t, int64_t>{8, 3}, {2, 4}, {5, 2}}) {
    try {
      check_host_shapes(arr({1, h_q, 7, 64}), arr({1, h_kv, 9, 64}), arr({1, h_kv, 9, 64}), p);
      ADD_FAILURE() << "Hq=" << h_q << " Hkv=" << h_kv << " accepted";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("Hkv (heads of k and v)=" + std::to_string(h_kv) + " is out of range", 0), 0u) << m;
      EXPECT_NE(m.find("a divisor of Hq=" + std::to_string(h_q)), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

// The strides for grouped-query inputs: k and v's batch stride counts H_kv heads, q's and o's H.
TEST(FlashAttentionFastHost, ContiguousStridesWithFewerKvHeads) {
  FastParams p;
  p.B = 2, p.H = 8, p.H_kv = 2, p.Lq = 100, p.Lk = 50, p.d = 64;
  set_contiguous_strides(p);
  EXPECT_EQ(p.q_batch_stride, 8 * 100 * 64);
  EXPECT_EQ(p.o_batch_stride, 8 * 100 * 64);
  EXPECT_EQ(p.k_batch_stride, 2 * 50 * 64);
  EXPECT_EQ(p.v_batch_stride, 2 * 50 * 64);
  EXPECT_EQ(p.k_head_stride, 50 * 64);
  EXPECT_EQ(kv_heads(p), 2);
  p.H_kv = 0;
  set_contiguous_strides(p);
  EXPECT_EQ(p.k_batch_stride, 8 * 50 * 64);
  EXPECT_EQ(kv_heads(p), 8);
}

TEST(FlashAttentionFastHost, HostRoundingMatchesKnownValues) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.f, -8)), 1.0f);                            // tie -> even
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.f, -8)), 1.0f + std::ldexp(1.f, -6));  // tie -> even (up)
  EXPECT_EQ(round_fp16(1.0f + std::ldexp(1.f, -11)), 1.0f);
  EXPECT_EQ(round_fp16(1.0f + 3 * std::ldexp(1.f, -11)), 1.0f + std::ldexp(1.f, -9));
  EXPECT_EQ(round_fp16(std::ldexp(1.f, -25)), 0.0f);                       // half the smallest subnormal: even
  EXPECT_EQ(round_fp16(std::ldexp(3.f, -26)), std::ldexp(1.f, -24));       // 0.75 ulp -> 1 ulp
  EXPECT_EQ(round_fp16(65504.f), 65504.f);
}

}  // namespace
}  // namespace kl::flash_attention
