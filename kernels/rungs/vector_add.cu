// Rung 1, CUDA side: the fast version. (The traced one is the editable source
// kernels/editable/sources/vector_add.cu, built by nvcc into this library and launched by vector_add.cpp.)
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/vector_add.h"

namespace kl::vector_add::detail {

// Memory-bound: 16-byte loads and stores, several in flight per thread, grid sized to the machine.
__global__ void vector_add_fast(const float4* __restrict__ x, const float4* __restrict__ y,
                                float4* __restrict__ out, int64_t n4) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n4; i += 4 * stride) {
    float4 a[4], b[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      a[k] = __ldcs(x + i + k * stride);
      b[k] = __ldcs(y + i + k * stride);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      __stcs(out + i + k * stride, make_float4(a[k].x + b[k].x, a[k].y + b[k].y, a[k].z + b[k].z, a[k].w + b[k].w));
  }
  for (; i < n4; i += stride) {
    float4 a = __ldcs(x + i), b = __ldcs(y + i);
    __stcs(out + i, make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w));
  }
}

// The `fast` candidates besides the grid-stride kernel above ("grid-stride"): the array as tiles of THREADS * K float4s (4K floats per thread,
// thread t taking float4s t, t + THREADS, ... of its tile, so each warp's accesses are 512 contiguous bytes),
// block b taking tiles b, b + gridDim.x, ...: one tile per block when the grid has a block per tile
// ("tile-*"), a full wave (SMs x resident blocks per SM) walking the tiles otherwise ("wave-*").
// STREAM: __ldcs/__stcs (evict-first) or plain loads and stores. THREADS 256, or 128 as Triton's add_kernel
// (BLOCK_SIZE 1024 over num_warps = 4: two float4s a thread, a 4 KiB tile a block) in "*-t128".

template <bool STREAM>
__device__ __forceinline__ float4 load4(const float4* p) {
  if constexpr (STREAM) return __ldcs(p);
  else return *p;
}
template <bool STREAM>
__device__ __forceinline__ void store4(float4* p, float4 v) {
  if constexpr (STREAM) __stcs(p, v);
  else *p = v;
}
__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <int K, bool STREAM, int THREADS>
__global__ void __launch_bounds__(THREADS) vector_add_tiles(const float4* __restrict__ x,
                                                                 const float4* __restrict__ y,
                                                                 float4* __restrict__ out, int64_t n4) {
  constexpr int64_t kTile = int64_t(THREADS) * K;
  const int64_t tiles = (n4 + kTile - 1) / kTile;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t base = t * kTile + threadIdx.x;
    if (base + (K - 1) * THREADS < n4) {  // a whole tile: all K loads of x and y in flight at once
      float4 a[K], b[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        a[k] = load4<STREAM>(x + base + k * THREADS);
        b[k] = load4<STREAM>(y + base + k * THREADS);
      }
#pragma unroll
      for (int k = 0; k < K; ++k) store4<STREAM>(out + base + k * THREADS, add4(a[k], b[k]));
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t i = base + k * THREADS;
        if (i < n4) store4<STREAM>(out + i, add4(load4<STREAM>(x + i), load4<STREAM>(y + i)));
      }
    }
  }
}

__global__ void vector_add_tail(const float* x, const float* y, float* out, int64_t begin, int64_t n) {
  const int64_t i = begin + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i];
}

namespace {

// K = 0: the grid-stride kernel above; otherwise vector_add_tiles<K, stream, threads>, one block per tile or a wave.
struct FastCandidate {
  const char* name;
  int k;
  bool stream, wave;
  int threads = 256;
};
constexpr FastCandidate kFastCandidates[] = {
    {"grid-stride", 0, true, false},    {"tile-k2-plain", 2, false, false}, {"tile-k2", 2, true, false},
    {"tile-k4-plain", 4, false, false}, {"tile-k4", 4, true, false},        {"wave-k2-plain", 2, false, true},
    {"wave-k4", 4, true, true},         {"tile-k2-plain-t128", 2, false, false, 128},
    {"tile-k4-plain-t128", 4, false, false, 128},
};
// The candidate `fast` runs when KL_VECTOR_ADD_FAST is unset: tile-k2-plain-t128, Triton's add_kernel shape,
// the fastest on the H200 in the second same-run measurement (1.038 of copy at 2^26 against Triton's 1.036
// and torch.add's 1.037; tile-k2-plain 1.035, grid-stride 0.92-0.93; docs/perf-log.md).
constexpr const char* kDefaultFast = "tile-k2-plain-t128";

const FastCandidate& fast_candidate() {
  const char* v = std::getenv("KL_VECTOR_ADD_FAST");
  const std::string name = v && *v ? v : kDefaultFast;
  std::string allowed;
  for (const FastCandidate& c : kFastCandidates) {
    if (name == c.name) return c;
    allowed += std::string(allowed.empty() ? "" : ", ") + c.name;
  }
  throw InputError(out_of_range_message("KL_VECTOR_ADD_FAST", name, allowed));
}

using TilesKernel = void (*)(const float4*, const float4*, float4*, int64_t);
TilesKernel tiles_kernel(int k, bool stream, int threads) {
  if (threads == 128) return k == 2 ? vector_add_tiles<2, false, 128> : vector_add_tiles<4, false, 128>;
  if (k == 2) return stream ? vector_add_tiles<2, true, 256> : vector_add_tiles<2, false, 256>;
  return stream ? vector_add_tiles<4, true, 256> : vector_add_tiles<4, false, 256>;
}

void launch_tiles(const FastCandidate& c, const float4* x, const float4* y, float4* out, int64_t n4, int sms) {
  const TilesKernel kernel = tiles_kernel(c.k, c.stream, c.threads);
  const int64_t tile = int64_t(c.threads) * c.k;
  int64_t blocks = (n4 + tile - 1) / tile;
  if (c.wave) {
    int per_sm = 0;
    KL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, c.threads, 0));
    const int64_t wave_blocks = int64_t(sms) * (per_sm > 0 ? per_sm : 1);
    if (blocks > wave_blocks) blocks = wave_blocks;
  }
  cuda::launch("vector_add_tiles", kernel, dim3(unsigned(blocks)), dim3(unsigned(c.threads)), 0, 0, x, y, out, n4);
}

}  // namespace

void run_cuda_fast(const float* x, const float* y, float* out, int64_t n) {
  const FastCandidate& c = fast_candidate();
  int dev = 0, sms = 0;
  KL_CUDA_CHECK(cudaGetDevice(&dev));
  KL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t n4 = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  const auto* y4 = reinterpret_cast<const float4*>(y);
  auto* o4 = reinterpret_cast<float4*>(out);
  if (n4 > 0 && c.k == 0) {
    const int threads = 256;
    int64_t blocks = (n4 + threads - 1) / threads;
    const int64_t cap = int64_t(sms) * 8;
    if (blocks > cap) blocks = cap;
    cuda::launch("vector_add_fast", vector_add_fast, dim3(unsigned(blocks)), dim3(threads), 0, 0, x4, y4, o4, n4);
  } else if (n4 > 0) {
    launch_tiles(c, x4, y4, o4, n4, sms);
  }
  if (n4 * 4 < n)
    cuda::launch("vector_add_tail", vector_add_tail, dim3(1), dim3(4), 0, 0, x, y, out, n4 * 4, n);
}

}  // namespace kl::vector_add::detail
