// The synthetic Q, K and V that both attention panels (rungs 4 and 5) draw, so the two rungs show the
// same numbers for the same settings: Q and K uniform in [-magnitude, magnitude] (the magnitude sets how
// peaked the softmax is), V uniform in [-1, 1], drawn in that order from one seed, then uploaded to the
// backend.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/runtime/buffer.h"

namespace kl::app {

struct AttentionInputs {
  std::vector<float> hq, hk, hv;  // host copies, [L, d] row-major
  Buffer<float> q, k, v;          // where the backend runs

  void make(Backend b, int64_t lq, int64_t lk, int d, float magnitude, uint32_t seed);
};

}  // namespace kl::app
