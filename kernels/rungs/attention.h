// Rung 4: scaled dot-product attention, out = softmax(Q K^T * scale) V, and the shared-memory wall.
// Q is [Lq, d], K and V are [Lk, d] (or [B, H, L, d]); d in {16, 32, 64, 128}; scale defaults to
// 1/sqrt(d). Causal masking is bottom-right aligned (FlashAttention 2.1+, PyTorch's causal_lower_right):
// query i sees keys j <= i + (Lk - Lq). A row that sees no key returns 0, never NaN.
//
// The kernel of this rung does what the write-up's kernel did: each program (one CUDA block of
// kBlockQ queries, for one (batch, head)) first copies ALL of K and V for its (batch, head) into shared
// memory, then computes its queries from there. Shared memory therefore grows with Lk:
//     smem_bytes(Lk, d) = (2 * Lk * d + kBlockQ * d) * sizeof(float)   (all of K and V, and the block's
//                                                                       kBlockQ = 16 query rows)
// and past the device's per-block limit (DeviceInfo::smem_per_block_optin; the CPU backend assumes an
// H200's figure and says so) the kernel is refused with the bytes needed, the limit, the largest Lk
// that fits at this d, and a pointer to rung 5 (FlashAttention streams K/V in tiles: no such wall).
//
// Versions:
//   reference   float64 on the host, three passes per row (max, sum, weights); the ground truth.
//   kernel      (CPU and CUDA) the editable source kernels/editable/sources/attention.cu, attention_smem:
//               per query one warp: pass 1 the row max over keys held in shared memory, pass 2
//               p = exp(s - max), l = sum p, o = sum p v, then out = o / l; optional pass 3 writes the
//               scores S and the weights P = p / l for the views and --weights. The same source runs on
//               both backends (editable::launch): nvcc's build on CUDA, the CPU prelude's on the CPU
//               (the blocks in order, the 256 threads of a block as fibers: it has barriers and shuffles).
//               An edited copy of it runs in the worker instead (run(..., src)).
//   unfused     (CPU and CUDA) standard attention as PyTorch writes it, three kernels through device
//               memory: S = Q K^T * scale written to global memory ([bh, Lq, Lk], masked -inf), rung 3's
//               softmax (`fixed`; `online` past its widest row) reading S and writing P, then O = P V.
//               No shared-memory wall, but Theta(Lq * Lk) bytes of S and P go through device memory:
//               the traffic FlashAttention (rung 5) removes. Tiles of 16 x 16 on both backends.
//
// Device-memory traffic, counted (the panels' bars and `study`): bytes each variant must move, with
// every load of a tile counted once per program that makes it:
//   smem      bh * 4 * (2 Lq d [Q in, O out] + ceil(Lq / 16) * 2 Lk d [K, V per program])
//   unfused   bh * 4 * (2 Lq d + 2 Lk d [Q, K in; V in, O out] + 4 Lq Lk [S out, S in, P out, P in])
#pragma once
#include <cstdint>
#include <string>

#include "kernels/editable/launch.h"
#include "kernels/runtime/array.h"
#include "kernels/runtime/backend.h"
#include "kernels/runtime/registry.h"

// Functions both backends call (host and device).
#ifdef __CUDACC__
#define KL_ATTN_HD __host__ __device__
#else
#define KL_ATTN_HD
#endif

namespace kl::attention {

constexpr int kBlockQ = 16;   // queries per program (CUDA block)
constexpr int kWarps = 8;     // warps per CUDA block; warp w takes queries w, w + kWarps
constexpr int64_t kMaxLen = int64_t(1) << 20;  // Lq, Lk accepted at all (the wall comes first for Lk)
bool supported_head_dim(int d);  // 16, 32, 64, 128
const char* head_dims_text();    // "16, 32, 64, 128"

struct Shape {
  int64_t batch = 1, heads = 1;
  int64_t lq = 0, lk = 0;
  int d = 0;
  int64_t bh() const { return batch * heads; }
  std::string text() const;  // "B=1 H=1 Lq=5 Lk=15 d=32"
};

struct Options {
  bool causal = false;
  double scale = 0;  // 0: 1/sqrt(d)
  float resolved_scale(int d) const;
};

// Bottom-right causal alignment: the number of keys row i sees (0..lk), i.e. min(lk, i + lk - lq + 1).
KL_ATTN_HD inline int64_t visible_keys(int64_t i, int64_t lq, int64_t lk, bool causal) {
  if (!causal) return lk;
  const int64_t n = i + (lk - lq) + 1;
  return n < 0 ? 0 : (n > lk ? lk : n);
}

// The wall. Bytes of shared memory one program needs, and the largest Lk whose K and V fit in `limit`.
int64_t smem_bytes(int64_t lk, int d);
int64_t max_lk(int d, int64_t limit);
// The limit used on backend b (device opt-in maximum per block; the assumed H200 figure on the CPU).
int64_t smem_limit(Backend b);
// Throws InputError with the wall message when smem_bytes(lk, d) > limit.
void check_wall(int64_t lk, int d, int64_t limit, bool limit_assumed);
// Checks d, lengths, batch*heads and the wall for backend b; throws InputError with one line.
void check_shape(Backend b, const Shape& s);

// Parses q, k, v arrays ([L, d] or [B, H, L, d]) into a shape; mismatches throw InputError.
Shape shape_from_arrays(const Array& q, const Array& k, const Array& v);

// float64 reference. out [bh, lq, d]; weights [bh, lq, lk] (optional). Rows that see nothing: 0.
void reference(const float* q, const float* k, const float* v, const Shape& s, const Options& o,
               double* out, double* weights = nullptr);

// Optional outputs for the views. Pointers live where the backend runs; nullptr: not written.
// Each is [bh, lq, lk] cells; cell c is written at ptr[c * channels] (the value) and, when
// channels >= 2, ptr[c * channels + 1] = the cell state (kCellNormal, kCellMasked by causal; kernels/runtime/cell_state.h), so a
// 2-channel DataTexture can be written straight from the kernel.
struct Extras {
  float* scores = nullptr;   // S = Q K^T * scale; masked cells -inf (value channel)
  float* weights = nullptr;  // P = softmax(S); masked cells and empty rows 0
  int channels = 1;
  int32_t* out_writer = nullptr;  // [bh, lq, d]: the program that stored each output element (optional)
  uint32_t* out_count = nullptr;  // [bh, lq, d]: how many stores it got (optional)
};

// The kernel on backend b (pointers live there). out [bh, lq, d]. Throws InputError (shape, wall).
// src: an edited copy of kernels/editable/sources/attention.cu run instead of the shipped build (in the
// worker; CompileError when it does not compile); its first misbehaviour is returned, not thrown. The
// shipped kernel's (src == nullptr) would be a bug and throws RuntimeError.
editable::Fault run(Backend b, const float* q, const float* k, const float* v, float* out, const Shape& s,
                    const Options& o, const Extras& extras = {}, const editable::Source* src = nullptr);

// Standard (unfused) attention on backend b. `scores` and `weights` are [bh, lq, lk] scratch where the
// backend runs (S and P are the point of this variant: they go through device memory); out [bh, lq, d].
// Throws InputError for bad shapes and bh * lq * lk past softmax's 2^31 - 1 elements.
void run_unfused(Backend b, const float* q, const float* k, const float* v, float* out, float* scores,
                 float* weights, const Shape& s, const Options& o);
void check_unfused_shape(const Shape& s);
constexpr int kUnfusedTile = 16;

// The counted device-memory traffic of the smem kernel and of the unfused variant (see the top).
double traffic_bytes_smem(const Shape& s);
double traffic_bytes_unfused(const Shape& s);

KernelEntry entry();

// The parameters of this rung's kernels, one spec each (name, range, default, help): the registry
// (`run`, `list`), the panel and the study all take them from here.
namespace param {
ParamSpec causal();
ParamSpec scale();
}  // namespace param

namespace detail {
// The launch of attention_smem (kernels/editable/sources/attention.cu) for one run: grid, block, shared
// memory and the arguments in the kernel's order.
editable::Launch traced_launch(const float* q, const float* k, const float* v, float* out, const Shape& s,
                               float scale, bool causal, const Extras& x);
#ifdef KL_HAS_CUDA
void scores_cuda(const float* q, const float* k, float* scores, const Shape& s, float scale, bool causal);
void pv_cuda(const float* p, const float* v, float* out, const Shape& s);
#endif
}  // namespace detail

}  // namespace kl::attention
