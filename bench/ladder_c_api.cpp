// The ladder's fast forward and backward behind a C ABI (libkl_ladder_c.so, built with the CUDA backend), so that
// bench/interleaved_flash.py can time them and PyTorch's cuDNN attention in one process, shape by shape, in turn:
// the two sides then meet the same clocks (the fast kernels hold these GPUs at their power cap, so a row's figure
// depends on what ran before it; docs/perf-log.md, 2026-12-06). The kernels are the ones `kernel-ladder bench
// flash-attention` and `flash-attention-backward` time (run_fast: the environment's path, else the default), on
// the CUDA runtime's legacy default stream, which PyTorch's default stream is.
#include <cmath>
#include <cstdio>
#include <exception>

#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/rungs/flash_attention_fast.h"

namespace {

using kl::flash_attention::FastDtype;
using kl::flash_attention::FastParams;

int fail(const std::exception& e, char* message, int size) {
  if (message && size > 0) std::snprintf(message, size_t(size), "%s", e.what());
  return 1;
}

// The shape both directions' parameters share (FastParams, FastBackwardParams): Lq = Lk = L, scale 1/sqrt(d), bf16.
template <class P>
void set_shape(P& p, int B, int H, int H_kv, int L, int d, int causal) {
  p.B = B, p.H = H, p.H_kv = H_kv, p.Lq = p.Lk = L, p.d = d;
  p.scale = 1.0f / std::sqrt(float(d));
  p.causal = causal != 0;
  p.dtype = FastDtype::Bf16;
}

FastParams params(const void* q, const void* k, const void* v, void* o, int B, int H, int H_kv, int L, int d,
                  int causal) {
  FastParams p;
  p.q = q, p.k = k, p.v = v, p.o = o;
  set_shape(p, B, H, H_kv, L, d, causal);
  kl::flash_attention::set_contiguous_strides(p);
  return p;
}

}  // namespace

extern "C" {

// o = softmax(q k^T / sqrt(d)) v for contiguous bf16 device tensors q, o [B, H, L, d] and k, v [B, H_kv, L, d]
// (H_kv 0: H), the causal mask bottom-right (= top-left, Lq = Lk), queued on the legacy default stream. 0, or 1
// with the error's one line in `message` (a bad parameter: its name, value and allowed range; a CUDA error).
int kl_flash_forward_bf16(const void* q, const void* k, const void* v, void* o, int B, int H, int H_kv, int L, int d,
                          int causal, char* message, int message_size) {
  try {
    kl::flash_attention::run_fast(params(q, k, v, o, B, H, H_kv, L, d, causal));
    return 0;
  } catch (const std::exception& e) {
    return fail(e, message, message_size);
  }
}

// The name of the kernel kl_flash_forward_bf16 runs for that shape (as the bench's row names it) into `name`.
int kl_flash_forward_path(int B, int H, int H_kv, int L, int d, int causal, char* name, int name_size) {
  try {
    const FastParams p = params(nullptr, nullptr, nullptr, nullptr, B, H, H_kv, L, d, causal);
    std::snprintf(name, size_t(name_size), "%s",
                  kl::flash_attention::fast_path_name(
                      kl::flash_attention::fast_kernel_for(kl::flash_attention::fast_path(), p)));
    return 0;
  } catch (const std::exception& e) {
    return fail(e, name, name_size);
  }
}

// The backward of that attention, as `kernel-ladder bench flash-attention-backward` times it (run_fast: the
// preprocess, the main kernel and the dQ conversion or pass; KL_FLASH_BWD_PATH, else wgmma-tma where it runs):
// dq [B, H, L, d], dk, dv [B, H_kv, L, d] (bf16) from q, k, v, o, dout (bf16) and the forward's lse [B, H, L]
// (fp32, natural log of the scaled scores' row sums, FlashAttention's), with the workspaces drow (fp32 [B, H, L])
// and dq_accum (fp32, kl_flash_backward_accum_floats of them; unused at d = 256). dQ by fp32 atomics, or with
// `deterministic` bitwise repeatable. 0, or 1 with the error's one line in `message`.
int kl_flash_backward_bf16(const void* q, const void* k, const void* v, const void* o, const void* dout,
                           const float* lse, void* dq, void* dk, void* dv, float* drow, float* dq_accum, int B, int H,
                           int H_kv, int L, int d, int causal, int deterministic, char* message, int message_size) {
  try {
    namespace fb = kl::flash_attention_backward;
    fb::FastBackwardParams p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.dout = dout, p.lse = lse;
    p.dq = dq, p.dk = dk, p.dv = dv, p.drow = drow, p.dq_accum = dq_accum;
    set_shape(p, B, H, H_kv, L, d, causal);
    p.deterministic = deterministic != 0;
    fb::run_fast(p);
    return 0;
  } catch (const std::exception& e) {
    return fail(e, message, message_size);
  }
}

// The floats dq_accum needs (0 at d = 256).
long long kl_flash_backward_accum_floats(int B, int H, int L, int d) {
  return d == 256 ? 0 : (long long)B * H * L * d;
}

// The name of the backward's main kernel for that head dimension (as the bench's row names it) into `name`.
int kl_flash_backward_path(int d, char* name, int name_size) {
  try {
    namespace fb = kl::flash_attention_backward;
    std::snprintf(name, size_t(name_size), "%s", fb::fast_backward_kernel_name(fb::fast_backward_path(), d));
    return 0;
  } catch (const std::exception& e) {
    return fail(e, name, name_size);
  }
}

}  // extern "C"
