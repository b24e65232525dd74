// Rung 6, host side: the wall, tile shapes, the trace, the forward's O and L, the CPU backend's
// program-by-program launch of both variants, `run` wiring.
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
  for (auto [name, val] : {std::pair<const char*, int>{"block_m", block_m}, {"block_n", block_n}})
    if (!is_power_of_2(val) || val < kMinBlock || val > kMaxBlock)
      throw InputError(out_of_range_message(name, std::to_string(val), "powers of two in [16, 128]"));
  const DeviceInfo info = device_info(b);
  const int64_t need = smem_bytes(block_m, block_n, d);
  if (need <= info.smem_per_block_optin) return;
  std::ostringstream m;
  m << "flash-attention-backward: tile block_m=" << block_m << " x block_n=" << block_n << " at d=" << d
    << " needs " << need << " bytes of shared memory per block; the limit is " << info.smem_per_block_optin
    << " bytes" << (info.assumed ? " (assumed: an H200's, CPU backend)" : "") << "; e.g. block_m=" << block_m / 2
    << " and block_n=" << block_n / 2 << " fits";
  throw InputError(m.str());
}

void check_shape(const Shape& s) {
  if (!attention::supported_head_dim(s.d))
    throw InputError(out_of_range_message("d (head dimension)", std::to_string(s.d),
                                          std::string("one of ") + attention::head_dims_text()));
  require_range("Lq", s.lq, 1, int64_t(1) << 24);
  require_range("Lk", s.lk, 1, int64_t(1) << 24);
  require_range("B*H", s.bh(), 1, 65535);
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

// [SECTION] CPU backend ----------------------------------------------------------------------------------

namespace detail {

void naive_cpu(const NaiveArgs& a) {
  const int64_t rows = a.bh * a.lq, cells = rows * a.lk;
  for (int64_t c = 0; c < cells; ++c) naive_scores(a, c);
  for (int64_t r = 0; r < rows; ++r) naive_softmax_row(a, r);
  for (int64_t c = 0; c < cells; ++c) naive_dp(a, c);
  for (int64_t r = 0; r < rows; ++r) naive_rowsum(a, r);
  for (int64_t c = 0; c < cells; ++c) naive_ds(a, c);
  for (int64_t c = 0; c < a.bh * a.lk * a.d; ++c) naive_dkdv(a, c);
  for (int64_t c = 0; c < rows * a.d; ++c) naive_dq(a, c);
}

namespace {
// The state one CUDA block keeps in shared memory, as host vectors.
struct Smem {
  std::vector<float> Ks, Vs, dKs, dVs, Qs, dOs, P, dS, Ls, Ds;
  Smem(int bm, int bn, int d)
      : Ks(size_t(bn) * d), Vs(size_t(bn) * d), dKs(size_t(bn) * d), dVs(size_t(bn) * d), Qs(size_t(bm) * d),
        dOs(size_t(bm) * d), P(size_t(bm) * bn), dS(size_t(bm) * bn), Ls(size_t(bm)), Ds(size_t(bm)) {}
};

struct Args {
  const float *q, *k, *v, *lse, *drow, *dout;
  float *dq, *dk, *dv;
  Shape s;
  float scale;
  bool causal;
  int bm, bn;
};

void load_query_tile(const Args& a, int64_t bh, int64_t qb, Smem& sm) {
  const int d = a.s.d;
  const int64_t q0 = qb * a.bm;
  for (int r = 0; r < a.bm; ++r) {
    const bool in = q0 + r < a.s.lq;
    const int64_t row = bh * a.s.lq + q0 + r;
    for (int c = 0; c < d; ++c) {
      sm.Qs[size_t(r * d + c)] = in ? a.q[row * d + c] : 0.0f;
      sm.dOs[size_t(r * d + c)] = in ? a.dout[row * d + c] : 0.0f;
    }
    sm.Ls[size_t(r)] = in ? a.lse[row] : -INFINITY;
    sm.Ds[size_t(r)] = in ? a.drow[row] : 0.0f;
  }
}

// P = exp(S - L), dP = dO V^T, dS = P ∘ (dP - D) for every cell of the (qb, kb) tile pair.
void tile_p_ds(const Args& a, int64_t qb, int64_t kb, Smem& sm) {
  const int d = a.s.d;
  for (int r = 0; r < a.bm; ++r) {
    const int64_t i = qb * a.bm + r;
    const int64_t n_vis = i < a.s.lq ? attention::visible_keys(i, a.s.lq, a.s.lk, a.causal) : 0;
    for (int jj = 0; jj < a.bn; ++jj) {
      float p = 0.0f, ds = 0.0f;
      if (kb * a.bn + jj < n_vis) {
        float s = 0.0f, dp = 0.0f;
        for (int c = 0; c < d; ++c) {
          s += sm.Qs[size_t(r * d + c)] * sm.Ks[size_t(jj * d + c)];
          dp += sm.dOs[size_t(r * d + c)] * sm.Vs[size_t(jj * d + c)];
        }
        p = recomputed_prob(s * a.scale, sm.Ls[size_t(r)]);
        ds = p * (dp - sm.Ds[size_t(r)]);
      }
      sm.P[size_t(r * a.bn + jj)] = p;
      sm.dS[size_t(r * a.bn + jj)] = ds;
    }
  }
}

// dV_j += P^T dO_i, dK_j += scale * dS^T Q_i, then dQ_i += scale * dS K_j (written to `dq_add`, BM x d).
void tile_accumulate(const Args& a, Smem& sm, std::vector<float>& dq_add) {
  const int d = a.s.d;
  for (int jj = 0; jj < a.bn; ++jj)
    for (int c = 0; c < d; ++c) {
      float acc_v = 0.0f, acc_k = 0.0f;
      for (int r = 0; r < a.bm; ++r) {
        acc_v += sm.P[size_t(r * a.bn + jj)] * sm.dOs[size_t(r * d + c)];
        acc_k += sm.dS[size_t(r * a.bn + jj)] * sm.Qs[size_t(r * d + c)];
      }
      sm.dVs[size_t(jj * d + c)] += acc_v;
      sm.dKs[size_t(jj * d + c)] += a.scale * acc_k;
    }
  for (int r = 0; r < a.bm; ++r)
    for (int c = 0; c < d; ++c) {
      float acc = 0.0f;
      for (int jj = 0; jj < a.bn; ++jj) acc += sm.dS[size_t(r * a.bn + jj)] * sm.Ks[size_t(jj * d + c)];
      dq_add[size_t(r * d + c)] = a.scale * acc;
    }
}

void record_step(BackwardTraceView* t, int64_t bh, int64_t kb, int64_t qb, bool computed, const Smem& sm,
                 const std::vector<float>& dq_add) {
  const int bm = t->block_m, bn = t->block_n, d = t->d;
  t->tile_state[(bh * t->k_blocks + kb) * t->q_blocks + qb] = computed ? kTileComputed : kTileSkipped;
  if (bh != t->c_bh) return;
  if (kb == t->c_kblock) {
    float* p = t->p_tile + qb * bm * bn;
    float* ds = t->ds_tile + qb * bm * bn;
    for (int c = 0; c < bm * bn; ++c) {
      p[c] = computed ? sm.P[size_t(c)] : 0.0f;
      ds[c] = computed ? sm.dS[size_t(c)] : 0.0f;
    }
    std::copy(sm.dKs.begin(), sm.dKs.end(), t->dk_partial + qb * bn * d);
    std::copy(sm.dVs.begin(), sm.dVs.end(), t->dv_partial + qb * bn * d);
  }
  if (qb == t->c_qblock) {
    float* dst = t->dq_contrib + kb * bm * d;
    for (int c = 0; c < bm * d; ++c) dst[c] = computed ? dq_add[size_t(c)] : 0.0f;
  }
}

void program(const Args& a, int64_t bh, int64_t kb, Smem& sm, std::vector<float>& dq_add, BackwardTraceView* t) {
  const int d = a.s.d;
  const int64_t lq = a.s.lq, lk = a.s.lk, k0 = kb * a.bn;
  const int64_t q_blocks = (lq + a.bm - 1) / a.bm;
  for (int jj = 0; jj < a.bn; ++jj)
    for (int c = 0; c < d; ++c) {
      const int64_t j = k0 + jj;
      sm.Ks[size_t(jj * d + c)] = j < lk ? a.k[(bh * lk + j) * d + c] : 0.0f;
      sm.Vs[size_t(jj * d + c)] = j < lk ? a.v[(bh * lk + j) * d + c] : 0.0f;
    }
  std::fill(sm.dKs.begin(), sm.dKs.end(), 0.0f);
  std::fill(sm.dVs.begin(), sm.dVs.end(), 0.0f);
  const int64_t first = first_q_tile(kb, a.bm, a.bn, lq, lk, a.causal);
  if (t)
    for (int64_t qb = 0; qb < first; ++qb) record_step(t, bh, kb, qb, false, sm, dq_add);
  for (int64_t qb = first; qb < q_blocks; ++qb) {
    load_query_tile(a, bh, qb, sm);
    tile_p_ds(a, qb, kb, sm);
    tile_accumulate(a, sm, dq_add);
    const int64_t q0 = qb * a.bm;
    for (int r = 0; r < a.bm && q0 + r < lq; ++r)
      for (int c = 0; c < d; ++c) a.dq[(bh * lq + q0 + r) * d + c] += dq_add[size_t(r * d + c)];
    if (t) record_step(t, bh, kb, qb, true, sm, dq_add);
  }
  for (int jj = 0; jj < a.bn && k0 + jj < lk; ++jj)
    for (int c = 0; c < d; ++c) {
      a.dk[(bh * lk + k0 + jj) * d + c] = sm.dKs[size_t(jj * d + c)];
      a.dv[(bh * lk + k0 + jj) * d + c] = sm.dVs[size_t(jj * d + c)];
    }
}
}  // namespace

void teaching_cpu(const float* q, const float* k, const float* v, const float* lse, const float* drow,
                  const float* dout, float* dq, float* dk, float* dv, const Shape& s, float scale, bool causal,
                  int bm, int bn, BackwardTraceView* t) {
  const Args a{q, k, v, lse, drow, dout, dq, dk, dv, s, scale, causal, bm, bn};
  Smem sm(bm, bn, s.d);
  std::vector<float> dq_add(size_t(bm) * s.d);
  const int64_t k_blocks = (s.lk + bn - 1) / bn;
  for (int64_t bh = 0; bh < s.bh(); ++bh)
    for (int64_t kb = 0; kb < k_blocks; ++kb) program(a, bh, kb, sm, dq_add, t);
}

}  // namespace detail

// [SECTION] Reference (float64) ----------------------------------------------------------------------------

void reference(const float* q, const float* k, const float* v, const float* dout, const Shape& s, const Options& opt,
               double* dq, double* dk, double* dv) {
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
                      s.bh(), s.lq, s.lk, s.d, opt.resolved_scale(s.d), opt.causal};
  if (b == Backend::Cpu) return detail::naive_cpu(a);
#ifdef KL_HAS_CUDA
  detail::naive_cuda(a);
  mem::synchronize(b);  // P and dP are freed on return
#else
  throw RuntimeError("built without CUDA");
#endif
}

void run_teaching(Backend b, const float* q, const float* k, const float* v, const float* o, const float* lse,
                  const float* dout, float* dq, float* dk, float* dv, const Shape& s, const Options& opt,
                  int block_m, int block_n, BackwardTraceView* trace) {
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
  const float scale = opt.resolved_scale(s.d);
  if (b == Backend::Cpu) {
    for (size_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int c = 0; c < s.d; ++c) acc += dout[r * size_t(s.d) + size_t(c)] * o[r * size_t(s.d) + size_t(c)];
      drow.data()[r] = acc;
    }
    return detail::teaching_cpu(q, k, v, lse, drow.data(), dout, dq, dk, dv, s, scale, opt.causal, block_m,
                                block_n, trace);
  }
#ifdef KL_HAS_CUDA
  detail::rowsum_cuda(dout, o, drow.data(), int64_t(rows), s.d);
  detail::teaching_cuda(q, k, v, lse, drow.data(), dout, dq, dk, dv, s, scale, opt.causal, block_m, block_n, trace);
  mem::synchronize(b);  // the temporaries are freed on return
#else
  throw RuntimeError("built without CUDA");
#endif
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
  const Shape s = attention::shape_from_arrays(q, k, v);
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
    run_teaching(r.backend, bq.data(), bk.data(), bv.data(), has_o ? bo.data() : nullptr,
                 has_o ? bl.data() : nullptr, bdo.data(), dq.data(), dk.data(), dv.data(), s, opt, bm, bn);
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
                    "--variant fast: dQ by a separate pass per query tile, bitwise repeatable (0: fp32 atomics)");
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
  row.tflops = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / 1e12 : 0;
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
