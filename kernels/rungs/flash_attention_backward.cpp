// Rung 6, host side: the wall, tile shapes, the trace, the forward's O and L, the naive variant's CPU
// loops, the launch of the teaching kernel (kernels/editable/sources/flash_attention_backward.cu) on either
// backend, `run` wiring.
#include "kernels/rungs/flash_attention_backward.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/runtime/errors.h"

namespace kl::flash_attention_backward {

// [SECTION] Saved state and the wall -------------------------------------------------------------------

uint64_t naive_state_bytes(const Shape& s) {
  return 2ull * uint64_t(s.bh()) * uint64_t(s.lq) * uint64_t(s.lk) * sizeof(float);
}

uint64_t lse_bytes(const Shape& s) { return uint64_t(s.bh()) * uint64_t(s.lq) * sizeof(float); }

Wall naive_wall(Backend b, const Shape& s) {
  Wall w;
  w.need = naive_state_bytes(s);
  if (b == Backend::Cuda) mem::device_memory(&w.available, &w.total);
  else w.available = mem::host_available_bytes();
  return w;
}

void check_naive_wall(Backend b, const Shape& s) {
  const Wall w = naive_wall(b, s);
  if (w.fits()) return;
  std::ostringstream m;
  m << "flash-attention-backward naive: P and dP at " << s.text() << " need " << mem::bytes_text(w.need) << " ("
    << w.need << " bytes) of " << (b == Backend::Cuda ? "device" : "host") << " memory; "
    << mem::bytes_text(w.available) << " (" << w.available << " bytes) "
    << (b == Backend::Cuda ? "free of " + mem::bytes_text(w.total) : std::string("available"))
    << "; the teaching variant keeps L instead: " << lse_bytes(s) << " bytes; use --variant teaching";
  throw InputError(m.str());
}

// [SECTION] Tile shapes ----------------------------------------------------------------------------------

int64_t smem_bytes(int block_m, int block_n, int d) {
  const int64_t bm = block_m, bn = block_n, dd = d;
  return 4 * (4 * bn * dd + 2 * bm * dd + 2 * bm * bn + 2 * bm);
}

void check_tiles(Backend b, int block_m, int block_n, int d) {
  flash_attention::check_tiles_for(b, "flash-attention-backward", smem_bytes, "and", block_m, block_n, d);
}

void check_shape(const Shape& s) {
  if (!attention::supported_head_dim(s.d))
    throw InputError(out_of_range_message("d (head dimension)", std::to_string(s.d),
                                          std::string("one of ") + attention::head_dims_text()));
  require_range("Lq", s.lq, 1, int64_t(1) << 24);
  require_range("Lk", s.lk, 1, int64_t(1) << 24);
  require_range("B*H", s.bh(), 1, 65535);
  flash_attention::check_kv_heads(s.kv(), s.heads);
}

// [SECTION] The trace ------------------------------------------------------------------------------------

void BackwardTrace::reset(Backend b, const Shape& s, int bm, int bn, int64_t chosen_bh, int64_t chosen_kblock,
                          int64_t chosen_qblock) {
  block_m = bm;
  block_n = bn;
  d = s.d;
  k_blocks = (s.lk + bn - 1) / bn;
  q_blocks = (s.lq + bm - 1) / bm;
  c_bh = chosen_bh;
  c_kblock = chosen_kblock;
  c_qblock = chosen_qblock;
  if (chosen_kblock >= 0 || chosen_qblock >= 0) require_range("trace batch*head", chosen_bh, 0, s.bh() - 1);
  if (chosen_kblock >= 0) require_range("trace K/V tile", chosen_kblock, 0, k_blocks - 1);
  if (chosen_qblock >= 0) require_range("trace query tile", chosen_qblock, 0, q_blocks - 1);
  tile_state.resize(b, size_t(s.bh() * k_blocks * q_blocks));
  tile_state.fill_bytes(kTileNotRun);
  const size_t kc = chosen_kblock >= 0 ? 1 : 0, qc = chosen_qblock >= 0 ? 1 : 0;
  p_tile.resize(b, kc * size_t(q_blocks * bm * bn));
  ds_tile.resize(b, kc * size_t(q_blocks * bm * bn));
  dk_partial.resize(b, kc * size_t(q_blocks * bn * s.d));
  dv_partial.resize(b, kc * size_t(q_blocks * bn * s.d));
  dq_contrib.resize(b, qc * size_t(k_blocks * bm * s.d));
  for (Buffer<float>* f : {&p_tile, &ds_tile, &dk_partial, &dv_partial, &dq_contrib}) f->fill_bytes(0xFF);
}

BackwardTraceView BackwardTrace::view() {
  BackwardTraceView v;
  v.tile_state = tile_state.data();
  v.k_blocks = k_blocks;
  v.q_blocks = q_blocks;
  v.block_m = block_m;
  v.block_n = block_n;
  v.d = d;
  v.c_bh = c_bh;
  v.c_kblock = c_kblock;
  v.c_qblock = c_qblock;
  v.p_tile = p_tile.data();
  v.ds_tile = ds_tile.data();
  v.dk_partial = dk_partial.data();
  v.dv_partial = dv_partial.data();
  v.dq_contrib = dq_contrib.data();
  return v;
}

// [SECTION] The naive variant on the CPU; the teaching kernel's launch ------------------------------------

namespace detail {

void naive_cpu(const NaiveArgs& a) {
  const int64_t rows = a.bh * a.lq, cells = rows * a.lk;
  for (int64_t c = 0; c < cells; ++c) naive_scores(a, c);
  for (int64_t r = 0; r < rows; ++r) naive_softmax_row(a, r);
  for (int64_t c = 0; c < cells; ++c) naive_dp(a, c);
  for (int64_t r = 0; r < rows; ++r) naive_rowsum(a, r);
  for (int64_t c = 0; c < cells; ++c) naive_ds(a, c);
  for (int64_t c = 0; c < a.bh / a.group * a.lk * a.d; ++c) naive_dkdv(a, c);
  for (int64_t c = 0; c < rows * a.d; ++c) naive_dq(a, c);
}

editable::Launch teaching_launch(const float* q, const float* k, const float* v, const float* lse, const float* drow,
                                 const float* dout, float* dq, float* dk, float* dv, const Shape& s, float scale,
                                 bool causal, int bm, int bn, const BackwardTraceView* t) {
  using editable::DType;
  editable::Launch l;
  l.rung = "flash-attention-backward";
  l.kernel = "backward_teaching";
  l.grid.x = uint32_t((s.lk + bn - 1) / bn);
  l.grid.y = uint32_t(s.kv_bh());  // one program per K/V tile of each kv (batch, head)
  l.block.x = kThreads;
  l.shared_bytes = size_t(smem_bytes(bm, bn, s.d));
  const int64_t nq = s.bh() * s.lq * s.d, nk = s.kv_bh() * s.lk * s.d, rows = s.bh() * s.lq;
  auto in = [](const char* name, const float* p, int64_t n) {
    return editable::tensor(name, DType::F32, const_cast<float*>(p), n, false);
  };
  auto out = [](const char* name, float* p, int64_t n) { return editable::tensor(name, DType::F32, p, n, true); };
  // The trace's tensors: absent without a trace, or (the per-step tiles) when no program or query tile
  // is chosen; their stores are then dropped.
  auto rec = [](const char* name, float* p, int64_t n) {
    return p && n > 0 ? editable::tensor(name, DType::F32, p, n, true) : editable::absent(name, DType::F32);
  };
  const bool kc = t && t->c_kblock >= 0, qc = t && t->c_qblock >= 0;
  const int64_t pt = kc ? t->q_blocks * bm * bn : 0, kd = kc ? t->q_blocks * bn * s.d : 0;
  const int64_t qd = qc ? t->k_blocks * bm * s.d : 0;
  l.args = {in("q", q, nq), in("k", k, nk), in("v", v, nk), in("lse", lse, rows), in("drow", drow, rows),
            in("dout", dout, nq), out("dq", dq, nq), out("dk", dk, nk), out("dv", dv, nk),
            t ? editable::tensor("tile_state", DType::U8, t->tile_state, s.bh() * t->k_blocks * t->q_blocks, true)
              : editable::absent("tile_state", DType::U8),
            rec("p_tile", t ? t->p_tile : nullptr, pt), rec("ds_tile", t ? t->ds_tile : nullptr, pt),
            rec("dk_partial", t ? t->dk_partial : nullptr, kd), rec("dv_partial", t ? t->dv_partial : nullptr, kd),
            rec("dq_contrib", t ? t->dq_contrib : nullptr, qd),
            editable::i64("lq", s.lq), editable::i64("lk", s.lk), editable::i32("d", s.d),
            editable::i64("group", s.group()),
            editable::f32("scale", scale), editable::i32("causal", causal ? 1 : 0), editable::i32("BLOCK_M", bm),
            editable::i32("BLOCK_N", bn), editable::i64("c_bh", t ? t->c_bh : -1),
            editable::i64("c_kblock", kc ? t->c_kblock : -1), editable::i64("c_qblock", qc ? t->c_qblock : -1)};
  return l;
}

}  // namespace detail

// [SECTION] Reference (float64) ----------------------------------------------------------------------------

namespace {

// The multi-head chain rule (k, v with as many heads as q): s.kv_heads is ignored.
void reference_mha(const float* q, const float* k, const float* v, const float* dout, const Shape& s,
                   const Options& opt, double* dq, double* dk, double* dv) {
  const double scale = opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(double(s.d));
  const int64_t d = s.d, lq = s.lq, lk = s.lk;
  std::fill(dq, dq + s.bh() * lq * d, 0.0);
  std::fill(dk, dk + s.bh() * lk * d, 0.0);
  std::fill(dv, dv + s.bh() * lk * d, 0.0);
  std::vector<double> p(static_cast<size_t>(lk)), dp(static_cast<size_t>(lk));
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t n = attention::visible_keys(i, lq, lk, opt.causal), qi = (bh * lq + i) * d;
      if (n == 0) continue;  // sees nothing: output 0, gradient 0
      double mx = -std::numeric_limits<double>::infinity(), sum = 0, D = 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t kj = (bh * lk + j) * d;
        double sc = 0, g = 0;
        for (int64_t c = 0; c < d; ++c) {
          sc += double(q[qi + c]) * k[kj + c];
          g += double(dout[qi + c]) * v[kj + c];
        }
        p[size_t(j)] = sc * scale;
        dp[size_t(j)] = g;
        mx = std::max(mx, p[size_t(j)]);
      }
      for (int64_t j = 0; j < n; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
      for (int64_t j = 0; j < n; ++j) D += (p[size_t(j)] /= sum) * dp[size_t(j)];
      for (int64_t j = 0; j < n; ++j) {
        const int64_t kj = (bh * lk + j) * d;
        const double ds = p[size_t(j)] * (dp[size_t(j)] - D);
        for (int64_t c = 0; c < d; ++c) {
          dq[qi + c] += scale * ds * k[kj + c];
          dk[kj + c] += scale * ds * q[qi + c];
          dv[kj + c] += p[size_t(j)] * dout[qi + c];
        }
      }
    }
}

}  // namespace

void reference(const float* q, const float* k, const float* v, const float* dout, const Shape& s, const Options& opt,
               double* dq, double* dk, double* dv) {
  if (s.kv() == s.heads) return reference_mha(q, k, v, dout, s, opt, dq, dk, dv);
  // Grouped-query attention: head h of batch b gets a copy of kv head h / (Hq / Hkv) (repeat_interleave),
  // the multi-head backward runs on the copies, and each copy's dK, dV are added onto its kv head.
  const size_t head = size_t(s.lk * s.d), heads_q = size_t(s.heads), heads_kv = size_t(s.kv());
  const size_t copies = size_t(s.bh()), per_kv = heads_q / heads_kv;
  std::vector<float> k_rep(copies * head), v_rep(copies * head);
  for (size_t c = 0; c < copies; ++c) {
    const size_t src = (c / heads_q) * heads_kv + (c % heads_q) / per_kv;
    std::copy_n(k + src * head, head, &k_rep[c * head]);
    std::copy_n(v + src * head, head, &v_rep[c * head]);
  }
  std::vector<double> dk_rep(copies * head), dv_rep(copies * head);
  Shape mha = s;
  mha.kv_heads = 0;
  reference_mha(q, k_rep.data(), v_rep.data(), dout, mha, opt, dq, dk_rep.data(), dv_rep.data());
  std::fill(dk, dk + size_t(s.kv_bh()) * head, 0.0);
  std::fill(dv, dv + size_t(s.kv_bh()) * head, 0.0);
  for (size_t c = 0; c < copies; ++c) {
    const size_t dst = (c / heads_q) * heads_kv + (c % heads_q) / per_kv;
    for (size_t e = 0; e < head; ++e) {
      dk[dst * head + e] += dk_rep[c * head + e];
      dv[dst * head + e] += dv_rep[c * head + e];
    }
  }
}

// [SECTION] Running it -----------------------------------------------------------------------------------

void forward(Backend b, const float* q, const float* k, const float* v, float* o, float* lse, const Shape& s,
             const Options& opt, int block_m, int block_n) {
  flash_attention::FlashTrace trace;
  trace.reset(b, s, block_m, block_n);
  flash_attention::FlashTraceView tv = trace.view();
  flash_attention::run_teaching(b, q, k, v, o, s, opt, block_m, block_n, &tv);
  const int64_t rows = trace.rows, steps = trace.steps;
  if (b == Backend::Cuda) {
#ifdef KL_HAS_CUDA
    detail::lse_from_trace_cuda(trace.m_after.data(), trace.l_after.data(), lse, rows, steps);
    return mem::synchronize(b);  // the trace is freed on return
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float m = trace.m_after.data()[r * steps + steps - 1], l = trace.l_after.data()[r * steps + steps - 1];
    lse[r] = l > 0.0f ? m + std::log(l) : -INFINITY;
  }
}

void run_naive(Backend b, const float* q, const float* k, const float* v, const float* dout, float* dq,
               float* dk, float* dv, const Shape& s, const Options& opt) {
  check_shape(s);
  check_naive_wall(b, s);  // before anything is allocated
  const size_t cells = size_t(s.bh() * s.lq * s.lk);
  Buffer<float> p(b, cells), dp(b, cells), drow(b, size_t(s.bh() * s.lq));
  detail::NaiveArgs a{q, k, v, dout, p.data(), dp.data(), drow.data(), dq, dk, dv,
                      s.bh(), s.lq, s.lk, s.d, opt.resolved_scale(s.d), opt.causal, s.group()};
  if (b == Backend::Cpu) return detail::naive_cpu(a);
#ifdef KL_HAS_CUDA
  detail::naive_cuda(a);
  mem::synchronize(b);  // P and dP are freed on return
#else
  throw RuntimeError("built without CUDA");
#endif
}

editable::Fault run_teaching(Backend b, const float* q, const float* k, const float* v, const float* o,
                             const float* lse, const float* dout, float* dq, float* dk, float* dv, const Shape& s,
                             const Options& opt, int block_m, int block_n, BackwardTraceView* trace,
                             const editable::Source* src) {
  check_shape(s);
  check_tiles(b, block_m, block_n, s.d);
  if ((o == nullptr) != (lse == nullptr))
    throw RuntimeError("flash_attention_backward: give both the forward's O and L, or neither");
  if (trace && (trace->block_m != block_m || trace->block_n != block_n || trace->d != s.d ||
                trace->k_blocks != (s.lk + block_n - 1) / block_n || trace->q_blocks != (s.lq + block_m - 1) / block_m))
    throw RuntimeError("flash_attention_backward: trace was reset for another shape or tile");
  const size_t rows = size_t(s.bh() * s.lq);
  Buffer<float> o_buf, lse_buf, drow(b, rows);
  if (!o) {
    o_buf.resize(b, rows * size_t(s.d));
    lse_buf.resize(b, rows);
    forward(b, q, k, v, o_buf.data(), lse_buf.data(), s, opt, block_m, block_n);
    o = o_buf.data();
    lse = lse_buf.data();
  }
  mem::set(b, dq, 0, rows * size_t(s.d) * sizeof(float));  // dQ is accumulated
  // D = rowsum(dO ∘ O), before the kernel.
  if (b == Backend::Cpu) {
    for (size_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int c = 0; c < s.d; ++c) acc += dout[r * size_t(s.d) + size_t(c)] * o[r * size_t(s.d) + size_t(c)];
      drow.data()[r] = acc;
    }
  } else {
#ifdef KL_HAS_CUDA
    detail::rowsum_cuda(dout, o, drow.data(), int64_t(rows), s.d);
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  const editable::Launch l = detail::teaching_launch(q, k, v, lse, drow.data(), dout, dq, dk, dv, s,
                                                     opt.resolved_scale(s.d), opt.causal, block_m, block_n, trace);
  const editable::Fault f = editable::launch(b, src, l);  // synchronizes: the temporaries are freed on return
  if (!src && f.kind != editable::Fault::None) throw RuntimeError("flash_attention_backward (shipped): " + f.text());
  return f;
}

// [SECTION] Command line -----------------------------------------------------------------------------------

namespace {

std::vector<int64_t> row_shape(const Array& q) {
  return std::vector<int64_t>(q.shape.begin(), q.shape.end() - 1);
}

void require_shape(const KernelRunRequest& r, const char* name, const std::vector<int64_t>& want,
                   const char* like) {
  const Array& a = r.inputs.at(name);
  if (a.shape != want) {
    Array w;
    w.shape = want;
    throw InputError(std::string("--in ") + name + ": shape " + a.shape_text() + " must be " + w.shape_text() +
                     " (" + like + ")");
  }
}

// --variant fast (kernels/rungs/flash_attention_backward_fast.h): bf16 / fp16 on the device, CUDA only.
KernelRunResult run_fast_entry(const KernelRunRequest& r, float scale) {
  if (r.backend != Backend::Cuda)
    throw InputError(std::string("--variant fast: flash-attention-backward runs it on the CUDA backend only, not ") +
                     backend_name(r.backend) + "; use --variant teaching there");
#ifdef KL_HAS_CUDA
  const bool has_o = r.inputs.count("o") > 0;
  const FastHostResult g = run_fast_host(r.inputs.at("q"), r.inputs.at("k"), r.inputs.at("v"), r.inputs.at("do"),
                                         has_o ? &r.inputs.at("o") : nullptr, has_o ? &r.inputs.at("lse") : nullptr,
                                         r.params.get_bool("causal"), scale, r.params.get_text("dtype"),
                                         r.params.get_bool("deterministic"));
  KernelRunResult res;
  res.outputs["dq"] = g.dq;
  res.outputs["dk"] = g.dk;
  res.outputs["dv"] = g.dv;
  return res;
#else
  (void)scale;
  throw InputError("--variant fast: flash-attention-backward needs the CUDA backend; this build has no CUDA");
#endif
}

KernelRunResult run_entry(const KernelRunRequest& r) {
  const Array& q = r.inputs.at("q");
  const Array& k = r.inputs.at("k");
  const Array& v = r.inputs.at("v");
  const Shape s = flash_attention::shape_from_arrays(q, k, v);  // k, v may have fewer heads (grouped-query)
  check_shape(s);
  require_shape(r, "do", q.shape, "q's shape");
  const bool has_o = r.inputs.count("o") > 0, has_l = r.inputs.count("lse") > 0;
  if (has_o != has_l)
    throw InputError("--in o, --in lse: give both (the forward's O and L = m + log l) or neither");
  if (has_o) {
    require_shape(r, "o", q.shape, "q's shape");
    require_shape(r, "lse", row_shape(q), "q's shape without d");
  }
  Options opt;
  opt.causal = r.params.get_bool("causal");
  opt.scale = r.params.get_float("scale");
  if (r.source && r.variant != "teaching")
    throw InputError("--source: --variant " + r.variant +
                     " is not editable; the editable source is the teaching version's");
  if (r.variant == "fast") return run_fast_entry(r, opt.resolved_scale(s.d));
  const int bm = int(r.params.get_int("block_m")), bn = int(r.params.get_int("block_n"));
  if (r.variant == "naive") check_naive_wall(r.backend, s);
  else check_tiles(r.backend, bm, bn, s.d);
  Buffer<float> bq(r.backend, 0), bk(r.backend, 0), bv(r.backend, 0), bdo(r.backend, 0);
  bq.upload(q.data);
  bk.upload(k.data);
  bv.upload(v.data);
  bdo.upload(r.inputs.at("do").data);
  Buffer<float> dq(r.backend, q.data.size()), dk(r.backend, k.data.size()), dv(r.backend, v.data.size());
  for (Buffer<float>* f : {&dq, &dk, &dv}) f->fill_bytes(0xFF);  // poison
  if (r.variant == "naive") {
    run_naive(r.backend, bq.data(), bk.data(), bv.data(), bdo.data(), dq.data(), dk.data(), dv.data(), s, opt);
  } else {
    Buffer<float> bo(r.backend, 0), bl(r.backend, 0);
    if (has_o) {
      bo.upload(r.inputs.at("o").data);
      bl.upload(r.inputs.at("lse").data);
    }
    const editable::Fault f = run_teaching(r.backend, bq.data(), bk.data(), bv.data(), has_o ? bo.data() : nullptr,
                                           has_o ? bl.data() : nullptr, bdo.data(), dq.data(), dk.data(), dv.data(),
                                           s, opt, bm, bn, nullptr, r.source);
    if (f.kind != editable::Fault::None) throw editable::FaultError(f);
  }
  KernelRunResult res;
  res.outputs["dq"] = Array{q.shape, dq.to_host()};
  res.outputs["dk"] = Array{k.shape, dk.to_host()};
  res.outputs["dv"] = Array{v.shape, dv.to_host()};
  return res;
}

}  // namespace

// The tiles are rung 5's: the same limits and defaults, so one spec serves both rungs.
static_assert(kMinBlock == flash_attention::kMinBlock && kMaxBlock == flash_attention::kMaxBlock &&
                  kDefaultBlockM == flash_attention::kDefaultBlockM &&
                  kDefaultBlockN == flash_attention::kDefaultBlockN,
              "rung 6's tiles take rung 5's specs");

ParamSpec param::causal() { return flash_attention::param::causal(); }
ParamSpec param::scale() { return flash_attention::param::scale(); }
ParamSpec param::block_m() {
  ParamSpec s = flash_attention::param::block_m();
  s.help = "BLOCK_M: query rows per query tile (the inner loop of each program)";
  return s;
}
ParamSpec param::block_n() {
  ParamSpec s = flash_attention::param::block_n();
  s.help = "BLOCK_N: keys per K/V tile (one program each)";
  return s;
}

ParamSpec param::dtype() { return flash_attention::param::dtype(); }
ParamSpec param::deterministic() {
  return bool_param("deterministic", false,
                    "--variant fast: dQ bitwise repeatable, by a separate pass per query tile or, on an "
                    "H100/H200 from Lq, Lk = 512 at d = 64 and 128 (heads not grouped), by the K/V tiles' adds "
                    "in a fixed order (0: fp32 adds in any order, except where the repeatable way measured faster "
                    "and runs either way: on an H100/H200 the fixed order from Lq, Lk = 512 to 2047, at d = 64 "
                    "under the causal mask to 4095, and at d = 256 the pass)");
}

namespace {
// `bench flash-attention-backward`: the teaching variant at one small shape (no baseline: it is for
// reading), then the fast variant's rows (CUDA; their peers come from bench/torch_flash_backward.py).
std::vector<bench::Row> bench_entry(Backend b, bool quick) {
  std::vector<bench::Row> rows;
  Shape s;
  s.batch = 1;
  s.heads = quick ? 1 : 4;
  s.lq = s.lk = quick ? 64 : 1024;
  s.d = 64;
  const size_t n = size_t(s.bh() * s.lq * s.d);
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  Buffer<float> q(b, 0), k(b, 0), v(b, 0), dout(b, 0), dq(b, n), dk(b, n), dv(b, n);
  q.upload(h);
  k.upload(h);
  v.upload(h);
  dout.upload(h);
  Buffer<float> o(b, n), lse(b, size_t(s.bh() * s.lq));
  const Options opt;
  forward(b, q.data(), k.data(), v.data(), o.data(), lse.data(), s, opt);
  const bench::Timing t = bench::time(
      b,
      [&] {
        run_teaching(b, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                     dv.data(), s, opt);
      },
      quick ? 1 : 3, quick ? 3 : 10);
  bench::Row row;
  row.kernel = "flash-attention-backward";
  row.variant = "teaching";
  row.shape = s.text();
  row.ms = t.median_ms;
  const double flops = 2.5 * 4.0 * double(s.bh()) * double(s.lq) * double(s.lk) * s.d;
  row.tflops = bench::tflops(flops, t.median_ms);
  row.baseline = "none (the teaching variant; `fast` is the one to time)";
  rows.push_back(row);
  for (bench::Row& r : bench_fast(b, quick)) rows.push_back(std::move(r));
  return rows;
}
}  // namespace

KernelEntry entry() {
  KernelEntry e;
  e.name = "flash-attention-backward";
  e.summary = "dQ, dK, dV of softmax(Q K^T * scale) V from dO: naive keeps P, teaching recomputes it from L";
  e.variants = {"teaching", "naive", "fast"};
  e.untraced_variants = {"naive", "fast"};
  e.default_variant = "teaching";
  e.inputs = {"q", "k", "v", "do"};
  e.optional_inputs = {"o", "lse"};
  e.outputs = {"dq", "dk", "dv"};
  e.params = {param::causal(), param::scale(), param::block_m(), param::block_n(), param::dtype(),
              param::deterministic()};
  e.run = run_entry;
  e.bench = bench_entry;
  return e;
}

}  // namespace kl::flash_attention_backward
