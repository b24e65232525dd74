// Gallery: dropout scaling the survivors by p instead of 1/(1-p): the survivor histogram's spike moves off 1/(1-p) (to p: at p = 0.5, from 2 down to 0.5) and the output no longer matches the reference, while the mask and the drop rate stay right.
// Rung 2: fused ReLU + dropout, and why a random kernel is tested by its distribution.
//   out[i] = keep(i) ? max(x[i], 0) * scale : 0,   keep(i) = u(seed, i) >= p,   scale = 1 / (1 - p)
//
// Kernel: relu_dropout_traced(x, out, keep, lane_state, n, p, threshold, scale, seed, BLOCK_SIZE), launched
// as ceil(n / BLOCK_SIZE) programs (CUDA blocks) of min(BLOCK_SIZE, 1024) threads.
//   x           the input, n elements
//   out         the output, n elements; its trace records which program stored each element, and how often
//   keep        the mask the views draw: 1 where element i survives, 0 where it is dropped
//   lane_state  one entry per (program, offset): 1 when the offset's mask (offset < n) is on, 0 when off
//   n           the number of elements
//   p           the drop probability, in [0, 1)
//   threshold   p as an integer: ceil(p * 2^24), computed exactly by the host from p; element i is dropped
//               when the top 24 bits of its random word are below it (the same test as u < p, in integers)
//   scale       1 / (1 - p), rounded once to float32 by the host: what every survivor is multiplied by, so
//               the expected value of out[i] is relu(x[i]) (inverted dropout)
//   seed        the Philox key (up to 2^32 - 1)
//   BLOCK_SIZE  elements per program (a power of two in [32, 4096]); above 1024, thread t takes offsets
//               t, t + blockDim.x, ... of its program
//
// The random numbers: Philox-4x32-10 (Salmon et al., SC'11; Random123's function, the generator behind
// cuRAND's Philox and Triton's tl.rand), written out below so this file needs nothing else. It is a pure
// function of (counter, key): element i takes word i % 4 of Philox at counter i / 4 under key seed, so its
// number depends on (seed, i) only, never on BLOCK_SIZE or on which thread ran it, and the fast kernel
// (which makes one call per 4 consecutive elements) and this one draw the same bits on every backend.
// Triton's tl.rand(seed, i) keys it another way (word 0 at counter i), so its masks differ from these.
#include "kl.cuh"

// ---- Philox-4x32-10 --------------------------------------------------------------------------------------
__device__ inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t prod = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(prod >> 32);
  return uint32_t(prod);
}

// Element i's 32 random bits under `seed`: word i % 4 of philox4x32_10(counter = (i / 4, 0, 0), key = seed).
__device__ inline uint32_t philox_word(uint64_t seed, uint64_t i) {
  const uint64_t group = i / 4;
  uint32_t c0 = uint32_t(group), c1 = uint32_t(group >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);  // the round multipliers
    const uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 += 0x9E3779B9u;  // the key's Weyl increments (golden ratio, sqrt(3) - 1)
    k1 += 0xBB67AE85u;
  }
  const uint32_t w = i % 4;
  return w == 0 ? c0 : w == 1 ? c1 : w == 2 ? c2 : c3;
}

// ---- the kernel ----------------------------------------------------------------------------------------
__global__ void relu_dropout_traced(kl::Tensor<float> x, kl::Tensor<float> out, kl::Tensor<uint8_t> keep,
                                    kl::Tensor<uint8_t> lane_state, int64_t n, float p, uint32_t threshold,
                                    float scale, int64_t seed, int BLOCK_SIZE) {
  const int64_t pid = kl::program_id();
  for (int64_t lane = threadIdx.x; lane < BLOCK_SIZE; lane += blockDim.x) {
    const int64_t offset = pid * BLOCK_SIZE + lane;
    const bool mask = offset < n;
    lane_state.store(offset, mask ? 1 : 0);
    if (!mask) continue;
    const float v = x.load(offset);
    const float r = v > 0.0f ? v : 0.0f;                                      // relu
    const bool drop = (philox_word(uint64_t(seed), uint64_t(offset)) >> 8) < threshold;  // u < p
    out.store(offset, drop ? 0.0f : r * p);  // BUG: survivors scaled by p, not by scale = 1/(1-p)
    keep.store(offset, drop ? 0 : 1);
  }
  (void)p;  // the host folds p into threshold and scale exactly; it is here for edits that use it
}
