// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind cuRAND's Philox and Triton's `tl.rand` (same function, keyed another
// way: tl.rand(seed, i) takes word 0 at counter i, so its dropout masks differ from ours). A pure function of
// (counter, key): no state, so element i of a launch can draw its number without knowing who else ran,
// and the CPU and CUDA backends get the same bits whatever the launch shape.
//
// The project's keying (used by every kernel that draws random numbers):
//   key     = (seed_lo, seed_hi)                       the user's seed, 64 bits
//   counter = (group_lo, group_hi, 0, 0), group = i / 4  one call per 4 consecutive elements
//   word    = result[i % 4]                            element i's 32 random bits
// so the number of element i depends on (seed, i) only, never on BLOCK_SIZE or on which thread ran it.
//
// Uniform floats come from the top 24 bits: u = (word >> 8) * 2^-24, exactly representable in float32,
// so host and device agree bit for bit (no rounding anywhere) and u lies in [0, 1) with 2^24 levels.
// Tested against Random123's known-answer vectors (tests/kernels/test_philox.cpp).
#pragma once
#include <cstdint>

#include "kernels/runtime/backend.h"

#ifdef __CUDACC__
#define KL_HD __host__ __device__ __forceinline__
#else
#define KL_HD inline
#endif

namespace kl::philox {

struct U32x4 {
  uint32_t v[4];
};
struct U32x2 {
  uint32_t v[2];
};

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments (golden ratio, sqrt(3)-1)
constexpr int kRounds = 10;

KL_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
#ifdef __CUDA_ARCH__
  *hi = __umulhi(a, b);
  return a * b;
#else
  const uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  return uint32_t(p);
#endif
}

// One Philox round: two 32x32->64 multiplies, the high halves mixed with the other words and the key.
KL_HD void philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
  uint32_t hi0, hi1;
  const uint32_t lo0 = mulhilo(kM0, c[0], &hi0);
  const uint32_t lo1 = mulhilo(kM1, c[2], &hi1);
  const uint32_t n0 = hi1 ^ c[1] ^ k0;
  const uint32_t n2 = hi0 ^ c[3] ^ k1;
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}

// philox4x32_10(counter, key): Random123's function, 10 rounds, key bumped by the Weyl constants
// between rounds.
KL_HD U32x4 philox4x32_10(U32x4 ctr, U32x2 key) {
  uint32_t c[4] = {ctr.v[0], ctr.v[1], ctr.v[2], ctr.v[3]};
  uint32_t k0 = key.v[0], k1 = key.v[1];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int r = 0; r < kRounds; ++r) {
    philox_round(c, k0, k1);
    k0 += kW0;
    k1 += kW1;
  }
  return U32x4{{c[0], c[1], c[2], c[3]}};
}

// The 4 random words for elements 4*group .. 4*group+3 under `seed` (the project's keying above).
KL_HD U32x4 group_words(uint64_t seed, uint64_t group) {
  return philox4x32_10(U32x4{{uint32_t(group), uint32_t(group >> 32), 0u, 0u}},
                       U32x2{{uint32_t(seed), uint32_t(seed >> 32)}});
}

// Element i's random word: word i % 4 of group i / 4.
KL_HD uint32_t element_word(uint64_t seed, uint64_t i) { return group_words(seed, i / 4).v[i % 4]; }

// Uniform in [0, 1): the top 24 bits scaled by 2^-24 (exact in float32, identical on host and device).
KL_HD float uniform(uint32_t word) { return float(word >> 8) * 5.9604644775390625e-08f; }

// Dropout's test "u < p" done in integers: u < p  <=>  (word >> 8) < ceil(p * 2^24). Computed once on
// the host for a p in [0, 1); the kernels then compare integers, which is the same decision, exactly.
inline uint32_t drop_threshold(double p) {
  const double t = p * 16777216.0;  // 2^24; exact for any double p (a power-of-two scaling)
  uint32_t k = uint32_t(t);         // floor
  if (double(k) < t) ++k;           // ceil
  return k;
}
KL_HD bool dropped(uint32_t word, uint32_t threshold) { return (word >> 8) < threshold; }

// Runs philox4x32_10 on n (counter, key) pairs where backend `b` runs (pointers live there): the
// device build of the same function, so tests can check the CUDA compiler's bits against the host's.
void run_batch(Backend b, const U32x4* ctr, const U32x2* key, U32x4* out, int64_t n);

}  // namespace kl::philox

#undef KL_HD
