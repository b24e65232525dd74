// Rung 5, fast variant, CUDA side: FlashAttention-2 forward with mma.sync m16n8k16 (see the header for
// the design and the tile shapes). Paper notation (FlashAttention-2, Algorithm 1), per query row:
//   S_j = Q K_j^T                               (raw scores of key tile j; the scale is applied in exp2)
//   m_new = max(m_old, rowmax(S_j))
//   alpha = exp(m_old - m_new)                  (`rescale`: l <- alpha * l, O <- alpha * O)
//   P_j = exp(S_j - m_new),  l <- l + rowsum(P_j),  O <- O + P_j V_j
//   O <- O / l                                  (0 for a row that saw no key)
// with exp(x) computed as exp2(x * scale * log2(e)), m kept in raw-score units.
//
// Fragment layouts used below (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type";
// g = lane / 4, t = lane % 4; two 16-bit elements per 32-bit register, the lower column in the low half):
//   A (16 x 16, row-major):  a0 (g, 2t..2t+1)  a1 (g+8, 2t..2t+1)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B (16 x 8, "col"):       b0 (k = 2t..2t+1, n = g)  b1 (k = 2t+8.., n = g)
//   C/D (16 x 8, fp32):      c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)
//   ldmatrix.x4: lane 8*i + r gives the address of row r of 8x8 matrix i; register i of lane l holds
//   matrix i's (row l/4, columns 2(l%4)..+1), or with .trans its (rows 2(l%4)..+1, column l/4).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "kernels/runtime/buffer.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/rungs/flash_attention_fast_device.cuh"

namespace kl::flash_attention {
namespace fast_detail {

// The PTX wrappers (cp.async, ldmatrix, mma.sync) and the swizzled tile loads live in
// flash_attention_fast_device.cuh, shared with the backward (kernels/rungs/flash_attention_backward_fast.cu).

// ---- [SECTION] the online-softmax steps -------------------------------------------------------------
constexpr float kLog2e = 1.4426950408889634f;

// The rescale step: alpha = exp(m_old - m_new) for each of the thread's two rows, then
// l <- alpha * l and O <- alpha * O. A row that has seen only masked keys (m_new = -inf) keeps
// alpha = 1 (avoiding -inf - -inf); a row whose first visible keys arrive now has m_old = -inf and
// alpha = 0, which clears nothing (its O and l are still 0).
template <int kDTiles>
__device__ __forceinline__ void rescale(float (&acc_o)[kDTiles][4], float (&l)[2], const float (&m_old)[2],
                                        const float (&m_new)[2], float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float alpha = m_new[r] == -INFINITY ? 1.f : fast_exp2((m_old[r] - m_new[r]) * scale_log2);
    l[r] *= alpha;
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) {
      acc_o[j][2 * r + 0] *= alpha;
      acc_o[j][2 * r + 1] *= alpha;
    }
  }
}

template <class T, int kHeadDim, int kBlockN, bool kQInRegs>
struct WarpState {
  static constexpr int kDTiles = kHeadDim / 8;  // n8 tiles of O
  float acc_o[kDTiles][4];                      // O, 16 rows x kHeadDim per warp, fp32
  float m[2];                                   // running max of the raw scores, rows g and g+8
  float l[2];                                   // running sum, this thread's columns only (quad-summed at the end)
  uint32_t q_frag[kQInRegs ? kHeadDim / 16 : 1][4];  // Q, 16 rows x kHeadDim, as A fragments (kQInRegs)
};

// The A fragment of Q for k-step kk: held in registers, or read from the swizzled sQ tile with
// ldmatrix.x4, matrices (rows +0, d +0) (rows +8, d +0) (rows +0, d +8) (rows +8, d +8).
template <int kHeadDim>
__device__ __forceinline__ void load_q_frag(uint32_t (&a)[4], const void* sQ_warp_base, int lane, int kk) {
  const auto* sQw = static_cast<const unsigned char*>(sQ_warp_base);
  const int row = lane & 15;  // rows of this warp's 16-row slice
  ldmatrix_x4(a, smem_u32(sQw + 2 * swizzled<kHeadDim>(row, kk * 2 + (lane >> 4))));
}

// One K/V tile for one warp: S = Q K^T, (mask), online softmax, O += P V.
// sQw: this warp's 16 rows of sQ (read only when Q is not held in registers).
template <bool kMask, class T, int kHeadDim, int kBlockN, bool kQInRegs>
__device__ __forceinline__ void process_tile(WarpState<T, kHeadDim, kBlockN, kQInRegs>& w, const T* sQw,
                                             const T* sK, const T* sV, int lane, int key_base, int row_g,
                                             const FastParams& p, float scale_log2) {
  constexpr int kNTiles = kBlockN / 8;  // n8 tiles of S
  float acc_s[kNTiles][4];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) acc_s[j][0] = acc_s[j][1] = acc_s[j][2] = acc_s[j][3] = 0.f;

  // S = Q K^T. ldmatrix.x4 of K gives two n8 tiles (keys 16nn..+7 and +8..+15) for one k16 step:
  // matrices (keys +0, d +0) (keys +0, d +8) (keys +8, d +0) (keys +8, d +8) = b0 b1 of tile 2nn and 2nn+1.
  const int k_row = (lane & 7) + ((lane >> 4) << 3);
  const int k_chunk = (lane >> 3) & 1;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t a_smem[4];
    if (!kQInRegs) load_q_frag<kHeadDim>(a_smem, sQw, lane, kk);
    const uint32_t(&a)[4] = kQInRegs ? w.q_frag[kQInRegs ? kk : 0] : a_smem;
#pragma unroll
    for (int nn = 0; nn < kBlockN / 16; ++nn) {
      uint32_t b[4];
      ldmatrix_x4(b, smem_u32(sK + swizzled<kHeadDim>(nn * 16 + k_row, kk * 2 + k_chunk)));
      mma_16816<T>(acc_s[2 * nn], a, b[0], b[1]);
      mma_16816<T>(acc_s[2 * nn + 1], a, b[2], b[3]);
    }
  }

  const int t = lane & 3;
  if (kMask) {  // key_visible(row, key) as key <= last_visible_key(row), rows g (e < 2) and g + 8 (e >= 2)
    // Computed here, not kept across the loop: two registers fewer under d = 64's 128-register cap.
    const int last_key[2] = {last_visible_key(row_g, p.Lq, p.Lk, p.causal),
                             last_visible_key(row_g + 8, p.Lq, p.Lk, p.causal)};
#pragma unroll
    for (int j = 0; j < kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key_base + j * 8 + 2 * t + (e & 1);
        if (key > last_key[e >> 1]) acc_s[j][e] = -INFINITY;
      }
  }

  // m_new = max(m_old, rowmax(S)).
  float m_new[2] = {w.m[0], w.m[1]};
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    m_new[0] = fmaxf(m_new[0], fmaxf(acc_s[j][0], acc_s[j][1]));
    m_new[1] = fmaxf(m_new[1], fmaxf(acc_s[j][2], acc_s[j][3]));
  }
  m_new[0] = quad_max(m_new[0]);
  m_new[1] = quad_max(m_new[1]);

  rescale(w.acc_o, w.l, w.m, m_new, scale_log2);

  // P = exp(S - m_new) = exp2(S * scale*log2e - m_new * scale*log2e); l += rowsum(P).
  float m_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m_scaled[r] = m_new[r] == -INFINITY ? 0.f : m_new[r] * scale_log2;
    w.m[r] = m_new[r];
  }
#pragma unroll
  for (int j = 0; j < kNTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = fast_exp2(fmaf(acc_s[j][e], scale_log2, -m_scaled[e >> 1]));
      acc_s[j][e] = p;
      w.l[e >> 1] += p;
    }

  // O += P V. P's accumulator tiles 2kk and 2kk+1 are the A fragment of key step kk (rounded to T);
  // ldmatrix.x4.trans of V gives b0 b1 for two n8 tiles of d: matrices (keys +0, d +0) (keys +8, d +0)
  // (keys +0, d +8) (keys +8, d +8).
  const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int v_chunk = lane >> 4;
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    const uint32_t a[4] = {pack2<T>(acc_s[2 * kk][0], acc_s[2 * kk][1]), pack2<T>(acc_s[2 * kk][2], acc_s[2 * kk][3]),
                           pack2<T>(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1]),
                           pack2<T>(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3])};
#pragma unroll
    for (int dn = 0; dn < kHeadDim / 16; ++dn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, smem_u32(sV + swizzled<kHeadDim>(kk * 16 + v_row, dn * 2 + v_chunk)));
      mma_16816<T>(w.acc_o[2 * dn], a, b[0], b[1]);
      mma_16816<T>(w.acc_o[2 * dn + 1], a, b[2], b[3]);
    }
  }
}

// ---- [SECTION] the kernel ---------------------------------------------------------------------------
// Grid (ceil(Lq / kBlockM), H, B); block kNWarps warps; warp w owns query rows m0 + 16w .. m0 + 16w + 15.
// Shared memory: sQ [kBlockM][d], sK [kStages][kBlockN][d], sV [kStages][kBlockN][d], all swizzled.
template <class T, int kHeadDim>
__global__ void __launch_bounds__(FastTraits<kHeadDim>::kNWarps * 32, FastTraits<kHeadDim>::kMinBlocksPerSm)
    flash_fwd_kernel(const FastParams p, const int kv_group) {
  using Tr = FastTraits<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kThreads = Tr::kNWarps * 32;
  static_assert(kBlockM == Tr::kNWarps * 16, "one warp per 16 query rows");
  static_assert(Tr::kStages == 2, "the pipeline below is written for two stages");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * kHeadDim;
  T* sV = sK + Tr::kStages * kBlockN * kHeadDim;

  // Causal: the heaviest query blocks (the last ones) start first, so the short ones fill the tail.
  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = m_block * kBlockM;

  const int h_kv = kv_head_of(h, kv_group);  // grouped-query attention: h / (H / H_kv)

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;

  const int n_tiles = key_tiles_for_block(m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);
  const float scale_log2 = p.scale * kLog2e;

  WarpState<T, kHeadDim, kBlockN, Tr::kQInRegs> w;
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) w.acc_o[j][0] = w.acc_o[j][1] = w.acc_o[j][2] = w.acc_o[j][3] = 0.f;
  w.m[0] = w.m[1] = -INFINITY;
  w.l[0] = w.l[1] = 0.f;

  if (n_tiles > 0) {  // uniform across the block
    // Prologue: group 0 = Q and tile 0, group 1 = tile 1 (possibly empty).
    load_tile_async<T, kBlockM, kHeadDim, kThreads>(sQ, q, p.q_row_stride, m0, p.Lq, tid);
    load_tile_async<T, kBlockN, kHeadDim, kThreads>(sK, k, p.k_row_stride, 0, p.Lk, tid);
    load_tile_async<T, kBlockN, kHeadDim, kThreads>(sV, v, p.v_row_stride, 0, p.Lk, tid);
    cp_async_commit();
    if (n_tiles > 1) {
      load_tile_async<T, kBlockN, kHeadDim, kThreads>(sK + kBlockN * kHeadDim, k, p.k_row_stride, kBlockN, p.Lk, tid);
      load_tile_async<T, kBlockN, kHeadDim, kThreads>(sV + kBlockN * kHeadDim, v, p.v_row_stride, kBlockN, p.Lk, tid);
    }
    cp_async_commit();

    // Tile j's loads are commit group j; before iteration j, groups 0..j+1 are committed, so waiting
    // until at most one group is pending means tile j (and Q) have landed.
    cp_async_wait<1>();
    __syncthreads();

    // This warp's 16 rows of sQ start at row 16*warp, a multiple of 8: the swizzle pattern (row & 7)
    // is the same relative to that base, so the slice is addressed like a 16-row tile of its own.
    const T* sQw = sQ + warp * 16 * kHeadDim;
    if (Tr::kQInRegs) {  // Q into registers once
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) load_q_frag<kHeadDim>(w.q_frag[Tr::kQInRegs ? kk : 0], sQw, lane, kk);
    }

    const int row_g = m0 + warp * 16 + (lane >> 2);  // this thread's rows: row_g and row_g + 8
    for (int n = 0; n < n_tiles; ++n) {
      if (n > 0) {
        cp_async_wait<1>();
        __syncthreads();
      }
      const int stage = n & 1;
      const T* sKs = sK + stage * kBlockN * kHeadDim;
      const T* sVs = sV + stage * kBlockN * kHeadDim;
      if (tile_needs_mask(m_block, n, p.Lq, p.Lk, kBlockM, kBlockN, p.causal))
        process_tile<true>(w, sQw, sKs, sVs, lane, n * kBlockN, row_g, p, scale_log2);
      else
        process_tile<false>(w, sQw, sKs, sVs, lane, n * kBlockN, row_g, p, scale_log2);
      __syncthreads();  // every warp is done with this stage before it is refilled
      if (n + 2 < n_tiles) {
        load_tile_async<T, kBlockN, kHeadDim, kThreads>(const_cast<T*>(sKs), k, p.k_row_stride, (n + 2) * kBlockN,
                                                        p.Lk, tid);
        load_tile_async<T, kBlockN, kHeadDim, kThreads>(const_cast<T*>(sVs), v, p.v_row_stride, (n + 2) * kBlockN,
                                                        p.Lk, tid);
      }
      cp_async_commit();  // always commit (maybe empty) so the group count stays one per tile
    }
    cp_async_wait<0>();
  }

  // Epilogue: O / l (0 where the row saw nothing), rounded to T, rows < Lq stored.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(w.l[r]);
    const float inv_l = l > 0.f ? 1.f / l : 0.f;
    const int row = m0 + warp * 16 + g + 8 * r;
    if (row < p.Lq) {
      T* orow = o + int64_t(row) * p.o_row_stride;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        const uint32_t packed = pack2<T>(w.acc_o[j][2 * r] * inv_l, w.acc_o[j][2 * r + 1] * inv_l);
        *reinterpret_cast<uint32_t*>(orow + j * 8 + 2 * t) = packed;
      }
    }
  }
}

// The conversion kernels (float <-> bf16 / fp16) and the bench inputs live in flash_attention_fast_device.cuh.

template <class T, int kHeadDim>
void launch_fwd(const FastParams& p) {
  using Tr = FastTraits<kHeadDim>;
  const dim3 grid(unsigned(ceil_div(p.Lq, Tr::kBlockM)), unsigned(p.H), unsigned(p.B));
  const bool half = std::is_same<T, __half>::value;
  const char* name = kHeadDim == 64    ? (half ? "flash_fwd_fast_d64_fp16" : "flash_fwd_fast_d64_bf16")
                     : kHeadDim == 128 ? (half ? "flash_fwd_fast_d128_fp16" : "flash_fwd_fast_d128_bf16")
                                       : (half ? "flash_fwd_fast_d256_fp16" : "flash_fwd_fast_d256_bf16");
  cuda::launch(name, flash_fwd_kernel<T, kHeadDim>, grid, dim3(Tr::kNWarps * 32), size_t(fast_smem_bytes<Tr>()), 0, p,
               kv_group(p));
}

template <class T>
void run_typed(const FastParams& p) {
  if (p.d == 64)
    launch_fwd<T, 64>(p);
  else if (p.d == 128)
    launch_fwd<T, 128>(p);
  else
    launch_fwd<T, 256>(p);
}

}  // namespace fast_detail

void require_cuda_device(const std::string& what) {
  std::string why;
  if (cuda_device_count(&why) == 0) throw InputError(what + " needs a CUDA device: " + why);
}

// ---- [SECTION] entry points -------------------------------------------------------------------------
void run_fast_mma_sync(const FastParams& p) {
  validate(p);
  if (p.dtype == FastDtype::Bf16)
    fast_detail::run_typed<__nv_bfloat16>(p);
  else
    fast_detail::run_typed<__half>(p);
}

FastPath fast_path() {
  const char* env = std::getenv("KL_FLASH_FAST_PATH");
  const std::string want = env ? env : "";
  if (want == "mma") return FastPath::MmaSync;
  const FastPath* const end = std::end(kNamedWgmmaPaths);
  const FastPath* named =
      std::find_if(std::begin(kNamedWgmmaPaths), end, [&](FastPath path) { return want == fast_path_name(path); });
  if (named == end && !want.empty() && want != "auto") {
    throw InputError(out_of_range_message("KL_FLASH_FAST_PATH", want, "mma, " + fast_named_paths_text() + " or auto (unset)"));
  }
  const bool wgmma = fast_wgmma_kernels_loaded();
  if (named != end && !wgmma)
    throw InputError("KL_FLASH_FAST_PATH=" + want + ": this device or build has no sm_90a code (needs an H100/H200)");
  if (!wgmma) return FastPath::MmaSync;
  return named != end ? *named : FastPath::WgmmaByShape;  // unset or auto: by shape
}

void run_fast(const FastParams& p) {
  validate(p);
  run_fast_path(p, fast_path());
}

void run_fast_path(const FastParams& p, FastPath requested) {
  validate(p);
  if (requested != FastPath::MmaSync && !fast_wgmma_kernels_loaded())
    throw InputError(std::string("flash-attention --variant fast: the ") + fast_path_name(requested) +
                     " kernel needs the sm_90a code (an H100/H200); this device or build has none");
  const FastPath path = fast_kernel_for(requested, p);
  if (path == FastPath::MmaSync)
    run_fast_mma_sync(p);
  else if (fast_path_persistent(path)) {
    if (!run_fast_wgmma_persistent(p, path)) run_fast_wgmma(p);
  } else
    run_fast_wgmma(p, path == FastPath::WgmmaLate);
}

namespace {
template <class T>
Array run_fast_host_typed(const Array& q, const Array& k, const Array& v, FastParams p) {
  using namespace fast_detail;
  const int64_t nq = q.size(), nk = k.size(), nv = v.size();
  Buffer<float> staging(Backend::Cuda, size_t(std::max(nq, nk)));
  Buffer<T> dq(Backend::Cuda, size_t(nq)), dk(Backend::Cuda, size_t(nk)), dv(Backend::Cuda, size_t(nv)),
      dout(Backend::Cuda, size_t(nq));
  auto convert_in = [&](const Array& a, Buffer<T>& dst) {
    staging.upload(a.data);  // resizes only when the size differs
    cuda::launch("flash_fast_convert_in", convert_from_float<T>, elementwise_grid(a.size()), dim3(256), 0, 0,
                 staging.data(), dst.data(), int64_t(a.size()));
  };
  convert_in(q, dq);
  convert_in(k, dk);
  convert_in(v, dv);
  dout.fill_bytes(0xFF);  // 0xFFFF is NaN in bf16 and fp16: an unwritten element shows
  p.q = dq.data(), p.k = dk.data(), p.v = dv.data(), p.o = dout.data();
  set_contiguous_strides(p);
  run_fast(p);
  Buffer<float> out_f(Backend::Cuda, size_t(nq));
  cuda::launch("flash_fast_convert_out", convert_to_float<T>, elementwise_grid(nq), dim3(256), 0, 0, dout.data(),
               out_f.data(), nq);
  mem::synchronize(Backend::Cuda);
  return Array{q.shape, out_f.to_host()};
}
}  // namespace

Array run_fast_host(const Array& q, const Array& k, const Array& v, bool causal, float scale,
                    const std::string& dtype) {
  FastParams p;
  check_host_shapes(q, k, v, p);
  p.dtype = parse_fast_dtype(dtype);
  p.causal = causal;
  p.scale = scale;
  if (!(std::isfinite(scale) && scale > 0))
    throw InputError(out_of_range_message("scale", std::to_string(scale), "finite and > 0"));
  require_cuda_device("flash-attention --variant fast");
  if (p.dtype == FastDtype::Bf16) return run_fast_host_typed<__nv_bfloat16>(q, k, v, p);
  return run_fast_host_typed<__half>(q, k, v, p);
}

namespace {
// The kernels KL_FLASH_FAST_BENCH_PATHS lists (comma-separated), or {""}: whatever fast_path() picks.
std::vector<std::string> bench_paths() {
  const char* env = std::getenv("KL_FLASH_FAST_BENCH_PATHS");
  std::vector<std::string> out;
  std::string item;
  for (const char* c = env ? env : ""; ; ++c) {
    if (*c == ',' || *c == 0) {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*c == 0) break;
    } else {
      item += *c;
    }
  }
  if (out.empty()) out.push_back("");
  return out;
}
// Sets KL_FLASH_FAST_PATH for one scope (empty: leaves it alone); fast_path() checks the value.
struct ScopedFastPath {
  std::string old;
  bool had = false, set = false;
  explicit ScopedFastPath(const std::string& want) {
    if (want.empty()) return;
    const char* o = std::getenv("KL_FLASH_FAST_PATH");
    had = o != nullptr;
    if (o) old = o;
    setenv("KL_FLASH_FAST_PATH", want.c_str(), 1);
    set = true;
    try {
      fast_path();  // InputError for an unknown name, before any timing
    } catch (...) {
      restore();
      throw;
    }
  }
  ~ScopedFastPath() { restore(); }
  void restore() {
    if (!set) return;
    set = false;
    if (had)
      setenv("KL_FLASH_FAST_PATH", old.c_str(), 1);
    else
      unsetenv("KL_FLASH_FAST_PATH");
  }
};
}  // namespace

std::vector<bench::Row> bench_fast(Backend b, bool quick) {
  using namespace fast_detail;
  std::vector<bench::Row> rows;
  if (b != Backend::Cuda) return rows;  // no CPU implementation of the fast variant
  require_cuda_device("flash-attention --variant fast");
  const FastBenchSpec spec = bench_shapes_from_env(fast_bench_spec(quick, {64, 128, 256}, true));
  const int64_t n = spec.elements();
  Buffer<__nv_bfloat16> q(Backend::Cuda, size_t(n)), k(Backend::Cuda, size_t(n)), v(Backend::Cuda, size_t(n)),
      o(Backend::Cuda, size_t(n));
  launch_fill_uniform("flash_fast_fill", q.data(), n, 1u);
  launch_fill_uniform("flash_fast_fill", k.data(), n, 2u);
  launch_fill_uniform("flash_fast_fill", v.data(), n, 3u);
  // Grouped-query rows read K and V from allocations of their own size, as the peers' tensors are, not from
  // the first part of the Hkv = H buffers above.
  Buffer<__nv_bfloat16> k_group, v_group;
  // One row of shape s with the kernel fast_path() picks.
  auto row_one = [&](const FastBenchShape& s) {
    const FastPath path = fast_path();
    FastParams p;
    p.B = s.B, p.H = s.H, p.H_kv = s.H_kv, p.Lq = p.Lk = s.L, p.d = s.d;
    p.scale = 1.0f / std::sqrt(float(s.d));
    p.causal = s.causal;
    p.dtype = FastDtype::Bf16;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data();
    if (kv_heads(p) != p.H) {
      const int64_t n_kv = int64_t(p.B) * kv_heads(p) * p.Lk * p.d;
      if (k_group.size() != size_t(n_kv)) {  // filled once a size (the rows share B * L and so one size)
        k_group.resize(Backend::Cuda, size_t(n_kv)), v_group.resize(Backend::Cuda, size_t(n_kv));
        launch_fill_uniform("flash_fast_fill", k_group.data(), n_kv, 2u);
        launch_fill_uniform("flash_fast_fill", v_group.data(), n_kv, 3u);
      }
      p.k = k_group.data(), p.v = v_group.data();
    }
    set_contiguous_strides(p);
    const bench::Timing t =
        quick ? bench::time(b, [&] { run_fast(p); }, 1, 3) : bench::time(b, [&] { run_fast(p); }, 5, 30);
    const double flops = 4.0 * p.B * p.H * double(p.Lq) * p.Lk * s.d * (s.causal ? 0.5 : 1.0);
    bench::Row r;
    r.kernel = "flash-attention";
    r.variant = "fast";
    r.shape = fast_bench_shape_text(s) + " bf16 " + fast_path_name(fast_kernel_for(path, p));
    r.ms = t.median_ms;
    r.tflops = bench::tflops(flops, t.median_ms);
    // Q and O once each, K and V once each at H_kv heads: the fewest bytes (K/V are re-read per query
    // block from L2).
    const double kv_share = double(kv_heads(p)) / p.H;
    r.gbs = t.median_ms > 0 ? double(n) * 2 * (2 + 2 * kv_share) / (t.median_ms * 1e-3) / 1e9 : 0;
    r.ratio = 0;  // the peer (PyTorch SDPA) is timed by bench/torch_flash.py, which prints the ratios
    r.baseline = "torch: bench/torch_flash.py";
    rows.push_back(r);
  };
  // KL_FLASH_FAST_BENCH_PATHS=wgmma,wgmma-persistent,...: each shape timed once per listed kernel, back
  // to back (rows named by kernel), so candidates meet the same clocks; unset: the kernel fast_path() picks.
  for (const FastBenchShape& s : spec.shapes)
    for (const std::string& want : bench_paths()) {
      const ScopedFastPath scoped(want);
      row_one(s);
    }
  mem::synchronize(Backend::Cuda);
  return rows;
}

}  // namespace kl::flash_attention
