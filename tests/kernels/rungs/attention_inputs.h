// Fresh random Q, K, V for the attention and flash-attention tests: Q and K uniform in
// [-magnitude, magnitude] (large magnitudes make peaked softmaxes), V uniform in [-1, 1].
#pragma once
#include <vector>

#include "kernels/rungs/attention.h"
#include "test_util.h"

namespace kl::test {

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
