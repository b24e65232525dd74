#include "app/panels/attention_inputs.h"

#include <random>

namespace kl::app {

void AttentionInputs::make(Backend b, int64_t lq, int64_t lk, int d, float magnitude, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uq(-magnitude, magnitude), uv(-1.0f, 1.0f);
  hq.resize(size_t(lq * d));
  hk.resize(size_t(lk * d));
  hv.resize(size_t(lk * d));
  for (float& x : hq) x = uq(rng);
  for (float& x : hk) x = uq(rng);
  for (float& x : hv) x = uv(rng);
  q.resize(b, hq.size());
  k.resize(b, hk.size());
  v.resize(b, hv.size());
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
}

}  // namespace kl::app
