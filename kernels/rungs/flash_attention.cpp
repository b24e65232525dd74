// Rung 5, host side: tile shapes, the trace, the CPU backend's program-by-program launch, `run` wiring.
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

void check_tiles(Backend b, int block_m, int block_n, int d) {
  for (auto [name, val] : {std::pair<const char*, int>{"block_m", block_m}, {"block_n", block_n}})
    if (!is_power_of_2(val) || val < kMinBlock || val > kMaxBlock)
      throw InputError(out_of_range_message(name, std::to_string(val), "powers of two in [16, 128]"));
  const DeviceInfo info = device_info(b);
  const int64_t need = smem_bytes(block_m, block_n, d);
  if (need > info.smem_per_block_optin) {
    std::ostringstream m;
    m << "flash-attention: tile block_m=" << block_m << " x block_n=" << block_n << " at d=" << d << " needs "
      << need << " bytes of shared memory per block; the limit is " << info.smem_per_block_optin << " bytes"
      << (info.assumed ? " (assumed: an H200's, CPU backend)" : "") << "; e.g. block_m=" << block_m / 2
      << " or block_n=" << block_n / 2 << " fits";
    throw InputError(m.str());
  }
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

// [SECTION] CPU backend: the launch grid, program by program ------------------------------------------

namespace detail {

namespace {
// The state one CUDA block keeps in shared memory, as host vectors.
struct Smem {
  std::vector<float> Qs, Ks, Vs, S, O, m, l, a;
  Smem(int bm, int bn, int d)
      : Qs(size_t(bm) * d), Ks(size_t(bn) * d), Vs(size_t(bn) * d), S(size_t(bm) * bn), O(size_t(bm) * d),
        m(size_t(bm)), l(size_t(bm)), a(size_t(bm)) {}
};

void record_row(FlashTraceView* t, int64_t row, int64_t step, float m0, float m1, float alpha, float l0,
                float l1, float rs) {
  const int64_t c = row * t->steps + step;
  t->m_before[c] = m0;
  t->m_after[c] = m1;
  t->alpha[c] = alpha;
  t->l_before[c] = l0;
  t->l_after[c] = l1;
  t->rowsum[c] = rs;
}

void program(int64_t qb, int64_t bh, const float* q, const float* k, const float* v, float* out, const Shape& s,
             float scale, bool causal, int bm, int bn, FlashTraceView* t, Smem& sm) {
  const int d = s.d;
  const int64_t lq = s.lq, lk = s.lk, q0 = qb * bm;
  const int64_t kv = kv_bh_of(bh, s.heads, s.group());  // grouped-query attention: this head's K/V
  const int rows_here = int(std::min<int64_t>(bm, lq - q0));
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < bm; ++r)
    for (int c = 0; c < d; ++c) {
      sm.Qs[size_t(r * d + c)] = r < rows_here ? q[(bh * lq + q0 + r) * d + c] : 0.0f;
      sm.O[size_t(r * d + c)] = 0.0f;
    }
  std::fill(sm.m.begin(), sm.m.end(), ninf);
  std::fill(sm.l.begin(), sm.l.end(), 0.0f);
  const int64_t n_tiles = (lk + bn - 1) / bn;
  const int64_t n_run = tiles_to_run(qb, bm, bn, lq, lk, causal);
  const bool chosen = t && t->o_qblock == qb && t->o_bh == bh;
  for (int64_t step = 0; step < n_run; ++step) {
    const int64_t k0 = step * bn;
    // load the K/V tile (keys past Lk: zeros)
    for (int jj = 0; jj < bn; ++jj)
      for (int c = 0; c < d; ++c) {
        const int64_t j = k0 + jj;
        sm.Ks[size_t(jj * d + c)] = j < lk ? k[(kv * lk + j) * d + c] : 0.0f;
        sm.Vs[size_t(jj * d + c)] = j < lk ? v[(kv * lk + j) * d + c] : 0.0f;
      }
    // S = Q K^T * scale, masked -inf
    for (int r = 0; r < bm; ++r) {
      const int64_t n_vis = r < rows_here ? attention::visible_keys(q0 + r, lq, lk, causal) : 0;
      for (int jj = 0; jj < bn; ++jj) {
        float acc = ninf;
        if (k0 + jj < n_vis) {
          acc = 0.0f;
          for (int c = 0; c < d; ++c) acc += sm.Qs[size_t(r * d + c)] * sm.Ks[size_t(jj * d + c)];
          acc *= scale;
        }
        sm.S[size_t(r * bn + jj)] = acc;
      }
    }
    if (chosen)
      std::copy(sm.S.begin(), sm.S.end(), t->s_tile + step * bm * bn);
    // per row: m_new = max(m_old, rowmax(S)), alpha, P = exp(S - m_new), l_new = alpha l + rowsum(P)
    for (int r = 0; r < rows_here; ++r) {
      float* Sr = &sm.S[size_t(r * bn)];
      float tile_max = ninf;
      for (int jj = 0; jj < bn; ++jj) tile_max = std::max(tile_max, Sr[jj]);
      const float m0 = sm.m[size_t(r)], l0 = sm.l[size_t(r)];
      float m = m0, l = l0;
      const float alpha = rescale(m, l, tile_max);
      float rs = 0.0f;
      for (int jj = 0; jj < bn; ++jj) rs += (Sr[jj] = tile_prob(Sr[jj], m));
      l += rs;
      sm.m[size_t(r)] = m;
      sm.l[size_t(r)] = l;
      sm.a[size_t(r)] = alpha;
      if (t) record_row(t, bh * lq + q0 + r, step, m0, m, alpha, l0, l, rs);
    }
    for (int r = rows_here; r < bm; ++r)
      for (int jj = 0; jj < bn; ++jj) sm.S[size_t(r * bn + jj)] = 0.0f;
    // O_new = alpha * O_old + P V
    for (int r = 0; r < rows_here; ++r)
      for (int c = 0; c < d; ++c) {
        float acc = sm.a[size_t(r)] * sm.O[size_t(r * d + c)];
        for (int jj = 0; jj < bn; ++jj) acc += sm.S[size_t(r * bn + jj)] * sm.Vs[size_t(jj * d + c)];
        sm.O[size_t(r * d + c)] = acc;
      }
    if (chosen) {
      std::copy(sm.S.begin(), sm.S.end(), t->p_tile + step * bm * bn);
      std::copy(sm.O.begin(), sm.O.end(), t->o_partial + step * bm * d);
    }
    if (t) t->tile_state[(bh * t->q_blocks + qb) * t->steps + step] = kTileComputed;
  }
  // Tiles skipped by the causal mask: the state carries forward, the trace says so.
  if (t)
    for (int64_t step = n_run; step < n_tiles; ++step) {
      for (int r = 0; r < rows_here; ++r) {
        const float m = sm.m[size_t(r)], l = sm.l[size_t(r)];
        record_row(t, bh * lq + q0 + r, step, m, m, 1.0f, l, l, 0.0f);
      }
      if (chosen) {
        std::fill(t->s_tile + step * bm * bn, t->s_tile + (step + 1) * bm * bn, ninf);
        std::fill(t->p_tile + step * bm * bn, t->p_tile + (step + 1) * bm * bn, 0.0f);
        std::copy(sm.O.begin(), sm.O.end(), t->o_partial + step * bm * d);
      }
      t->tile_state[(bh * t->q_blocks + qb) * t->steps + step] = kTileSkipped;
    }
  // out = O / l; a row that saw nothing (l = 0) gives 0
  for (int r = 0; r < rows_here; ++r) {
    const float l = sm.l[size_t(r)];
    for (int c = 0; c < d; ++c)
      out[(bh * lq + q0 + r) * d + c] = l > 0.0f ? sm.O[size_t(r * d + c)] / l : 0.0f;
  }
}
}  // namespace

void run_cpu(const float* q, const float* k, const float* v, float* out, const Shape& s, float scale,
             bool causal, int bm, int bn, FlashTraceView* t) {
  Smem sm(bm, bn, s.d);
  const int64_t q_blocks = (s.lq + bm - 1) / bm;
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t qb = 0; qb < q_blocks; ++qb) program(qb, bh, q, k, v, out, s, scale, causal, bm, bn, t, sm);
}

}  // namespace detail

void run_teaching(Backend b, const float* q, const float* k, const float* v, float* out, const Shape& s,
                  const Options& o, int block_m, int block_n, FlashTraceView* trace) {
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
  if (b == Backend::Cpu) return detail::run_cpu(q, k, v, out, s, scale, o.causal, block_m, block_n, trace);
#ifdef KL_HAS_CUDA
  detail::run_cuda(q, k, v, out, s, scale, o.causal, block_m, block_n, trace);
#else
  throw RuntimeError("built without CUDA");
#endif
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

KernelEntry entry() {
  KernelEntry e;
  e.name = "flash-attention";
  e.summary = "softmax(Q K^T * scale) V streaming K/V tiles with a running max and sum: no wall";
  e.variants = {"teaching"};
#ifdef KL_HAS_FLASH_FAST
  e.variants.push_back("fast");
#endif
  e.default_variant = "teaching";
  e.inputs = {"q", "k", "v"};
  e.params = {param::causal(), param::scale(), param::block_m(), param::block_n()};
#ifdef KL_HAS_FLASH_FAST
  e.params.push_back(param::dtype());
#endif
  e.run = [](const KernelRunRequest& r) {
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
      run_teaching(r.backend, dq.data(), dk.data(), dv.data(), dout.data(), s, o, bm, bn, record ? &tv : nullptr);
      if (record) {
        res.outputs["trace_m"] = to_array(trace.m_after, trace.rows, trace.steps);
        res.outputs["trace_l"] = to_array(trace.l_after, trace.rows, trace.steps);
        res.outputs["trace_alpha"] = to_array(trace.alpha, trace.rows, trace.steps);
      }
    }
    res.outputs["out"] = Array{q.shape, dout.to_host()};
    return res;
  };
  e.bench = [](Backend b, bool quick) {
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
      row.tflops = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / 1e12 : 0;
      row.baseline = "none (the teaching variant; `fast` is the one to time)";
      rows.push_back(row);
    }
#ifdef KL_HAS_FLASH_FAST
    for (bench::Row& row : bench_fast(b, quick)) rows.push_back(std::move(row));
#endif
    return rows;
  };
  return e;
}

}  // namespace kl::flash_attention
