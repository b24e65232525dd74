// Rung 5, host side: tile shapes, the trace, the launch of the editable teaching kernel, `run` wiring.
#include "kernels/rungs/flash_attention.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <tuple>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/errors.h"

#if __has_include("kernels/rungs/flash_attention_fast.h")
#include "kernels/rungs/flash_attention_fast.h"
#define KL_HAS_FLASH_FAST 1
#endif

namespace kl::flash_attention {

// [SECTION] Shapes, with grouped-query attention ------------------------------------------------------

std::string Shape::text() const {
  const std::string t = attention::Shape::text();  // "B=1 H=8 Lq=5 Lk=15 d=32"
  if (kv() == heads) return t;
  const size_t at = t.find(" Lq=");
  return t.substr(0, at) + " Hkv=" + std::to_string(kv()) + t.substr(at);
}

std::string gqa_heads_message(int64_t kv_heads, int64_t q_heads) {
  return out_of_range_message("Hkv (heads of k and v)", std::to_string(kv_heads),
                              "a divisor of Hq=" + std::to_string(q_heads) +
                                  " (grouped-query attention: query head h reads kv head h / (Hq / Hkv))");
}

void check_kv_heads(int64_t kv_heads, int64_t heads) {
  if (kv_heads < 1 || kv_heads > heads || heads % kv_heads != 0)
    throw InputError(gqa_heads_message(kv_heads, heads));
}

bool supported_head_dim(int d) { return attention::supported_head_dim(d) || d == 256; }
const char* head_dims_text() { return "16, 32, 64, 128, 256"; }

namespace {
// Rung 4's shape checks on shape-only copies. Its head dims stop at 128: a d = 256 shared by q, k and v
// is checked as 128 and put back.
Shape rung4_shape(const Array& q, const Array& k, const Array& v) {
  const bool d256 = !q.shape.empty() && q.shape.back() == 256 && !k.shape.empty() && k.shape.back() == 256 &&
                    k.shape == v.shape;
  if (!d256) return Shape(attention::shape_from_arrays(q, k, v));
  Array q2{q.shape, {}}, k2{k.shape, {}};
  q2.shape.back() = k2.shape.back() = 128;
  Shape s(attention::shape_from_arrays(q2, k2, k2));
  s.d = 256;
  return s;
}
}  // namespace

Shape shape_from_arrays(const Array& q, const Array& k, const Array& v) {
  if (!q.shape.empty() && !supported_head_dim(int(q.shape.back())) && (q.shape.size() == 2 || q.shape.size() == 4))
    throw InputError(out_of_range_message("d (last dimension of q)", std::to_string(q.shape.back()),
                                          std::string("one of ") + head_dims_text()));
  // Grouped-query attention: q [B, Hq, L, d] with k and v [B, Hkv, Lk, d]. The head rule first; then
  // rung 4's checks of everything else, on k and v's shapes with q's head count.
  const bool rank4 = q.shape.size() == 4 && k.shape.size() == 4 && k.shape == v.shape;
  if (!rank4 || q.shape[1] == k.shape[1]) return rung4_shape(q, k, v);
  check_kv_heads(k.shape[1], q.shape[1]);
  Array k_as_mha{k.shape, {}};
  k_as_mha.shape[1] = q.shape[1];
  Shape s = rung4_shape(q, k_as_mha, k_as_mha);
  s.kv_heads = k.shape[1];
  return s;
}

void reference(const float* q, const float* k, const float* v, const Shape& s, const Options& o, double* out) {
  // Each query head on its own (rung 4's reference, B = H = 1), reading its kv head: h / (Hq / Hkv).
  attention::Shape one;
  one.lq = s.lq;
  one.lk = s.lk;
  one.d = s.d;
  const int64_t q_len = s.lq * s.d, kv_len = s.lk * s.d;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t bh = b * s.heads + h, kv = b * s.kv() + h / s.group();
      attention::reference(q + bh * q_len, k + kv * kv_len, v + kv * kv_len, one, o, out + bh * q_len);
    }
}

// [SECTION] Tile shapes -------------------------------------------------------------------------------

int64_t smem_bytes(int block_m, int block_n, int d) {
  const int64_t bm = block_m, bn = block_n, dd = d;
  return 4 * (bm * dd + 2 * bn * dd + bm * bn + bm * dd + 3 * bm);
}

std::vector<std::pair<int, int>> offered_tiles(int d, int64_t limit) {
  std::vector<std::pair<int, int>> v;
  for (int bm = kMinBlock; bm <= kMaxBlock; bm *= 2)
    for (int bn = kMinBlock; bn <= kMaxBlock; bn *= 2)
      if (smem_bytes(bm, bn, d) <= limit) v.emplace_back(bm, bn);
  return v;
}

std::pair<int, int> default_tiles(int d) {
  return d == 256 ? std::pair<int, int>{kDefaultBlockM, kDefaultBlockN / 2} : std::pair<int, int>{kDefaultBlockM, kDefaultBlockN};
}

void check_tiles_for(Backend b, const char* rung, int64_t (*smem)(int, int, int), const char* joiner, int block_m,
                     int block_n, int d) {
  for (auto [name, val] : {std::pair<const char*, int>{"block_m", block_m}, {"block_n", block_n}})
    if (!is_power_of_2(val) || val < kMinBlock || val > kMaxBlock)
      throw InputError(out_of_range_message(name, std::to_string(val), "powers of two in [16, 128]"));
  const DeviceInfo info = device_info(b);
  const int64_t need = smem(block_m, block_n, d);
  if (need <= info.smem_per_block_optin) return;
  std::ostringstream m;
  m << rung << ": tile block_m=" << block_m << " x block_n=" << block_n << " at d=" << d << " needs " << need
    << " bytes of shared memory per block; the limit is " << info.smem_per_block_optin << " bytes"
    << (info.assumed ? " (assumed: an H200's, CPU backend)" : "") << "; e.g. block_m=" << block_m / 2 << " "
    << joiner << " block_n=" << block_n / 2 << " fits";
  throw InputError(m.str());
}

void check_tiles(Backend b, int block_m, int block_n, int d) {
  check_tiles_for(b, "flash-attention", smem_bytes, "or", block_m, block_n, d);
}

// [SECTION] The trace ---------------------------------------------------------------------------------

void FlashTrace::reset(Backend b, const Shape& s, int bm, int bn, int64_t chosen_bh, int64_t chosen_qblock) {
  block_m = bm;
  block_n = bn;
  d = s.d;
  rows = s.bh() * s.lq;
  steps = (s.lk + bn - 1) / bn;
  q_blocks = (s.lq + bm - 1) / bm;
  o_bh = chosen_bh;
  o_qblock = chosen_qblock;
  const size_t cells = size_t(rows * steps);
  for (Buffer<float>* f : {&m_before, &m_after, &alpha, &l_before, &l_after, &rowsum}) {
    f->resize(b, cells);
    f->fill_bytes(0xFF);
  }
  tile_state.resize(b, size_t(s.bh() * q_blocks * steps));
  tile_state.fill_bytes(kTileNotRun);
  const bool chosen = chosen_qblock >= 0;
  if (chosen) {
    require_range("trace query block", chosen_qblock, 0, q_blocks - 1);
    require_range("trace batch*head", chosen_bh, 0, s.bh() - 1);
  }
  o_partial.resize(b, chosen ? size_t(steps * bm * s.d) : 0);
  s_tile.resize(b, chosen ? size_t(steps * bm * bn) : 0);
  p_tile.resize(b, chosen ? size_t(steps * bm * bn) : 0);
  for (Buffer<float>* f : {&o_partial, &s_tile, &p_tile}) f->fill_bytes(0xFF);
}

FlashTraceView FlashTrace::view() {
  FlashTraceView v;
  v.m_before = m_before.data();
  v.m_after = m_after.data();
  v.alpha = alpha.data();
  v.l_before = l_before.data();
  v.l_after = l_after.data();
  v.rowsum = rowsum.data();
  v.tile_state = tile_state.data();
  v.rows = rows;
  v.steps = steps;
  v.q_blocks = q_blocks;
  v.block_m = block_m;
  v.block_n = block_n;
  v.d = d;
  v.o_bh = o_bh;
  v.o_qblock = o_qblock;
  v.o_partial = o_partial.data();
  v.s_tile = s_tile.data();
  v.p_tile = p_tile.data();
  return v;
}

// [SECTION] The teaching kernel: the editable source's launch ---------------------------------------------

namespace detail {

namespace {
editable::Arg traced(const char* name, float* p, int64_t size) {
  return p ? editable::tensor(name, editable::DType::F32, p, size, true) : editable::absent(name, editable::DType::F32);
}
}  // namespace

// flash_teaching(q, k, v, out, trace_..., Lq, Lk, d, heads, group, scale, causal, BLOCK_M, BLOCK_N,
// chosen_bh, chosen_qblock) of kernels/editable/sources/flash_attention.cu: (q blocks, batch*heads)
// programs of kThreads threads, smem_bytes of dynamic shared memory; the trace's arrays as its trace_
// parameters (absent without a trace, and S, P, O without a chosen block).
editable::Launch teaching_launch(const float* q, const float* k, const float* v, float* out, const Shape& s,
                                 float scale, bool causal, int bm, int bn, FlashTraceView* t) {
  using editable::DType;
  editable::Launch l;
  l.rung = "flash-attention";
  l.kernel = "flash_teaching";
  const int64_t q_blocks = (s.lq + bm - 1) / bm, steps = (s.lk + bn - 1) / bn;
  l.grid.x = uint32_t(q_blocks);
  l.grid.y = uint32_t(s.bh());
  l.block.x = kThreads;
  l.shared_bytes = size_t(smem_bytes(bm, bn, s.d));
  const int64_t q_size = s.bh() * s.lq * s.d, kv_size = s.kv_bh() * s.lk * s.d, cells = s.bh() * s.lq * steps;
  const bool chosen = t && t->o_qblock >= 0;
  l.args = {editable::tensor("q", DType::F32, const_cast<float*>(q), q_size, false),
            editable::tensor("k", DType::F32, const_cast<float*>(k), kv_size, false),
            editable::tensor("v", DType::F32, const_cast<float*>(v), kv_size, false),
            editable::tensor("out", DType::F32, out, q_size, true),
            traced("trace_m_before", t ? t->m_before : nullptr, cells),
            traced("trace_m_after", t ? t->m_after : nullptr, cells),
            traced("trace_alpha", t ? t->alpha : nullptr, cells),
            traced("trace_l_before", t ? t->l_before : nullptr, cells),
            traced("trace_l_after", t ? t->l_after : nullptr, cells),
            traced("trace_rowsum", t ? t->rowsum : nullptr, cells),
            t ? editable::tensor("trace_tile_state", DType::U8, t->tile_state, s.bh() * q_blocks * steps, true)
              : editable::absent("trace_tile_state", DType::U8),
            traced("trace_s", chosen ? t->s_tile : nullptr, steps * bm * bn),
            traced("trace_p", chosen ? t->p_tile : nullptr, steps * bm * bn),
            traced("trace_o", chosen ? t->o_partial : nullptr, steps * bm * s.d),
            editable::i64("Lq", s.lq),
            editable::i64("Lk", s.lk),
            editable::i32("d", s.d),
            editable::i64("heads", s.heads),
            editable::i64("group", s.group()),
            editable::f32("scale", scale),
            editable::i32("causal", causal ? 1 : 0),
            editable::i32("BLOCK_M", bm),
            editable::i32("BLOCK_N", bn),
            editable::i64("chosen_bh", chosen ? t->o_bh : -1),
            editable::i64("chosen_qblock", chosen ? t->o_qblock : -1)};
  return l;
}

}  // namespace detail

editable::Fault run_teaching(Backend b, const float* q, const float* k, const float* v, float* out, const Shape& s,
                             const Options& o, int block_m, int block_n, FlashTraceView* trace,
                             const editable::Source* src) {
  if (!supported_head_dim(s.d))
    throw InputError(out_of_range_message("d (head dimension)", std::to_string(s.d),
                                          std::string("one of ") + head_dims_text()));
  require_range("Lq", s.lq, 1, int64_t(1) << 24);
  require_range("Lk", s.lk, 1, int64_t(1) << 24);
  require_range("B*H", s.bh(), 1, 65535);
  check_kv_heads(s.kv(), s.heads);
  check_tiles(b, block_m, block_n, s.d);
  if (trace && (trace->rows != s.bh() * s.lq || trace->block_m != block_m || trace->block_n != block_n ||
                trace->steps != (s.lk + block_n - 1) / block_n || trace->d != s.d))
    throw RuntimeError("flash_attention: trace was reset for another shape or tile");
  const float scale = o.resolved_scale(s.d);
  const editable::Fault f =
      editable::launch(b, src, detail::teaching_launch(q, k, v, out, s, scale, o.causal, block_m, block_n, trace));
  if (!src && f.kind != editable::Fault::None) throw RuntimeError("flash_attention (shipped): " + f.text());
  return f;
}

// [SECTION] Views: weights composed from the trace ---------------------------------------------------------

void compose_weights(Backend b, const FlashTraceView& t, int64_t lq, int64_t lk, int64_t step, float* dst,
                     int channels) {
  if (t.o_qblock < 0 || !t.p_tile) throw RuntimeError("compose_weights: the trace has no chosen query block");
  require_range("step", step, 1, t.steps);
  require_range("channels", channels, 1, 4);
  if (b == Backend::Cuda) {
#ifdef KL_HAS_CUDA
    return detail::compose_weights_cuda(t, lq, lk, step, dst, channels);
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  const int bm = t.block_m, bn = t.block_n;
  std::vector<float> factor(static_cast<size_t>(step));
  for (int r = 0; r < bm; ++r) {
    const int64_t i = t.o_qblock * bm + r;
    const int64_t row = t.o_bh * lq + i;
    float l = 0.0f;
    if (i < lq) {
      l = t.l_after[row * t.steps + step - 1];
      // factor[k] = alpha_{k+1} * ... * alpha_{step-1}: what tile k's P has been rescaled by since
      float f = 1.0f;
      for (int64_t k = step - 1; k >= 0; --k) {
        factor[size_t(k)] = f;
        f *= t.alpha[row * t.steps + k];
      }
    }
    for (int64_t j = 0; j < lk; ++j) {
      const int64_t k = j / bn;
      const int64_t tile_cell = (k * bm + r) * bn + (j - k * bn);
      const bool shown = i < lq && k < step && t.s_tile[tile_cell] != -std::numeric_limits<float>::infinity();
      float* c = dst + (r * lk + j) * channels;
      c[0] = shown && l > 0.0f ? t.p_tile[tile_cell] * factor[size_t(k)] / l : 0.0f;
      if (channels >= 2) c[1] = cell_value(shown ? kCellNormal : kCellMasked);
    }
  }
}

// [SECTION] Command line -------------------------------------------------------------------------------

namespace {
constexpr int64_t kMaxTraceCells = int64_t(1) << 24;  // rows*steps recorded for --trace (64 MiB each)

Array to_array(const Buffer<float>& b, int64_t rows, int64_t steps) {
  return Array{{rows, steps}, b.to_host()};
}
}  // namespace

ParamSpec param::causal() { return attention::param::causal(); }
ParamSpec param::scale() { return attention::param::scale(); }
ParamSpec param::block_m() {
  return pow2_param("block_m", kMinBlock, kMaxBlock, kDefaultBlockM, "BLOCK_M: query rows per program");
}
ParamSpec param::block_n() {
  return pow2_param("block_n", kMinBlock, kMaxBlock, kDefaultBlockN,
                    "BLOCK_N: keys per K/V tile (32 at d=256 when neither tile size is given)");
}
ParamSpec param::dtype() { return choice_param("dtype", {"bf16", "fp16"}, "bf16", "--variant fast: input precision"); }

namespace {
// The registry's run: the fast variant on the CUDA backend, else the teaching kernel with its trace (m, l and alpha
// per row and step) where it fits kMaxTraceCells.
KernelRunResult run_entry(const KernelRunRequest& r) {
  const Array& q = r.inputs.at("q");
  const Array& k = r.inputs.at("k");
  const Array& v = r.inputs.at("v");
  const Shape s = shape_from_arrays(q, k, v);  // k and v may have fewer heads (grouped-query attention)
  Options o;
  o.causal = r.params.get_bool("causal");
  o.scale = r.params.get_float("scale");
  int bm = int(r.params.get_int("block_m")), bn = int(r.params.get_int("block_n"));
  if (!r.params.was_set("block_m") && !r.params.was_set("block_n")) std::tie(bm, bn) = default_tiles(s.d);
  KernelRunResult res;
  if (r.variant == "fast" && r.source)
    throw InputError("--source: --variant fast is not editable; the editable source is the teaching version's");
  if (r.variant == "fast") {
#ifdef KL_HAS_FLASH_FAST
    if (r.backend != Backend::Cuda)
      throw InputError("--variant fast: runs on the CUDA backend only; use --variant teaching on the CPU");
    Array out = run_fast_host(q, k, v, o.causal, o.resolved_scale(s.d), r.params.get_text("dtype"));
    out.shape = q.shape;
    res.outputs["out"] = std::move(out);
    return res;
#endif
  }
  Buffer<float> dq(r.backend, q.data.size()), dk(r.backend, k.data.size()), dv(r.backend, v.data.size());
  dq.upload(q.data);
  dk.upload(k.data);
  dv.upload(v.data);
  Buffer<float> dout(r.backend, q.data.size());
  dout.fill_bytes(0xFF);  // poison
  {
    FlashTrace trace;
    const bool record = s.bh() * s.lq * ((s.lk + bn - 1) / bn) <= kMaxTraceCells;
    FlashTraceView tv;
    if (record) {
      trace.reset(r.backend, s, bm, bn);
      tv = trace.view();
    }
    const editable::Fault f =
        run_teaching(r.backend, dq.data(), dk.data(), dv.data(), dout.data(), s, o, bm, bn, record ? &tv : nullptr,
                     r.source);
    if (f.kind != editable::Fault::None) throw editable::FaultError(f);
    if (record) {
      res.outputs["trace_m"] = to_array(trace.m_after, trace.rows, trace.steps);
      res.outputs["trace_l"] = to_array(trace.l_after, trace.rows, trace.steps);
      res.outputs["trace_alpha"] = to_array(trace.alpha, trace.rows, trace.steps);
    }
  }
  res.outputs["out"] = Array{q.shape, dout.to_host()};
  return res;
}

// The registry's bench: the teaching kernel at d = 64 and 128 (no baseline), then the fast variant's rows.
std::vector<bench::Row> bench_entry(Backend b, bool quick) {
  std::vector<bench::Row> rows;
  for (int d : {64, 128}) {
    Shape s;
    s.batch = quick ? 1 : 4;
    s.heads = quick ? 1 : 8;
    s.lq = s.lk = quick ? 64 : 4096;
    s.d = d;
    const size_t n = size_t(s.bh() * s.lq * d);
    Buffer<float> dq(b, n), dk(b, n), dv(b, n), dout(b, n);
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    dq.upload(h);
    dk.upload(h);
    dv.upload(h);
    Options o;
    const bench::Timing t = bench::time(
        b, [&] { run_teaching(b, dq.data(), dk.data(), dv.data(), dout.data(), s, o, kDefaultBlockM, kDefaultBlockN); },
        quick ? 1 : 3, quick ? 3 : 10);
    bench::Row row;
    row.kernel = "flash-attention";
    row.variant = "teaching";
    row.shape = s.text();
    row.ms = t.median_ms;
    const double flops = 4.0 * double(s.bh()) * double(s.lq) * double(s.lk) * d;
    row.tflops = bench::tflops(flops, t.median_ms);
    row.baseline = "none (the teaching variant; `fast` is the one to time)";
    rows.push_back(row);
  }
#ifdef KL_HAS_FLASH_FAST
  for (bench::Row& row : bench_fast(b, quick)) rows.push_back(std::move(row));
#endif
  return rows;
}
}  // namespace

KernelEntry entry() {
  KernelEntry e;
  e.name = "flash-attention";
  e.summary = "softmax(Q K^T * scale) V streaming K/V tiles with a running max and sum: no wall";
  e.variants = {"teaching"};
#ifdef KL_HAS_FLASH_FAST
  e.variants.push_back("fast");
  e.untraced_variants = {"fast"};
#endif
  e.default_variant = "teaching";
  e.inputs = {"q", "k", "v"};
  e.params = {param::causal(), param::scale(), param::block_m(), param::block_n()};
#ifdef KL_HAS_FLASH_FAST
  e.params.push_back(param::dtype());
#endif
  e.run = run_entry;
  e.bench = bench_entry;
  return e;
}

}  // namespace kl::flash_attention
