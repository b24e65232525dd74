// Rung 2, CUDA side. Program `pid` (one CUDA block) covers elements pid*BLOCK_SIZE + arange(BLOCK_SIZE),
// seen as BLOCK_SIZE/4 groups of 4 consecutive elements. Each thread takes K groups (K = 1, 2 or 4,
// so up to 4 16-byte loads are in flight per thread), one Philox call per group: its 4 words are the
// 4 elements' uniforms. The key schedule depends only on the seed, the same for every thread.
#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/philox.h"
#include "kernels/rungs/relu_dropout.h"

namespace kl::relu_dropout::detail {

__device__ __forceinline__ float relu_d(float v) { return v > 0.0f ? v : 0.0f; }

// MODE 0: fused relu + dropout; 1: relu only; 2: dropout only (input already relu'd).
template <int MODE, int K>
__global__ void __launch_bounds__(1024) relu_dropout_kernel(const float* __restrict__ x,
                                                            float* __restrict__ out, int64_t n,
                                                            uint32_t threshold, float scale, uint64_t seed,
                                                            bool vec) {
  const int64_t groups_per_program = int64_t(blockDim.x) * K;
  const int64_t g_base = int64_t(blockIdx.x) * groups_per_program + threadIdx.x;
  float v[K][4];
  // Loads first, all K of them, so they are in flight together; the Philox rounds below do not depend
  // on them and overlap their latency.
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t g = g_base + int64_t(j) * blockDim.x;
    const int64_t i0 = 4 * g;
    if (vec && i0 + 3 < n) {
      const float4 a = __ldcs(reinterpret_cast<const float4*>(x) + g);
      v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) v[j][k] = (i0 + k < n) ? x[i0 + k] : 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t g = g_base + int64_t(j) * blockDim.x;
    const int64_t i0 = 4 * g;
    if (i0 >= n) continue;
    float r[4];
    if (MODE == 1) {
#pragma unroll
      for (int k = 0; k < 4; ++k) r[k] = relu_d(v[j][k]);
    } else {
      const philox::U32x4 w = philox::group_words(seed, uint64_t(g));
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float a = MODE == 2 ? v[j][k] : relu_d(v[j][k]);
        r[k] = philox::dropped(w.v[k], threshold) ? 0.0f : a * scale;
      }
    }
    if (vec && i0 + 3 < n) {
      __stcs(reinterpret_cast<float4*>(out) + g, make_float4(r[0], r[1], r[2], r[3]));
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (i0 + k < n) out[i0 + k] = r[k];
    }
  }
}

template <int MODE>
static void launch_mode(const float* x, float* out, int64_t n, uint32_t thr, float scale, uint64_t seed,
                        int block_size, bool vec) {
  const int64_t grid = (n + block_size - 1) / block_size;
  const int groups = block_size / 4;  // 8 .. 1024
  const int threads = groups < 256 ? groups : 256;
  const int k = groups / threads;     // 1, 2 or 4
  const dim3 g{unsigned(grid)}, t{unsigned(threads)};
  if (k == 1)
    cuda::launch("relu_dropout<K=1>", relu_dropout_kernel<MODE, 1>, g, t, 0, 0, x, out, n, thr, scale, seed, vec);
  else if (k == 2)
    cuda::launch("relu_dropout<K=2>", relu_dropout_kernel<MODE, 2>, g, t, 0, 0, x, out, n, thr, scale, seed, vec);
  else
    cuda::launch("relu_dropout<K=4>", relu_dropout_kernel<MODE, 4>, g, t, 0, 0, x, out, n, thr, scale, seed, vec);
}

// ---- `fused` candidates (issue 16): one GPU run times them all (KL_RELU_DROPOUT_FAST=NAME) ---------------
//   tile-k4    relu_dropout_kernel<0, K> above: one program per block, 64-bit indices, __ldcs/__stcs.
//   u32*       the same program with 32-bit indices and a 32-bit Philox counter (n < 2^31, so the
//              counter's high word is the literal 0 and the first round folds): fewer integer ops per group.
//   u32-plain  plain loads and stores; u32-t128 / u32-t512: 128 / 512 threads per block, K = BLOCK_SIZE/4
//              / threads (8 / 2 groups, 16-byte loads in flight per thread at BLOCK_SIZE 4096; t512 fits
//              in 32 registers, a full 2048 threads per SM); wave-*: a full wave of blocks (SMs x resident
//              blocks per SM) walking the programs pid, pid + gridDim.x, ...
// Every candidate computes the same bits (the mask is a function of (seed, i) alone).
static_assert(kMaxRunN + 4096 < (int64_t(1) << 32), "32-bit element indices need n + BLOCK_SIZE < 2^32");

template <bool STREAM>
__device__ __forceinline__ float4 load4(const float* p) {
  if constexpr (STREAM) return __ldcs(reinterpret_cast<const float4*>(p));
  else return *reinterpret_cast<const float4*>(p);
}
template <bool STREAM>
__device__ __forceinline__ void store4(float* p, float4 v) {
  if constexpr (STREAM) __stcs(reinterpret_cast<float4*>(p), v);
  else *reinterpret_cast<float4*>(p) = v;
}

template <int K, bool STREAM>
__global__ void __launch_bounds__(512) relu_dropout_fused_u32(const float* __restrict__ x, float* __restrict__ out,
                                                              uint32_t n, uint32_t programs, uint32_t threshold,
                                                              float scale, uint32_t key0, uint32_t key1, bool vec) {
  const uint32_t groups_per_program = blockDim.x * K;
  for (uint32_t pid = blockIdx.x; pid < programs; pid += gridDim.x) {
    const uint32_t g_base = pid * groups_per_program + threadIdx.x;
    float v[K][4];
#pragma unroll
    for (int j = 0; j < K; ++j) {  // all K loads first, in flight together under the Philox rounds below
      const uint32_t i0 = 4 * (g_base + j * blockDim.x);
      if (vec && i0 + 3 < n) {
        const float4 a = load4<STREAM>(x + i0);
        v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w;
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) v[j][k] = (i0 + k < n) ? x[i0 + k] : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const uint32_t g = g_base + j * blockDim.x, i0 = 4 * g;
      if (i0 >= n) continue;
      const philox::U32x4 w = philox::philox4x32_10(philox::U32x4{{g, 0u, 0u, 0u}}, philox::U32x2{{key0, key1}});
      float r[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) r[k] = philox::dropped(w.v[k], threshold) ? 0.0f : relu_d(v[j][k]) * scale;
      if (vec && i0 + 3 < n) {
        store4<STREAM>(out + i0, make_float4(r[0], r[1], r[2], r[3]));
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (i0 + k < n) out[i0 + k] = r[k];
      }
    }
  }
}

namespace {

// u32 false: relu_dropout_kernel<0, K> (the tile-k4 candidate); otherwise relu_dropout_fused_u32 with
// `threads` per block at most (K = BLOCK_SIZE / 4 / threads) and a full wave of blocks when `wave`.
struct FusedCandidate {
  const char* name;
  bool u32, stream;
  int threads;
  bool wave;
};
constexpr FusedCandidate kFusedCandidates[] = {
    {"tile-k4", false, true, 256, false},  {"u32", true, true, 256, false},      {"u32-plain", true, false, 256, false},
    {"u32-t128", true, true, 128, false},  {"u32-t512", true, true, 512, false}, {"wave-u32", true, true, 256, true},
    {"wave-u32-t512", true, true, 512, true},
};
// The candidate `fused` runs on the CUDA backend when KL_RELU_DROPOUT_FAST is unset: u32-plain, the fastest
// on the H200 (0.963 of copy at 2^26; tile-k4 0.922 in the same run; docs/perf-log.md).
constexpr const char* kDefaultFused = "u32-plain";

const FusedCandidate& fused_candidate() {
  const char* v = std::getenv("KL_RELU_DROPOUT_FAST");
  const std::string name = v && *v ? v : kDefaultFused;
  std::string allowed;
  for (const FusedCandidate& c : kFusedCandidates) {
    if (name == c.name) return c;
    allowed += std::string(allowed.empty() ? "" : ", ") + c.name;
  }
  throw InputError(out_of_range_message("KL_RELU_DROPOUT_FAST", name, allowed));
}

template <int K, bool STREAM>
void launch_u32_k(const float* x, float* out, int64_t n, int64_t programs, int threads, bool wave, uint32_t thr,
                  float scale, uint64_t seed, bool vec) {
  int64_t grid = programs;
  if (wave) {
    int dev = 0, sms = 0, per_sm = 0;
    KL_CUDA_CHECK(cudaGetDevice(&dev));
    KL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    KL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, relu_dropout_fused_u32<K, STREAM>, threads, 0));
    const int64_t wave_blocks = int64_t(sms) * (per_sm > 0 ? per_sm : 1);
    if (grid > wave_blocks) grid = wave_blocks;
  }
  cuda::launch("relu_dropout_fused_u32", relu_dropout_fused_u32<K, STREAM>, dim3(unsigned(grid)),
               dim3(unsigned(threads)), 0, 0, x, out, uint32_t(n), uint32_t(programs), thr, scale, uint32_t(seed),
               uint32_t(seed >> 32), vec);
}

template <bool STREAM>
void launch_u32(const FusedCandidate& c, const float* x, float* out, int64_t n, uint32_t thr, float scale,
                uint64_t seed, int block_size, bool vec) {
  const int64_t programs = (n + block_size - 1) / block_size;
  const int groups = block_size / 4;  // 8 .. 1024
  const int threads = groups < c.threads ? groups : c.threads;
  const int k = groups / threads;  // 1, 2, 4, or 8 at 128 threads
  if (k == 1) launch_u32_k<1, STREAM>(x, out, n, programs, threads, c.wave, thr, scale, seed, vec);
  else if (k == 2) launch_u32_k<2, STREAM>(x, out, n, programs, threads, c.wave, thr, scale, seed, vec);
  else if (k == 4) launch_u32_k<4, STREAM>(x, out, n, programs, threads, c.wave, thr, scale, seed, vec);
  else launch_u32_k<8, STREAM>(x, out, n, programs, threads, c.wave, thr, scale, seed, vec);
}

void launch_fused(const float* x, float* out, int64_t n, uint32_t thr, float scale, uint64_t seed, int block_size,
                  bool vec) {
  const FusedCandidate& c = fused_candidate();
  if (!c.u32) launch_mode<0>(x, out, n, thr, scale, seed, block_size, vec);
  else if (c.stream) launch_u32<true>(c, x, out, n, thr, scale, seed, block_size, vec);
  else launch_u32<false>(c, x, out, n, thr, scale, seed, block_size, vec);
}

}  // namespace

void run_cuda_elementwise(int mode, const float* x, float* out, int64_t n, uint32_t threshold, float scale,
                          uint64_t seed, int block_size) {
  const bool vec = (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(out) % 16 == 0);
  if (mode == 0) launch_fused(x, out, n, threshold, scale, seed, block_size, vec);
  else if (mode == 1) launch_mode<1>(x, out, n, threshold, scale, seed, block_size, vec);
  else launch_mode<2>(x, out, n, threshold, scale, seed, block_size, vec);
}

// ---- for the views -----------------------------------------------------------------------------------------
__global__ void summarize_kernel(const float* x, const float* out, const uint8_t* keep, int64_t n, float lo,
                                 float hi, int bins, unsigned long long* c) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (keep[i] == kKept) {
      atomicAdd(&c[bins + 2], 1ull);
      if (x[i] > 0.0f) {
        atomicAdd(&c[bins + 4], 1ull);
        const float r = out[i] / x[i];
        int k;
        if (r < lo) k = bins;
        else if (r >= hi) k = bins + 1;
        else k = min(bins - 1, int(double(r - lo) / double(hi - lo) * bins));
        atomicAdd(&c[k], 1ull);
      }
    } else if (keep[i] == kDropped) {
      atomicAdd(&c[bins + 3], 1ull);
    }
  }
}

void summarize_cuda(const float* x, const float* out, const uint8_t* keep, int64_t n, float lo, float hi, int bins,
                    unsigned long long* counts) {
  int64_t blocks = (n + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  cuda::launch("relu_dropout_summarize", summarize_kernel, dim3(unsigned(blocks)), dim3(256), 0, 0, x, out, keep, n,
               lo, hi, bins, counts);
}

__global__ void mask_cells_kernel(const uint8_t* keep, int64_t n, int64_t count, float* cells) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float v = 0.0f, s = cell_value(kCellNormal);
  if (i >= n) s = cell_value(kCellMasked);
  else if (keep[i] == kKept) v = 1.0f;
  else if (keep[i] != kDropped) s = cell_value(kCellUnwritten);
  cells[2 * i] = v;
  cells[2 * i + 1] = s;
}

void mask_cells_cuda(const uint8_t* keep, int64_t n, int64_t cells_count, float* cells) {
  cuda::launch("relu_dropout_mask_cells", mask_cells_kernel, dim3(unsigned((cells_count + 255) / 256)), dim3(256), 0,
               0, keep, n, cells_count, cells);
}

}  // namespace kl::relu_dropout::detail
