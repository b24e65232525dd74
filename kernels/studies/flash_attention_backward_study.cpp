#include "kernels/studies/flash_attention_backward_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "kernels/rungs/flash_attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"

namespace kl::flash_attention_backward_study {

namespace fab = flash_attention_backward;

// The panel's parameters: the kernel's specs (fab::param, rung 5's) for what the kernel takes, with the
// defaults the panel opens on declared as overrides; the rest (shape, which tile, seed) are the study's.
std::vector<ParamSpec> params() {
  const std::string grid = "opens on Lq=96 x Lk=128 as a 3 x 4 grid of tiles to step";
  return {int_param("lq", 1, 1024, 96, "Lq: query rows"),
          int_param("lk", 1, 1024, 128, "Lk: keys"),
          pow2_param("d", 16, 128, 32, "d: head dimension"),  // a slider, as on rungs 4 and 5
          panel_override(fab::param::causal(), "1", "opens causal, so the grid shows the skipped tiles"),
          panel_override(fab::param::block_m(), "32", grid),
          panel_override(fab::param::block_n(), "32", grid),
          int_param("kv_tile", 0, 1023, 1, "the program shown: K/V tile j"),
          int_param("q_tile", 0, 1023, 2, "the step shown: query tile i of program j (and dQ_i's tile)"),
          int_param("seed", 0, 1000000, 1, "seed of the random Q, K, V, dO in [-1, 1]"),
          choice_param("view", {"saves", "tiles", "errors", "checks", "inside"}, "saves",
                       "the panel's view: what the backward saves, the tiles, the errors as tiles fold in, the checks, "
                       "inside the fast kernel (its recorded timeline)")};
}

namespace {

std::vector<float> random_floats(std::mt19937_64& g, size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// Relative 2-norm error (absolute where the reference is all zeros).
double rel(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = got[i] - ref[i];
    num += std::isnan(got[i]) ? INFINITY : e * e;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Rows [r0, r0 + n) of a [rows, d] matrix (rows past the end: 0).
std::vector<double> rows_of(const std::vector<double>& m, int64_t rows, int d, int64_t r0, int64_t n) {
  std::vector<double> out(size_t(n * d), 0.0);
  for (int64_t r = 0; r < n && r0 + r < rows; ++r)
    std::copy(m.begin() + (r0 + r) * d, m.begin() + (r0 + r + 1) * d, out.begin() + r * d);
  return out;
}

struct Inputs {
  std::vector<float> q, k, v, dout;
};

struct Gradients {
  std::vector<float> dq, dk, dv;
};

Gradients run_variant(Backend b, bool naive, const Inputs& in, const Shape& s, const Options& o, int bm, int bn,
                      fab::BackwardTrace* t, const editable::Source* src = nullptr, editable::Fault* fault = nullptr) {
  Buffer<float> q(b, 0), k(b, 0), v(b, 0), dout(b, 0);
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  dout.upload(in.dout);
  Buffer<float> dq(b, in.q.size()), dk(b, in.k.size()), dv(b, in.v.size());
  for (Buffer<float>* f : {&dq, &dk, &dv}) f->fill_bytes(0xFF);
  if (naive) {
    fab::run_naive(b, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), s, o);
  } else {
    fab::BackwardTraceView tv = t->view();
    const editable::Fault f = fab::run_teaching(b, q.data(), k.data(), v.data(), nullptr, nullptr, dout.data(),
                                                dq.data(), dk.data(), dv.data(), s, o, bm, bn, &tv, src);
    if (fault) *fault = f;
  }
  mem::synchronize(b);
  return {dq.to_host(), dk.to_host(), dv.to_host()};
}

// Rung 5's final P of query tile qt, the keys of K/V tile kv: [BM, BN] (0 past Lq / Lk).
std::vector<float> forward_p(Backend b, const Inputs& in, const Shape& s, const Options& o, int bm, int bn,
                             int64_t qt, int64_t kv) {
  Buffer<float> q(b, 0), k(b, 0), v(b, 0), out(b, in.q.size());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  flash_attention::FlashTrace ft;
  ft.reset(b, s, bm, bn, 0, qt);
  flash_attention::FlashTraceView fv = ft.view();
  flash_attention::run_teaching(b, q.data(), k.data(), v.data(), out.data(), s, o, bm, bn, &fv);
  Buffer<float> w(b, size_t(bm * s.lk));
  flash_attention::compose_weights(b, fv, s.lq, s.lk, fv.steps, w.data(), 1);
  const std::vector<float> all = w.to_host();
  std::vector<float> tile(size_t(bm * bn), 0.0f);
  for (int r = 0; r < bm; ++r)
    for (int jj = 0; jj < bn && kv * bn + jj < s.lk; ++jj) tile[size_t(r * bn + jj)] = all[size_t(r * s.lk + kv * bn + jj)];
  return tile;
}

void study_wall(Backend b, Result& r) {
  r.p_bytes = r.s.bh() * uint64_t(r.s.lq) * uint64_t(r.s.lk) * sizeof(float);
  r.naive_bytes = fab::naive_state_bytes(r.s);
  r.lse_bytes = fab::lse_bytes(r.s);
  r.wall = fab::naive_wall(b, r.s);
  r.wall_length = int64_t(std::floor(std::sqrt(double(r.wall.available) / (8.0 * double(r.s.bh())))));
  Shape past = r.s;
  past.lq = past.lk = 2 * std::max<int64_t>(r.wall_length, 1);
  try {
    fab::check_naive_wall(b, past);
  } catch (const InputError& e) {
    r.wall_message = e.what();
    r.wall_refused = r.wall_message.find(std::to_string(fab::naive_state_bytes(past)) + " bytes") != std::string::npos;
  }
}

void study_tiles(Result& r, const fab::BackwardTrace& t) {
  r.tile_state = t.tile_state.to_host();
  r.skips_exact = true;
  for (int64_t kb = 0; kb < r.k_blocks; ++kb)
    for (int64_t qb = 0; qb < r.q_blocks; ++qb) {
      bool any = false;  // does any row of query tile qb see a key of K/V tile kb?
      for (int64_t i = qb * r.block_m; i < std::min<int64_t>(r.s.lq, (qb + 1) * r.block_m); ++i)
        any = any || attention::visible_keys(i, r.s.lq, r.s.lk, r.o.causal) > kb * r.block_n;
      const uint8_t st = r.tile_state[size_t(kb * r.q_blocks + qb)];
      r.skips_exact = r.skips_exact && st == (any ? fab::kTileComputed : fab::kTileSkipped);
      (st == fab::kTileComputed ? r.tiles_computed : r.tiles_skipped) += 1;
    }
}

// The chosen tile pair (q_tile, kv_tile): P against the forward's, dS's signs over the visible cells.
void study_tile(Result& r) {
  const int bm = r.block_m, bn = r.block_n;
  const float* p = r.p_recomputed.data() + r.q_tile * bm * bn;
  const float* ds = r.ds.data() + r.q_tile * bm * bn;
  for (int row = 0; row < bm; ++row) {
    const int64_t i = r.q_tile * bm + row;
    if (i >= r.s.lq) break;
    const int64_t n = attention::visible_keys(i, r.s.lq, r.s.lk, r.o.causal);
    for (int jj = 0; jj < bn; ++jj) {
      const int64_t j = r.kv_tile * bn + jj;
      if (j >= r.s.lk) break;
      const size_t c = size_t(row * bn + jj);
      r.p_max_abs_diff = std::max(r.p_max_abs_diff, double(std::abs(p[c] - r.p_forward[c])));
      if (j >= n) continue;
      (ds[c] > 0 ? r.ds_positive : ds[c] < 0 ? r.ds_negative : r.ds_zero) += 1;
    }
  }
}

void study_convergence(Result& r, const std::vector<double>& dq_ref, const std::vector<double>& dk_ref,
                       const std::vector<double>& dv_ref) {
  const int bm = r.block_m, bn = r.block_n, d = r.d;
  r.dk_ref_tile = rows_of(dk_ref, r.s.lk, d, r.kv_tile * bn, bn);
  r.dv_ref_tile = rows_of(dv_ref, r.s.lk, d, r.kv_tile * bn, bn);
  r.dq_ref_tile = rows_of(dq_ref, r.s.lq, d, r.q_tile * bm, bm);
  const int64_t keys = std::min<int64_t>(bn, r.s.lk - r.kv_tile * bn);
  for (int64_t qb = 0; qb < r.q_blocks; ++qb) {
    std::vector<double> dk(size_t(bn * d), 0.0), dv(size_t(bn * d), 0.0);
    for (int64_t c = 0; c < keys * d; ++c) {
      dk[size_t(c)] = r.dk_partial[size_t(qb * bn * d + c)];
      dv[size_t(c)] = r.dv_partial[size_t(qb * bn * d + c)];
    }
    r.dk_err.push_back(rel(dk, r.dk_ref_tile));
    r.dv_err.push_back(rel(dv, r.dv_ref_tile));
  }
  const int64_t rows = std::min<int64_t>(bm, r.s.lq - r.q_tile * bm);
  std::vector<double> dq(size_t(bm * d), 0.0);
  for (int64_t kb = 0; kb < r.k_blocks; ++kb) {
    for (int64_t c = 0; c < rows * d; ++c) dq[size_t(c)] += r.dq_contrib[size_t(kb * bm * d + c)];
    r.dq_err.push_back(rel(dq, r.dq_ref_tile));
  }
}

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

std::string errs_text(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ", ") + num(x);
  return s;
}

}  // namespace

Result run(Backend b, const ParamValues& p) {
  const std::optional<editable::Source> e = editable::edited("flash-attention-backward");
  return run(b, p, e ? &*e : nullptr);
}

Result run(Backend b, const ParamValues& p, const editable::Source* src) {
  Result r;
  r.backend = b;
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("flash-attention-backward");
  r.s.lq = p.get_int("lq");
  r.s.lk = p.get_int("lk");
  r.s.d = r.d = std::stoi(p.get_text("d"));
  r.o.causal = p.get_bool("causal");
  r.block_m = int(p.get_int("block_m"));
  r.block_n = int(p.get_int("block_n"));
  fab::check_shape(r.s);
  fab::check_tiles(b, r.block_m, r.block_n, r.d);
  r.k_blocks = (r.s.lk + r.block_n - 1) / r.block_n;
  r.q_blocks = (r.s.lq + r.block_m - 1) / r.block_m;
  r.kv_tile = p.get_int("kv_tile");
  r.q_tile = p.get_int("q_tile");
  require_range("kv_tile", r.kv_tile, 0, r.k_blocks - 1);
  require_range("q_tile", r.q_tile, 0, r.q_blocks - 1);
  std::mt19937_64 g(uint64_t(p.get_int("seed")));
  const size_t nq = size_t(r.s.lq * r.d), nk = size_t(r.s.lk * r.d);
  const Inputs in{random_floats(g, nq), random_floats(g, nk), random_floats(g, nk), random_floats(g, nq)};
  std::vector<double> dq_ref(nq), dk_ref(nk), dv_ref(nk);
  fab::reference(in.q.data(), in.k.data(), in.v.data(), in.dout.data(), r.s, r.o, dq_ref.data(), dk_ref.data(),
                 dv_ref.data());
  r.tolerance = 2e-5 * std::max(1.0, std::sqrt(double(std::max(r.s.lq, r.s.lk)) / 64.0));

  fab::BackwardTrace t;
  t.reset(b, r.s, r.block_m, r.block_n, 0, r.kv_tile, r.q_tile);
  const Gradients got = run_variant(b, false, in, r.s, r.o, r.block_m, r.block_n, &t, src, &r.fault);
  if (r.fault.kind != editable::Fault::None) r.fault_line = "edited kernel: " + r.fault.text();
  r.dq_rel = rel(widen(got.dq), dq_ref);
  r.dk_rel = rel(widen(got.dk), dk_ref);
  r.dv_rel = rel(widen(got.dv), dv_ref);
  r.p_recomputed = t.p_tile.to_host();
  r.ds = t.ds_tile.to_host();
  r.dk_partial = t.dk_partial.to_host();
  r.dv_partial = t.dv_partial.to_host();
  r.dq_contrib = t.dq_contrib.to_host();
  r.p_forward = forward_p(b, in, r.s, r.o, r.block_m, r.block_n, r.q_tile, r.kv_tile);
  r.q_rows.assign(size_t(r.block_m * r.d), 0.0f);
  const int64_t q0 = r.q_tile * r.block_m, q_rows = std::min<int64_t>(r.block_m, r.s.lq - q0);
  std::copy(in.q.begin() + q0 * r.d, in.q.begin() + (q0 + q_rows) * r.d, r.q_rows.begin());

  study_wall(b, r);
  const Gradients nv = run_variant(b, true, in, r.s, r.o, r.block_m, r.block_n, nullptr);
  r.naive_rel = std::max({rel(widen(nv.dq), dq_ref), rel(widen(nv.dk), dk_ref), rel(widen(nv.dv), dv_ref)});
  study_tiles(r, t);
  study_tile(r);
  study_convergence(r, dq_ref, dk_ref, dv_ref);
  const double ratio = r.lse_bytes ? double(r.p_bytes) / double(r.lse_bytes) : 0;
  if (r.fault.kind != editable::Fault::None || r.dq_rel >= r.tolerance || r.dk_rel >= r.tolerance ||
      r.dv_rel >= r.tolerance)
    r.notice = "the teaching backward's gradients do not match float64 (dQ, dK, dV off by " + num(r.dq_rel) + ", " +
               num(r.dk_rel) + ", " + num(r.dv_rel) + "): the checks below say where";
  else
    r.notice = "the forward keeps L, " + mem::bytes_text(r.lse_bytes) + " (one float per query row), where a naive "
               "backward keeps P, " + mem::bytes_text(r.p_bytes) + " (" + num(ratio) + "x more), and dP beside it: its "
               "wall is Lq = Lk = " + std::to_string(r.wall_length) + " in this memory. Rung 6 recomputes P from L "
               "tile by tile (off by " + num(r.p_max_abs_diff) + ")";
  return r;
}

Curve dkdv_curve(const Result& r) {
  Curve c;
  c.title = "dK_j, dV_j of program " + std::to_string(r.kv_tile) + " against float64";
  c.x_label = "query tiles folded in";
  for (size_t i = 0; i < r.dk_err.size(); ++i) c.x.push_back(double(i + 1));
  c.labels = {"dK_j", "dV_j"};
  c.y = {r.dk_err, r.dv_err};
  c.now = double(r.q_tile + 1);
  return c;
}

Curve dq_curve(const Result& r) {
  Curve c;
  c.title = "dQ_i of query tile " + std::to_string(r.q_tile) + " against float64";
  c.x_label = "programs folded in";
  for (size_t i = 0; i < r.dq_err.size(); ++i) c.x.push_back(double(i + 1));
  c.labels = {"dQ_i"};
  c.y = {r.dq_err};
  c.now = double(r.kv_tile + 1);
  return c;
}

Curve saved_curve(const Result& r) {
  Curve c;
  c.title = "bytes kept for the backward against L = Lq = Lk";
  c.x_label = "L = Lq = Lk";
  c.labels = {"P + dP (naive)", "L (FlashAttention)", "memory available"};
  c.y.assign(3, {});
  const double bh = double(r.s.bh());
  for (int64_t l = 64; l <= std::max<int64_t>(4 * r.wall_length, 1024); l *= 2) {
    c.x.push_back(double(l));
    c.y[0].push_back(8.0 * bh * double(l) * double(l));
    c.y[1].push_back(4.0 * bh * double(l));
    c.y[2].push_back(double(r.wall.available));
  }
  c.now = double(r.wall_length);
  return c;
}

namespace {
// The tile pair the panel steps through: "query tile 2 x K/V tile 1".
std::string pair_text(const Result& r) {
  return "query tile " + std::to_string(r.q_tile) + " x K/V tile " + std::to_string(r.kv_tile);
}

// The report's checks, in the order the panel shows them.
std::vector<study::Check> report_checks(const Result& r) {
  const int64_t past = 2 * std::max<int64_t>(r.wall_length, 1);
  Shape past_shape = r.s;
  past_shape.lq = past_shape.lk = past;
  const std::string pair = pair_text(r);
  // An edited kernel that misbehaved fails the teaching check whatever it wrote, and says what it did first.
  const bool faulted = r.fault.kind != editable::Fault::None;
  const bool teaching_ok =
      !faulted && r.dq_rel < r.tolerance && r.dk_rel < r.tolerance && r.dv_rel < r.tolerance;
  const bool fold_ok = !r.dk_err.empty() && r.dk_err.back() < r.tolerance && r.dv_err.back() < r.tolerance &&
                       r.dq_err.back() < r.tolerance;
  return {
      {"recomputed_p_equals_forward", r.p_max_abs_diff <= 1e-6,
       "recomputed P = exp(S - L) of " + pair + " against the forward's P: max abs diff " + num(r.p_max_abs_diff)},
      {"teaching_matches_reference", teaching_ok,
       (faulted ? r.fault_line + "; " : std::string()) + "teaching dQ, dK, dV against float64: relative errors " +
           num(r.dq_rel) + ", " + num(r.dk_rel) + ", " + num(r.dv_rel) + " (allowed " + num(r.tolerance) + ")"},
      {"naive_matches_reference", r.naive_rel < r.tolerance,
       "naive dQ, dK, dV against float64: largest relative error " + num(r.naive_rel)},
      {"causal_skips_exact", r.skips_exact,
       std::to_string(r.tiles_skipped) + " of " + std::to_string(r.tiles_skipped + r.tiles_computed) +
           " tile pairs skipped, exactly those where no query row sees a key of the K/V tile"},
      {"partials_fold_to_the_result", fold_ok,
       "dK_j, dV_j after the last query tile and dQ_i after the last program: relative errors " +
           (r.dk_err.empty() ? std::string("-") : num(r.dk_err.back()) + ", " + num(r.dv_err.back()) + ", " +
                                                      num(r.dq_err.back()))},
      {"naive_refused_past_the_wall", r.wall_refused,
       "naive refused at Lq = Lk = " + std::to_string(past) + " (twice its wall) before allocating, naming " +
           std::to_string(fab::naive_state_bytes(past_shape)) + " bytes asked and the bytes " +
           (r.backend == Backend::Cuda ? "free" : "available")},
  };
}

// The report's other statements, in the order of Line (then the edited kernel's file and fault, where edited).
std::vector<std::string> report_lines(const Result& r) {
  const std::string pair = pair_text(r);
  const double ratio = r.lse_bytes ? double(r.p_bytes) / double(r.lse_bytes) : 0;
  std::vector<std::string> lines = {
      "saved for the backward: the naive forward keeps P, " + mem::bytes_text(r.p_bytes) +
          "; FlashAttention keeps L = m + log l, " + mem::bytes_text(r.lse_bytes) + " (one float per query row, " +
          num(ratio) + "x less); both keep O",
      "the naive backward holds P and dP: " + mem::bytes_text(r.naive_bytes) + " of " +
          mem::bytes_text(r.wall.available) + (r.backend == Backend::Cuda ? " free" : " available") +
          "; its wall: Lq = Lk = " + std::to_string(r.wall_length) + " at this batch*heads",
      "tile order: " + std::to_string(r.k_blocks) + " programs, one per K/V tile (outer), each walking " +
          std::to_string(r.q_blocks) + " query tiles (inner); P is recomputed from L, never stored",
      "dQ: every program adds scale * dS K_j into dQ_i; on CUDA with fp32 atomicAdd (the order, and so the "
      "last bits, can change from run to run), on the CPU in program order; dK_j, dV_j stay with their program",
      "dS of " + pair + ": " + std::to_string(r.ds_positive) + " positive, " + std::to_string(r.ds_negative) +
          " negative, " + std::to_string(r.ds_zero) + " zero of the visible cells",
      "the refusal: " + r.wall_message,
      "dK_j error after each query tile: " + errs_text(r.dk_err),
      "dV_j error after each query tile: " + errs_text(r.dv_err),
      "dQ_i error after each program: " + errs_text(r.dq_err),
  };
  if (lines.size() != kLineCount) throw std::logic_error("backward study: lines out of step with Line");
  if (r.edited) {
    lines.push_back("kernel: " + r.source_file + " (edited)");
    if (!r.fault_line.empty()) lines.push_back(r.fault_line);
  }
  return lines;
}

// Every number the sentences state, by name.
nlohmann::json report_numbers(const Result& r) {
  nlohmann::json numbers = {{"p_bytes", r.p_bytes},
                            {"naive_bytes", r.naive_bytes},
                            {"lse_bytes", r.lse_bytes},
                            {"memory_available", r.wall.available},
                            {"wall_length", r.wall_length},
                            {"k_blocks", r.k_blocks},
                            {"q_blocks", r.q_blocks},
                            {"tiles_computed", r.tiles_computed},
                            {"tiles_skipped", r.tiles_skipped},
                            {"p_max_abs_diff", r.p_max_abs_diff},
                            {"ds_positive", r.ds_positive},
                            {"ds_negative", r.ds_negative},
                            {"ds_zero", r.ds_zero},
                            {"dq_rel", r.dq_rel},
                            {"dk_rel", r.dk_rel},
                            {"dv_rel", r.dv_rel},
                            {"naive_rel", r.naive_rel},
                            {"tolerance", r.tolerance},
                            {"dk_err", r.dk_err},
                            {"dv_err", r.dv_err},
                            {"dq_err", r.dq_err}};
  if (r.edited) numbers["fault"] = r.fault.kind != editable::Fault::None ? 1 : 0;
  return numbers;
}
}  // namespace

study::Report report(const Result& r) {
  study::Report rep;
  rep.panel = "backward";
  rep.notice = r.notice;
  rep.settings = r.s.text() + (r.o.causal ? ", causal" : "") + ", block_m=" + std::to_string(r.block_m) +
                 ", block_n=" + std::to_string(r.block_n) + ", kv_tile=" + std::to_string(r.kv_tile) +
                 ", q_tile=" + std::to_string(r.q_tile) + ", " + backend_name(r.backend) + " backend";
  rep.checks = report_checks(r);
  rep.lines = report_lines(r);
  rep.numbers = report_numbers(r);
  return rep;
}

study::Entry entry() {
  study::Entry e;
  e.panel = "backward";
  e.summary = "rung 6: saved state P against L and the wall, tile order, recomputed P, dS, dK/dV/dQ converging";
  e.params = [] { return params(); };
  e.run = [](Backend b, const ParamValues& p) { return report(run(b, p)); };
  return e;
}

}  // namespace kl::flash_attention_backward_study
