// The whole attention-weight matrix at sizes rung 4 refuses (its kernel holds K and V in shared memory):
//     W = softmax_rows(S),   S[i, j] = (Q[(i + shift) mod L] . K[j]) * scale,   Q, K [L, d], W [L, L]
// in two steps: a tiled scores kernel writes S to `scores` ([L, L] scratch), then rung 3's softmax
// (`fixed`, one row per program) reads S and writes W to `out`. `shift` rotates the queries, so a
// caller can recompute a visibly different matrix every frame (`bench-frame` does). On the CUDA backend
// `out` can be a mapped GL buffer: the weights never leave the device on their way to the screen.
// Versions:
//   reference   float64 on the host, the ground truth.
//   CUDA        scores: one block of 256 threads per 64 x 64 tile of S, the 64 query rows and 64 key rows
//               of the tile in shared memory, each thread 4 x 4 scores; then softmax::run(fixed).
//   CPU         the same tiles program by program; then softmax::run(fixed) on the CPU backend.
#pragma once
#include <cstdint>

#include "kernels/runtime/backend.h"

namespace kl::attention_weights {

constexpr int kTile = 64;
constexpr int kHeadDim = 64;  // the only head dimension: what bench-frame draws (L x 64)
constexpr int64_t kMaxLen = 16384;

// float64 ground truth, out [L, L].
void reference(const float* q, const float* k, double* out, int64_t L, float scale, int64_t shift);

// Pointers live where `b` runs: q, k [L, 64]; scores and out [L, L]. Throws InputError for L outside
// [1, 16384] or shift outside [0, L).
void run(Backend b, const float* q, const float* k, float* scores, float* out, int64_t L, float scale,
         int64_t shift);

namespace detail {
#ifdef KL_HAS_CUDA
void scores_cuda(const float* q, const float* k, float* scores, int64_t L, float scale, int64_t shift);
#endif
}  // namespace detail

}  // namespace kl::attention_weights
