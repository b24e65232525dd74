#include "kernels/rungs/attention_weights.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"
#include "kernels/rungs/softmax.h"

namespace kl::attention_weights {
namespace {

// One program: the 64 x 64 tile (row block tr, column block tc) of S, as a CUDA block computes it.
void scores_tile_cpu(const float* q, const float* k, float* s, int64_t L, float scale, int64_t shift, int64_t tr,
                     int64_t tc) {
  const int64_t r0 = tr * kTile, c0 = tc * kTile;
  for (int64_t i = r0; i < std::min(L, r0 + kTile); ++i) {
    const float* qi = q + ((i + shift) % L) * kHeadDim;
    for (int64_t j = c0; j < std::min(L, c0 + kTile); ++j) {
      const float* kj = k + j * kHeadDim;
      float acc = 0;
      for (int c = 0; c < kHeadDim; ++c) acc += qi[c] * kj[c];
      s[i * L + j] = acc * scale;
    }
  }
}

void check(int64_t L, int64_t shift) {
  require_range("L", L, 1, kMaxLen);
  require_range("shift", shift, 0, L - 1);
}

}  // namespace

void reference(const float* q, const float* k, double* out, int64_t L, float scale, int64_t shift) {
  check(L, shift);
  std::vector<double> row(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    const float* qi = q + ((i + shift) % L) * kHeadDim;
    double m = -INFINITY;
    for (int64_t j = 0; j < L; ++j) {
      double acc = 0;
      for (int c = 0; c < kHeadDim; ++c) acc += double(qi[c]) * k[j * kHeadDim + c];
      row[size_t(j)] = acc * double(scale);
      m = std::max(m, row[size_t(j)]);
    }
    double l = 0;
    for (int64_t j = 0; j < L; ++j) l += std::exp(row[size_t(j)] - m);
    for (int64_t j = 0; j < L; ++j) out[i * L + j] = std::exp(row[size_t(j)] - m) / l;
  }
}

void run(Backend b, const float* q, const float* k, float* scores, float* out, int64_t L, float scale,
         int64_t shift) {
  check(L, shift);
  const int64_t tiles = (L + kTile - 1) / kTile;
  if (b == Backend::Cpu) {
    for (int64_t tr = 0; tr < tiles; ++tr)
      for (int64_t tc = 0; tc < tiles; ++tc) scores_tile_cpu(q, k, scores, L, scale, shift, tr, tc);
  } else {
#ifdef KL_HAS_CUDA
    detail::scores_cuda(q, k, scores, L, scale, shift);
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  softmax::run(b, softmax::Variant::Fixed, scores, out, L, L);
}

}  // namespace kl::attention_weights
