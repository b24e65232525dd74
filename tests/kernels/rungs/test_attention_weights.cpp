// kernels/attention_weights.{h,cpp,cu}: W = softmax_rows(Q_shifted K^T * scale) on both backends against
// the float64 reference, outputs and scores NaN-poisoned before every launch. L on both sides of the
// 64-row tile (1, 63, 64, 65, 200), shifts 0, 1, L-1; bad L and shift refused.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/rungs/attention_weights.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

namespace aw = attention_weights;

TEST(AttentionWeights, MatchesReferenceBothBackends) {
  for (Backend b : test::backends())
    for (int64_t L : {1, 2, 63, 64, 65, 200})
      for (int64_t shift : {int64_t(0), int64_t(1), L - 1}) {
        if (shift >= L) continue;
        const std::vector<float> q = test::random_floats(size_t(L) * aw::kHeadDim, -2, 2);
        const std::vector<float> k = test::random_floats(size_t(L) * aw::kHeadDim, -2, 2);
        const float scale = 1.0f / 8.0f;
        Buffer<float> dq(b, q.size()), dk(b, k.size()), s(b, size_t(L * L)), out(b, size_t(L * L));
        dq.upload(q);
        dk.upload(k);
        s.fill_bytes(0xFF);
        out.fill_bytes(0xFF);
        aw::run(b, dq.data(), dk.data(), s.data(), out.data(), L, scale, shift);
        mem::synchronize(b);
        const std::vector<float> got = out.to_host();
        std::vector<double> ref(size_t(L * L));
        aw::reference(q.data(), k.data(), ref.data(), L, scale, shift);
        double num = 0, den = 0;
        int64_t nan = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          nan += std::isnan(got[i]);
          num += (got[i] - ref[i]) * (got[i] - ref[i]);
          den += ref[i] * ref[i];
        }
        EXPECT_EQ(nan, 0) << backend_name(b) << " L=" << L << " shift=" << shift;
        EXPECT_LT(std::sqrt(num / den), 1e-5) << backend_name(b) << " L=" << L << " shift=" << shift;
        double row0 = 0;
        for (int64_t j = 0; j < L; ++j) row0 += got[size_t(j)];
        EXPECT_NEAR(row0, 1.0, 1e-5) << backend_name(b) << " L=" << L;
      }
}

TEST(AttentionWeights, ShiftRotatesTheQueries) {
  // Row i with shift s is row (i + s) mod L with shift 0.
  const int64_t L = 70;
  const std::vector<float> q = test::random_floats(size_t(L) * aw::kHeadDim);
  const std::vector<float> k = test::random_floats(size_t(L) * aw::kHeadDim);
  std::vector<double> a(size_t(L * L)), b(size_t(L * L));
  aw::reference(q.data(), k.data(), a.data(), L, 0.125f, 0);
  aw::reference(q.data(), k.data(), b.data(), L, 0.125f, 5);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) ASSERT_EQ(b[size_t(i * L + j)], a[size_t(((i + 5) % L) * L + j)]);
}

TEST(AttentionWeights, BadShapesRefused) {
  Buffer<float> q(Backend::Cpu, 64 * 4), k(Backend::Cpu, 64 * 4), s(Backend::Cpu, 16), o(Backend::Cpu, 16);
  EXPECT_THROW(aw::run(Backend::Cpu, q.data(), k.data(), s.data(), o.data(), 0, 1.0f, 0), InputError);
  EXPECT_THROW(aw::run(Backend::Cpu, q.data(), k.data(), s.data(), o.data(), 4, 1.0f, 4), InputError);
  EXPECT_THROW(aw::run(Backend::Cpu, q.data(), k.data(), s.data(), o.data(), 4, 1.0f, -1), InputError);
  EXPECT_THROW(aw::run(Backend::Cpu, q.data(), k.data(), s.data(), o.data(), aw::kMaxLen + 1, 1.0f, 0), InputError);
}

}  // namespace
}  // namespace kl
