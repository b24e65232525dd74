// Shapes and fresh random Q, K, V for the attention, flash-attention and backward tests: Q and K uniform
// in [-magnitude, magnitude] (large magnitudes make peaked softmaxes), V uniform in [-1, 1].
#pragma once
#include <vector>

#include "kernels/rungs/attention.h"
#include "test_util.h"

namespace kl::test {

// A [batch, heads, lq | lk, d] shape: attention::Shape, or flash_attention::Shape (derived from it).
template <class S>
S attention_shape(int64_t lq, int64_t lk, int d, int64_t batch = 1, int64_t heads = 1) {
  S s;
  s.batch = batch;
  s.heads = heads;
  s.lq = lq;
  s.lk = lk;
  s.d = d;
  return s;
}

struct AttentionInputs {
  std::vector<float> q, k, v;
};

inline AttentionInputs random_attention_inputs(const attention::Shape& s, float magnitude = 1.0f) {
  AttentionInputs in;
  in.q = random_floats(size_t(s.bh() * s.lq * s.d), -magnitude, magnitude);
  in.k = random_floats(size_t(s.bh() * s.lk * s.d), -magnitude, magnitude);
  in.v = random_floats(size_t(s.bh() * s.lk * s.d));
  return in;
}

}  // namespace kl::test
