#include "kernels/studies/flash_attention_study.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/runtime/errors.h"

namespace kl::flash_attention_study {
namespace {

std::string kib_text(double bytes) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f KiB", bytes / 1024.0);
  return b;
}

std::string whole(double v) {  // no thousands separators: the panel's text wraps after a comma
  char b[48];
  std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}

const char* plural(int64_t n) { return n == 1 ? "" : "s"; }

}  // namespace

// The panel's list, built from the rung's specs (kernels/rungs/flash_attention.h) where the kernel takes
// the parameter, with the panel's deliberate departures declared by panel_override.
std::vector<ParamSpec> params() {
  const char* why_tiles = "opens on Lq=48 x Lk=96 as a 3 x 6 grid of tiles to step";
  return {int_param("lq", 1, 512, 48, "Lq: number of queries"),
          int_param("lk", 1, 16384, 96, "Lk: number of keys (no wall: try past rung 4's)"),
          pow2_param("d", 16, 256, 32, "d: head dimension (at 256 the tiles shrink: the budget bars say why)"),
          fa::param::causal(),
          panel_override(fa::param::block_m(), "16", why_tiles),
          panel_override(fa::param::block_n(), "16", why_tiles),
          int_param("qblock", 0, 511, 1, "the query block whose rows are shown in detail"),
          int_param("step", 1, 16384, 3, "K/V tiles folded in so far (the scrubber)"),
          float_param("magnitude", 0.1, 10, 2.0, "q and k drawn uniformly from [-magnitude, magnitude]"),
          int_param("seed", 0, 1 << 30, 1, "seed of the random inputs"),
          choice_param("view", {"steps", "io", "memory", "checks", "inside"}, "steps",
                       "the panel's view: the steps, the IO argument, shared memory, the checks, inside the fast "
                       "kernel (its recorded timeline)")};
}

// [SECTION] Memory and traffic -------------------------------------------------------------------------------

double traffic_bytes_flash(const attention::Shape& s, bool causal, int bm, int bn) {
  const int64_t q_blocks = (s.lq + bm - 1) / bm;
  double kv = 0;
  for (int64_t qb = 0; qb < q_blocks; ++qb) {  // keys past Lk in the last tile are masked: no bytes
    const int64_t keys = std::min(fa::detail::tiles_to_run(qb, bm, bn, s.lq, s.lk, causal) * bn, s.lk);
    kv += double(keys) * 2.0 * s.d * 4;
  }
  return double(s.bh()) * (2.0 * double(s.lq) * s.d * 4 + kv);
}

Traffic traffic(Backend b, const attention::Shape& s, bool causal, int bm, int bn) {
  const DeviceInfo info = device_info(b);
  Traffic t;
  t.unfused = attention::traffic_bytes_unfused(s);
  t.smem = attention::traffic_bytes_smem(s);
  t.flash = traffic_bytes_flash(s, causal, bm, bn);
  const int64_t wall = attention::max_lk(s.d, info.smem_per_block_optin);
  t.smem_refused = s.lk > wall;
  for (int64_t x = 16; x <= 65536; x *= 2) {
    attention::Shape sx = s;
    sx.lk = x;
    t.lk.push_back(double(x));
    t.unfused_kib.push_back(attention::traffic_bytes_unfused(sx) / 1024.0);
    t.smem_kib.push_back(x <= wall ? attention::traffic_bytes_smem(sx) / 1024.0 : std::nan(""));
    t.flash_kib.push_back(traffic_bytes_flash(sx, causal, bm, bn) / 1024.0);
  }
  const double lq = double(s.lq), lk = double(s.lk), d = s.d;
  const int64_t q4 = (s.lq + attention::kBlockQ - 1) / attention::kBlockQ, q5 = (s.lq + bm - 1) / bm;
  // Per unit of Lk: standard moves 2 d (K, V) + 4 Lq (S, P out and in), rung 5 2 d per query block.
  t.long_lk_ratio = (d + 2.0 * lq) / (d * double(q5));
  t.long_lk_simple = 2.0 * bm / d;
  t.sram_elements = double(info.smem_per_block_optin) / 4.0;
  t.theorem_nd = double(std::min(s.lq, s.lk)) * d;
  t.theorem_applies = t.sram_elements <= t.theorem_nd;
  t.paper_standard = lq * d + lk * d + lq * lk;
  t.paper_flash = t.theorem_applies ? lq * lk * d * d / t.sram_elements : 0.0;
  char buf[900];
  std::snprintf(buf, sizeof buf,
                "Standard attention writes S and P and reads them back: 4 x Lq x Lk x 4 B = %s of its %s. Rungs 4 "
                "and 5 keep them on chip and read K and V once per program (%" PRId64 " program%s of %d queries%s; "
                "%" PRId64 " query block%s of BLOCK_M = %d). As Lk grows, standard / rung 5 tends to "
                "(d + 2 Lq) / (d x ceil(Lq / BLOCK_M)) = %.3g here; only where Lq >> d is that 2 x BLOCK_M / d "
                "(= %.3g). A larger BLOCK_M saves more.",
                kib_text(16.0 * lq * lk * double(s.bh())).c_str(), kib_text(t.unfused).c_str(), q4, plural(q4),
                attention::kBlockQ, t.smem_refused ? ", refused here" : "", q5, plural(q5), bm, t.long_lk_ratio,
                t.long_lk_simple);
  t.caption = buf;
  const std::string head =
      "Dao et al. 2022, Theorem 2: for sequence length N and M elements of SRAM with d <= M <= N d, standard "
      "attention makes Theta(N d + N^2) HBM accesses, FlashAttention Theta(N^2 d^2 / M).";
  if (t.theorem_applies)
    std::snprintf(buf, sizeof buf,
                  "%s Here M = %s floats <= min(Lq, Lk) x d = %s, inside its domain: Lq d + Lk d + Lq Lk = %s against "
                  "Lq Lk d^2 / M = %s, constants aside; these tiles use %s of M.",
                  head.c_str(), whole(t.sram_elements).c_str(), whole(t.theorem_nd).c_str(),
                  whole(t.paper_standard).c_str(), whole(t.paper_flash).c_str(),
                  kib_text(double(fa::smem_bytes(bm, bn, s.d))).c_str());
  else
    std::snprintf(buf, sizeof buf,
                  "%s Here M = %s floats but min(Lq, Lk) x d = %s: outside its domain (a tile of M / 4d = %s rows "
                  "would hold the whole sequence), so the bound is not evaluated; it would fall below reading Q, K "
                  "and V once (%s floats). The IO view draws it where it applies.",
                  head.c_str(), whole(t.sram_elements).c_str(), whole(t.theorem_nd).c_str(),
                  whole(std::floor(t.sram_elements / (4.0 * d))).c_str(), whole(lq * d + 2.0 * lk * d).c_str());
  t.paper_line = buf;
  return t;
}

// [SECTION] The IO view ---------------------------------------------------------------------------------------

namespace {

// The largest power-of-two square tile whose teaching budget fits `m_floats` (0 when not even 1 x 1 does).
int tile_for(double m_floats, int d) {
  int best = 0;
  for (int t = 1; t <= (1 << 20); t *= 2)
    if (double(fa::smem_bytes(t, t, d)) <= 4.0 * m_floats) best = t;
  return best;
}

// The kernel the default on an H100/H200 takes at this shape with head dim d (fa::fast_kernel_for).
fa::FastPath default_kernel(const attention::Shape& s, bool causal, int d) {
  fa::FastParams p;
  p.Lq = int(s.lq), p.Lk = int(s.lk), p.d = d, p.causal = causal;
  return fa::fast_kernel_for(fa::FastPath::WgmmaByShape, p);
}

}  // namespace

IoView io_view(Backend b, const attention::Shape& s, bool causal, int bm, int bn) {
  const DeviceInfo info = device_info(b);
  const int d = s.d;
  const int64_t wall = attention::max_lk(d, info.smem_per_block_optin);
  IoView v;
  v.unfused_kib = attention::traffic_bytes_unfused(s) / 1024.0;
  v.smem_kib = s.lk <= wall ? attention::traffic_bytes_smem(s) / 1024.0 : std::nan("");
  for (int m = fa::kMinBlock; m <= fa::kMaxBlock; m *= 2) {
    v.block_m.push_back(m);
    v.flash_by_bm_kib.push_back(traffic_bytes_flash(s, causal, m, bn) / 1024.0);
    v.block_m_fits_all = v.block_m_fits_all && fa::smem_bytes(m, bn, d) <= info.smem_per_block_optin;
  }
  const double device_m = double(info.smem_per_block_optin) / 4.0;
  const double nd = double(std::min(s.lq, s.lk)) * d;
  v.device_m_kib = device_m * 4.0 / 1024.0;
  v.domain_end_kib = nd * 4.0 / 1024.0;
  v.device_tile = tile_for(device_m, d);
  v.device_bc = std::floor(device_m / (4.0 * d));
  v.full_tile_kib = 0;
  for (int k = 8; k <= 18; ++k) {  // M = 256 .. 262144 floats (1 KiB .. 1 MiB)
    const double m = double(int64_t(1) << k);
    const int t = tile_for(m, d);
    v.m_kib.push_back(m * 4.0 / 1024.0);
    v.m_tile.push_back(t);
    v.m_flash_kib.push_back(t > 0 ? traffic_bytes_flash(s, causal, t, t) / 1024.0 : std::nan(""));
    v.m_smem_kib.push_back(double(attention::smem_bytes(s.lk, d)) <= 4.0 * m ? attention::traffic_bytes_smem(s) / 1024.0
                                                                                : std::nan(""));
    v.m_theorem_kib.push_back(m <= nd ? 4.0 * double(s.bh()) * double(s.lq) * double(s.lk) * d * d / m / 1024.0
                                      : std::nan(""));
    if (v.full_tile_kib == 0 && t >= s.lq) v.full_tile_kib = m * 4.0 / 1024.0;
  }
  char buf[900];
  const double first = v.flash_by_bm_kib.front(), last = v.flash_by_bm_kib.back();
  std::snprintf(buf, sizeof buf,
                "Rung 5 reads Q and writes O once, and reads K and V once per query block, ceil(Lq / BLOCK_M) times "
                "(BLOCK_N = %d): %s at BLOCK_M = %d, %s at BLOCK_M = %d. Rung 4 is rung 5 at BLOCK_M = 16 (its "
                "16-row programs): %s. Standard attention: %s whatever the tile.",
                bn, kib_text(first * 1024.0).c_str(), int(v.block_m.front()), kib_text(last * 1024.0).c_str(),
                int(v.block_m.back()),
                std::isfinite(v.smem_kib) ? kib_text(v.smem_kib * 1024.0).c_str() : "refused here, past its wall",
                kib_text(v.unfused_kib * 1024.0).c_str());
  v.caption_bm = buf;
  std::string full = v.full_tile_kib > 0
                         ? "it stops falling from M = " + kib_text(v.full_tile_kib * 1024.0) +
                               ", where one tile holds all " + std::to_string(s.lq) + " queries"
                         : "it is still falling at 1024 KiB";
  std::string cap;
  if (fa::fast_head_dim(d)) {
    const fa::FastPath k = default_kernel(s, causal, d);  // the H100/H200 default at this shape
    const fa::FastTileShape ft = fa::fast_tile_shape(d, k);
    cap = "; on a GPU registers cap the tile first (the fast kernel, " + std::string(fa::fast_path_name(k)) +
          " here, keeps " + std::to_string(ft.block_m) + " x " + std::to_string(ft.block_n) + " at d = " +
          std::to_string(d) + ", its accumulators in registers)";
  }
  std::snprintf(buf, sizeof buf,
                "At each M (shared memory per block) the largest square tile B x B that fits, about B_c = M / 4d, "
                "and its counted bytes: traffic falls as M grows; %s. Theorem 2's Lq Lk d^2 / M (x 4 B, constants "
                "aside) is drawn only where it applies, M <= min(Lq, Lk) d = %s. This device: M = %s, B_c = %s, "
                "B = %d%s.",
                full.c_str(), kib_text(v.domain_end_kib * 1024.0).c_str(), kib_text(v.device_m_kib * 1024.0).c_str(),
                whole(v.device_bc).c_str(), v.device_tile, cap.c_str());
  v.caption_m = buf;
  return v;
}

// [SECTION] The shared-memory budget --------------------------------------------------------------------------

namespace {

Budget teaching_budget(std::string label, int bm, int bn, int d, int64_t limit) {
  const int64_t f = 4, m = bm, n = bn, dd = d;
  Budget b;
  b.label = std::move(label);
  b.parts = {{"Q", f * m * dd}, {"K", f * n * dd}, {"V", f * n * dd}, {"S/P", f * m * n}, {"O", f * m * dd},
             {"m, l, alpha", f * 3 * m}};
  for (const BudgetPart& p : b.parts) b.total += p.bytes;
  b.limit = limit;
  b.fits = b.total <= limit;
  return b;
}

std::string tile_text(int bm, int bn) { return std::to_string(bm) + " x " + std::to_string(bn); }

// A fast kernel's layout (flash_attention_fast_sm90.cuh, launch_tma and launch_persistent): q_tiles Q tiles,
// kStages K tiles, kStages V tiles, o_tiles O tiles (2-byte elements, rows of d), then 1 KiB of alignment slack
// and 8-byte mbarriers (TmaBarriers: 4 kStages + 2 q_tiles; the one-block-per-tile kernel has no empty_q: one
// fewer).
// `kernel` with the tiles it takes at head dim tiles_d (d, or 128 for the tiles d = 128 takes).
Budget fast_budget(fa::FastPath kernel, int tiles_d, int d, int64_t limit, const std::string& why) {
  const fa::FastTileShape t = fa::fast_tile_shape(tiles_d, kernel);
  const int64_t s = t.stages, q = t.q_tiles, barriers = fa::fast_path_persistent(kernel) ? 4 * s + 2 * q : 4 * s + 1;
  Budget b;
  b.label = std::string("fast ") + fa::fast_path_name(kernel) + " " + tile_text(t.block_m, t.block_n) + ", " +
            std::to_string(s) + " stages" + (q > 1 ? ", " + std::to_string(q) + " Q tiles" : "") + " (" + why + ")";
  const std::string x = " x " + std::to_string(s);
  b.parts = {{q > 1 ? "Q x " + std::to_string(q) : "Q", q * t.block_m * d * 2},
             {"K" + x, s * t.block_n * d * 2},
             {"V" + x, s * t.block_n * d * 2}};
  if (t.o_tiles > 0) b.parts.push_back({"O", t.o_tiles * t.block_m * d * 2});
  b.parts.push_back({"align, mbarriers", 1024 + 8 * barriers});
  for (const BudgetPart& p : b.parts) b.total += p.bytes;
  b.limit = limit;
  b.fits = b.total <= limit;
  return b;
}

}  // namespace

std::vector<Budget> budgets(const attention::Shape& s, bool causal, int block_m, int block_n, int64_t limit) {
  const int d = int(s.d);
  std::vector<Budget> v;
  v.push_back(teaching_budget("teaching " + tile_text(block_m, block_n) + " (this tile)", block_m, block_n, d, limit));
  if (d == 256) {
    const auto [dm, dn] = fa::default_tiles(128);
    v.push_back(teaching_budget("teaching " + tile_text(dm, dn) + " (the default up to d=128)", dm, dn, d, limit));
  }
  if (fa::fast_head_dim(d)) {
    v.push_back(fast_budget(default_kernel(s, causal, d), d, d, limit, "the H100/H200 default at this shape"));
    if (d == 256) v.push_back(fast_budget(default_kernel(s, causal, 128), 128, d, limit, "the default's tiles at d=128"));
  }
  return v;
}

std::string budget_caption(const attention::Shape& s, bool causal, int64_t limit) {
  char buf[800];
  if (s.d != 256) {
    const int d = int(s.d);
    const bool o_staged = fa::fast_head_dim(d) && fa::fast_tile_shape(d, default_kernel(s, causal, d)).o_tiles > 0;
    std::snprintf(buf, sizeof buf, "Shared memory per block, by part, against the limit of %s.%s Try d=256: the "
                  "tiles d=128 uses no longer fit.", kib_text(double(limit)).c_str(),
                  o_staged ? " O: the fast kernel writes its output tile here first, so that one thread's bulk "
                             "copies (TMA) store it while the next tile's products run." : "");
    return buf;
  }
  const auto [dm, dn] = fa::default_tiles(128);
  const auto [sm, sn] = fa::default_tiles(256);
  const fa::FastPath k256 = default_kernel(s, causal, 256), k128 = default_kernel(s, causal, 128);
  const fa::FastTileShape t = fa::fast_tile_shape(256, k256), t128 = fa::fast_tile_shape(128, k128);
  const Budget teach = teaching_budget("", dm, dn, 256, limit);
  const Budget fast128 = fast_budget(k128, 128, 256, limit, ""), fast = fast_budget(k256, 256, 256, limit, "");
  auto tiles = [](const fa::FastTileShape& x) {
    return tile_text(x.block_m, x.block_n) + " in " + std::to_string(x.stages) + " stages with " +
           (x.q_tiles > 1 ? std::to_string(x.q_tiles) + " Q tiles" : "one Q tile");
  };
  std::snprintf(buf, sizeof buf,
                "At d=256 every row of Q, K, V and O is twice as long as at d=128, so the tiles d=128 uses do not "
                "fit the limit of %s: teaching %s needs %s (`run` takes %s here when no tile is given), and the fast "
                "kernel d=128 takes at this shape (%s, %s) needs %s; so at d=256 the default here (%s) keeps %s (%s).",
                kib_text(double(limit)).c_str(), tile_text(dm, dn).c_str(), kib_text(double(teach.total)).c_str(),
                tile_text(sm, sn).c_str(), fa::fast_path_name(k128), tiles(t128).c_str(),
                kib_text(double(fast128.total)).c_str(), fa::fast_path_name(k256), tiles(t).c_str(),
                kib_text(double(fast.total)).c_str());
  return buf;
}

// [SECTION] Settings and the run -----------------------------------------------------------------------------

namespace {

void converge(Result& r) {
  const int64_t lq = r.shape.lq;
  const int d = r.shape.d;
  r.converge.assign(size_t(r.steps), 0.0);
  double den = 0;
  for (int rr = 0; rr < r.bm; ++rr) {
    const int64_t i = r.qblock * r.bm + rr;
    if (i >= lq) break;
    for (int c = 0; c < d; ++c) den += double(r.hout[size_t(i * d + c)]) * r.hout[size_t(i * d + c)];
  }
  for (int64_t t = 0; t < r.steps; ++t) {
    double num = 0;
    for (int rr = 0; rr < r.bm; ++rr) {
      const int64_t i = r.qblock * r.bm + rr;
      if (i >= lq) break;
      const float l = r.hl[size_t(i * r.steps + t)];
      for (int c = 0; c < d; ++c) {
        const double o = l > 0 ? double(r.partial_o[size_t((t * r.bm + rr) * d + c)]) / l : 0.0;
        num += (o - r.hout[size_t(i * d + c)]) * (o - r.hout[size_t(i * d + c)]);
      }
    }
    r.converge[size_t(t)] = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }
}

// The chosen block's O_t / l_t against R_t, the float64 softmax over the keys of the first t tiles: per
// row an online softmax in float64 (a running max, so no key underflows against a later, larger one).
void step_errors(Result& r) {
  const int64_t lq = r.shape.lq, lk = r.shape.lk;
  const int d = r.shape.d;
  const double scale = r.opt.resolved_scale(d);
  std::vector<double> num(size_t(r.steps), 0.0), den(size_t(r.steps), 0.0), acc(static_cast<size_t>(d), 0.0);
  for (int rr = 0; rr < r.bm; ++rr) {
    const int64_t i = r.qblock * r.bm + rr;
    if (i >= lq) break;
    const int64_t vis = attention::visible_keys(i, lq, lk, r.opt.causal);
    double m = -INFINITY, l = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t t = 0; t < r.steps; ++t) {
      for (int64_t j = t * r.bn; j < std::min((t + 1) * r.bn, vis); ++j) {
        double sc = 0;
        for (int c = 0; c < d; ++c) sc += double(r.in.hq[size_t(i * d + c)]) * r.in.hk[size_t(j * d + c)];
        sc *= scale;
        const double m_new = std::max(m, sc), a = std::exp(m - m_new), p = std::exp(sc - m_new);
        l = a * l + p;
        for (int c = 0; c < d; ++c) acc[size_t(c)] = a * acc[size_t(c)] + p * r.in.hv[size_t(j * d + c)];
        m = m_new;
      }
      const float lt = r.hl[size_t(i * r.steps + t)];
      for (int c = 0; c < d; ++c) {
        const double want = l > 0 ? acc[size_t(c)] / l : 0.0;
        const double got = lt > 0 ? double(r.partial_o[size_t((t * r.bm + rr) * d + c)]) / lt : 0.0;
        num[size_t(t)] += (got - want) * (got - want);
        den[size_t(t)] += want * want;
      }
    }
  }
  r.step_error.resize(size_t(r.steps));
  for (int64_t t = 0; t < r.steps; ++t)
    r.step_error[size_t(t)] = den[size_t(t)] > 0 ? std::sqrt(num[size_t(t)] / den[size_t(t)]) : std::sqrt(num[size_t(t)]);
}

// "rows 0..24, 30, 41..47" (at most six runs, then "and N more rows").
std::string rows_text(const std::vector<int64_t>& rows) {
  std::string t;
  size_t i = 0, runs = 0;
  for (; i < rows.size() && runs < 6; ++runs) {
    size_t j = i;
    while (j + 1 < rows.size() && rows[j + 1] == rows[j] + 1) ++j;
    t += (runs ? ", " : "") + std::to_string(rows[i]) + (j > i ? ".." + std::to_string(rows[j]) : "");
    i = j + 1;
  }
  if (i < rows.size()) t += " and " + std::to_string(rows.size() - i) + " more";
  return (rows.size() == 1 ? "row " : "rows ") + t;
}

void check(Backend b, Result& r) {
  const int64_t lq = r.shape.lq, lk = r.shape.lk;
  const int d = r.shape.d;
  std::vector<double> ref(size_t(lq * d));
  attention::reference(r.in.hq.data(), r.in.hk.data(), r.in.hv.data(), r.shape, r.opt, ref.data());
  double num = 0, den = 0;
  r.nans = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    r.nans += std::isnan(r.hout[i]) ? 1 : 0;
    num += (r.hout[i] - ref[i]) * (r.hout[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  r.err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  // The rows that differ: a row whose error is past 1e-4 of a typical row's size (or NaN).
  const double typical = std::sqrt(den / double(lq));
  r.wrong_rows.clear();
  for (int64_t i = 0; i < lq; ++i) {
    double e = 0;
    for (int c = 0; c < d; ++c) {
      const double x = double(r.hout[size_t(i * d + c)]) - ref[size_t(i * d + c)];
      e += x * x;
    }
    if (!(std::sqrt(e) <= 1e-4 * std::max(typical, 1e-30))) r.wrong_rows.push_back(i);
  }
  r.check.label = "final output against the float64 reference:";
  r.check.ok = r.nans == 0 && r.err < 2e-5 && r.wrong_rows.empty();
  char buf[400];
  if (r.nans) std::snprintf(buf, sizeof buf, "no: %" PRId64 " values never written (NaN)", r.nans);
  else if (r.check.ok) std::snprintf(buf, sizeof buf, "yes, relative error %.1e (float32 rounding)", r.err);
  else
    std::snprintf(buf, sizeof buf, "no, relative error %.1e; %s of %" PRId64 " differ", r.err,
                  rows_text(r.wrong_rows).c_str(), lq);
  r.check.text = buf;

  // Rung 4 on the same inputs, where its wall lets it run.
  r.rung4.label = "against rung 4's output:";
  try {
    attention::check_shape(b, r.shape);
    Buffer<float> o4(b, r.in.hq.size());
    o4.fill_bytes(0xFF);
    attention::run(b, r.in.q.data(), r.in.k.data(), r.in.v.data(), o4.data(), r.shape, r.opt);
    const std::vector<float> h4 = o4.to_host();
    double mx = 0;
    for (size_t i = 0; i < h4.size(); ++i) mx = std::max(mx, double(std::fabs(h4[i] - r.hout[i])));
    r.rung4_ran = true;
    r.rung4_diff = mx;
    r.rung4.ok = std::isfinite(mx) && mx < 1e-5;
    std::snprintf(buf, sizeof buf, "max abs difference %.1e (%s)", mx,
                  r.rung4.ok ? "float32 rounding: the same softmax, summed in another order"
                             : "past float32 rounding: not the same attention");
  } catch (const InputError&) {
    r.rung4.ok = true;
    if (!attention::supported_head_dim(d))
      std::snprintf(buf, sizeof buf, "rung 4 is refused here (it takes d in %s, not %d); this rung runs",
                    attention::head_dims_text(), d);
    else
      std::snprintf(buf, sizeof buf, "rung 4 is refused here (Lk=%" PRId64 " is past its wall of %" PRId64
                    " at d=%d); this rung runs", lk, r.wall, d);
  }
  r.rung4.text = buf;
}

// The shape, the tiles and their counts from the parameters, and the wall at this head dimension.
void read_shape(Backend b, const ParamValues& p, Result& r) {
  r.shape.lq = p.get_int("lq");
  r.shape.lk = p.get_int("lk");
  r.shape.d = int(p.get_int("d"));
  r.opt.causal = p.get_bool("causal");
  r.bm = int(p.get_int("block_m"));
  r.bn = int(p.get_int("block_n"));
  fa::check_tiles(b, r.bm, r.bn, r.shape.d);
  r.limit = device_info(b).smem_per_block_optin;
  r.wall = attention::max_lk(r.shape.d, r.limit);
  const int64_t lq = r.shape.lq, lk = r.shape.lk;
  r.q_blocks = (lq + r.bm - 1) / r.bm;
  r.steps = (lk + r.bn - 1) / r.bn;
  // A chosen block or step outside the shape is moved inside it, and the note says so.
  r.qblock = p.get_int("qblock");
  r.step = p.get_int("step");
  if (r.qblock >= r.q_blocks) {
    r.qblock = r.q_blocks - 1;
    r.adjust_note = "qblock moved to " + std::to_string(r.qblock) + ", the last query block of this shape. ";
  }
  if (r.step > r.steps) {
    r.step = r.steps;
    r.adjust_note += "step moved to " + std::to_string(r.steps) + ", the last step of this shape.";
  }
}

// The teaching kernel (or the edited one, `src`) on fresh inputs into a poisoned output, the chosen block traced;
// the trace and the output are read back.
void run_traced(Backend b, const ParamValues& p, const editable::Source* src, Result& r) {
  const int64_t lq = r.shape.lq, lk = r.shape.lk;
  const int d = r.shape.d;
  r.in.make(b, lq, lk, d, float(p.get_float("magnitude")), uint32_t(p.get_int("seed")));
  r.out.resize(b, r.in.hq.size());
  r.out.fill_bytes(0xFF);  // poison
  r.trace.reset(b, r.shape, r.bm, r.bn, 0, r.qblock);
  fa::FlashTraceView tv = r.trace.view();
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("flash-attention");
  r.fault = fa::run_teaching(b, r.in.q.data(), r.in.k.data(), r.in.v.data(), r.out.data(), r.shape, r.opt, r.bm,
                             r.bn, &tv, src);
  if (r.fault.kind != editable::Fault::None) r.fault_line = "edited kernel: " + r.fault.text();
  mem::synchronize(b);

  r.hm = r.trace.m_after.to_host();
  r.hm_before = r.trace.m_before.to_host();
  r.hl = r.trace.l_after.to_host();
  r.halpha = r.trace.alpha.to_host();
  r.hstate = r.trace.tile_state.to_host();
  r.hout = r.out.to_host();
  r.partial_o = r.trace.o_partial.to_host();
}

// Colour scales: the final weights of the chosen block (composed from the trace) and the output.
void colour_scales(Backend b, Result& r) {
  Buffer<float> w(b, size_t(r.bm * r.shape.lk * 2));
  compose(b, r, r.steps, w.data());
  const std::vector<float> hw = w.to_host();
  r.wmax = 0;
  for (size_t c = 0; c < hw.size(); c += 2) r.wmax = std::max(r.wmax, double(hw[c]));
  r.omax = 1e-6;
  for (float x : r.hout) r.omax = std::max(r.omax, double(std::fabs(x)));
}

// The panel's notice line: the check where it failed, else what rung 5 reads against standard attention.
std::string notice_text(const Result& r) {
  const int64_t lq = r.shape.lq;
  char buf[600];
  if (!r.check.ok)
    std::snprintf(buf, sizeof buf, "the output does not match the float64 reference: %s", r.check.text.c_str());
  else if (r.q_blocks == 1)
    std::snprintf(buf, sizeof buf, "Rung 5 reads K and V once (one query block of BLOCK_M = %d holds all %" PRId64
                  " queries): %s here against standard attention's %s", r.bm, lq,
                  kib_text(r.mem.flash).c_str(), kib_text(r.mem.unfused).c_str());
  else if (r.mem.flash > r.mem.unfused)  // few queries, wide rows: the re-reads of K and V outweigh S and P
    std::snprintf(buf, sizeof buf, "Rung 5 reads K and V once per %d-row query block (%" PRId64 " times): %s here, "
                  "more than standard attention's %s: at Lq = %" PRId64 " and d = %d, S and P (Lq x Lk) cost less than "
                  "reading K and V (Lk x d each) %" PRId64 " times; raise BLOCK_M to read them fewer times",
                  r.bm, r.q_blocks, kib_text(r.mem.flash).c_str(), kib_text(r.mem.unfused).c_str(), lq, r.shape.d,
                  r.q_blocks);
  else
    std::snprintf(buf, sizeof buf, "Rung 5 reads K and V once per %d-row query block (%" PRId64 " times): %s here "
                  "against standard attention's %s; raise BLOCK_M to save more", r.bm, r.q_blocks,
                  kib_text(r.mem.flash).c_str(), kib_text(r.mem.unfused).c_str());
  return buf;
}

}  // namespace

Result run(Backend b, const ParamValues& p) {
  const std::optional<editable::Source> e = editable::edited("flash-attention");
  return run(b, p, e ? &*e : nullptr);
}

Result run(Backend b, const ParamValues& p, const editable::Source* src) {
  Result r;
  read_shape(b, p, r);
  run_traced(b, p, src, r);
  converge(r);
  step_errors(r);
  check(b, r);
  // An edited kernel that misbehaved fails the check whatever it stored, and says what it did first.
  if (r.fault.kind != editable::Fault::None) {
    r.check.ok = false;
    r.check.text = r.fault_line + "; " + r.check.text;
  }
  colour_scales(b, r);
  r.mem = traffic(b, r.shape, r.opt.causal, r.bm, r.bn);
  r.io = io_view(b, r.shape, r.opt.causal, r.bm, r.bn);
  r.budget = budgets(r.shape, r.opt.causal, r.bm, r.bn, r.limit);
  r.budget_caption = budget_caption(r.shape, r.opt.causal, r.limit);
  r.notice = notice_text(r);
  return r;
}

void compose(Backend b, Result& r, int64_t step, float* dst) {
  const fa::FlashTraceView tv = r.trace.view();
  fa::compose_weights(b, tv, r.shape.lq, r.shape.lk, step, dst, 2);
}

std::vector<float> partial_output(const Result& r, int64_t step) {
  require_range("step", step, 1, r.steps);
  const int d = r.shape.d;
  std::vector<float> o(size_t(r.bm * d), 0.0f);
  for (int rr = 0; rr < r.bm; ++rr) {
    const int64_t i = r.qblock * r.bm + rr;
    if (i >= r.shape.lq) break;
    const float l = r.hl[size_t(i * r.steps + step - 1)];
    for (int c = 0; c < d; ++c)
      o[size_t(rr * d + c)] = l > 0 ? r.partial_o[size_t(((step - 1) * r.bm + rr) * d + c)] / l : 0.0f;
  }
  return o;
}

// [SECTION] One step of the chosen block ----------------------------------------------------------------------

StepView step_view(const Result& r, int64_t step) {
  require_range("step", step, 1, r.steps);
  StepView v;
  v.step = step;
  v.row0 = r.qblock * r.bm;
  v.rows = int(std::min<int64_t>(r.bm, r.shape.lq - v.row0));
  for (int rr = 0; rr < v.rows; ++rr) {
    const size_t c = size_t((v.row0 + rr) * r.steps + step - 1);
    const float m0 = r.hm_before[c], m1 = r.hm[c];
    const bool mv = m1 > m0;  // -inf -> finite counts: the first key the row sees
    v.m.push_back(m1);
    v.l.push_back(r.hl[c]);
    v.alpha.push_back(r.halpha[c]);
    v.moved.push_back(mv);
    v.moved_count += mv ? 1 : 0;
    v.first_count += (mv && m0 == -INFINITY) ? 1 : 0;
  }
  v.tile = step - 1;
  const int64_t k0 = v.tile * r.bn, k1 = std::min(step * r.bn, r.shape.lk) - 1;
  char buf[600];
  std::snprintf(buf, sizeof buf, "step %" PRId64 " of %" PRId64 ": K/V tile %" PRId64 ", keys %" PRId64 "..%" PRId64,
                step, r.steps, v.tile, k0, k1);
  v.stepper_text = buf;
  const std::string tiles = step == 1 ? "K/V tile 0" : "K/V tiles 0.." + std::to_string(v.tile);
  std::snprintf(buf, sizeof buf, "Query block %" PRId64 " (rows %" PRId64 "..%" PRId64 ") after step %" PRId64
                " of %" PRId64 " (%s folded in)",
                r.qblock, v.row0, v.row0 + v.rows - 1, step, r.steps, tiles.c_str());
  v.title = buf;
  if (step < r.steps)
    std::snprintf(buf, sizeof buf, "O_t / l_t after step %" PRId64 " is attention over keys 0..%" PRId64 " exactly "
                  "(%.2g from float64 over those keys); it is %.2g from the final output (relative) because keys "
                  "%" PRId64 "..%" PRId64 " are not folded in yet, not because it is approximate",
                  step, k1, r.step_error[size_t(step - 1)], r.converge[size_t(step - 1)], k1 + 1, r.shape.lk - 1);
  else
    std::snprintf(buf, sizeof buf, "O_t / l_t after the last step is the output: attention over all %" PRId64
                  " keys (%.2g from float64)", r.shape.lk, r.step_error[size_t(step - 1)]);
  v.partial_line = buf;
  const int later = v.moved_count - v.first_count;
  std::string c;
  std::snprintf(buf, sizeof buf, "bars: rows %" PRId64 "..%" PRId64 " left to right; amber: the %d row%s whose running max "
                "moved at this step", v.row0, v.row0 + v.rows - 1, v.moved_count, plural(v.moved_count));
  c = buf;
  if (v.first_count == v.rows && v.rows > 0) {
    c += ". This is each row's first tile: m_old = -inf, so every max moves and alpha = exp(-inf) = 0; l and O "
         "held nothing yet, and after this step they hold this tile alone";
  } else {
    if (later > 0) {
      std::snprintf(buf, sizeof buf, "; %d of them had seen keys before, so %s l and O were rescaled by "
                    "alpha = exp(m_old - m_new) < 1", later, later == 1 ? "its" : "their");
      c += buf;
    }
    if (v.first_count > 0) {
      std::snprintf(buf, sizeof buf, "; %d saw their first key here (m_old = -inf, alpha = exp(-inf) = 0: nothing "
                    "to rescale)", v.first_count);
      c += buf;
    }
    if (v.moved_count < v.rows) c += "; blue rows kept their max (alpha = 1)";
  }
  v.caption = c;
  return v;
}

study::Report report(const Result& r, int64_t step) {
  study::Report rep;
  rep.panel = "flash-attention";
  rep.notice = r.notice;
  rep.settings = r.shape.text() + (r.opt.causal ? " causal" : "") + " block_m=" + std::to_string(r.bm) +
                 " block_n=" + std::to_string(r.bn) + " qblock=" + std::to_string(r.qblock) +
                 " step=" + std::to_string(step);
  rep.checks.push_back({"matches_reference", r.check.ok, r.check.sentence()});
  rep.checks.push_back({"matches_rung4", r.rung4.ok, r.rung4.sentence()});
  if (!r.adjust_note.empty()) rep.lines.push_back(r.adjust_note);
  if (r.edited) {
    rep.lines.push_back("kernel: " + r.source_file + " (edited)");
    if (!r.fault_line.empty()) rep.lines.push_back(r.fault_line);
  }
  const StepView v = step_view(r, step);
  rep.lines.push_back(v.stepper_text);
  rep.lines.push_back(v.title);
  rep.lines.push_back(v.caption);
  char buf[200];
  for (int i = 0; i < v.rows; ++i) {
    std::snprintf(buf, sizeof buf, "  row %" PRId64 ": m = %.6g, l = %.6g, alpha = %.6g%s", v.row0 + i, v.m[size_t(i)],
                  v.l[size_t(i)], v.alpha[size_t(i)], v.moved[size_t(i)] ? " (max moved)" : "");
    rep.lines.push_back(buf);
  }
  rep.lines.push_back(v.partial_line);
  std::snprintf(buf, sizeof buf, "against float64 over the keys seen: |O_t/l_t - R_t| / |R_t| = %.3g after step %"
                PRId64 ", %.3g after the first, %.3g after the last", r.step_error[size_t(step - 1)], step,
                r.step_error.front(), r.step_error.back());
  rep.lines.push_back(buf);
  rep.lines.push_back(r.mem.caption);
  rep.lines.push_back(r.mem.paper_line);
  rep.lines.push_back(r.io.caption_bm);
  rep.lines.push_back(r.io.caption_m);
  auto& n = rep.numbers;
  n["relative_error"] = r.err;
  n["nan_count"] = r.nans;
  if (r.rung4_ran) n["rung4_max_abs_diff"] = r.rung4_diff;
  n["steps"] = r.steps;
  n["q_blocks"] = r.q_blocks;
  n["smem_bytes_rung5"] = fa::smem_bytes(r.bm, r.bn, r.shape.d);
  n["smem_bytes_rung4"] = attention::smem_bytes(r.shape.lk, r.shape.d);
  n["smem_limit"] = r.limit;
  n["wall_lk"] = r.wall;
  n["moved_rows"] = v.moved_count;
  n["first_tile_rows"] = v.first_count;
  n["m"] = v.m;
  n["l"] = v.l;
  n["alpha"] = v.alpha;
  n["converge"] = r.converge;
  n["step_error"] = r.step_error;
  n["wrong_rows"] = int64_t(r.wrong_rows.size());
  if (!r.wrong_rows.empty()) {
    n["first_wrong_row"] = r.wrong_rows.front();
    n["last_wrong_row"] = r.wrong_rows.back();
  }
  if (r.edited) n["fault"] = r.fault.kind == editable::Fault::None ? 0 : 1;
  n["traffic_bytes_unfused"] = r.mem.unfused;
  n["traffic_bytes_rung4"] = r.mem.smem;
  n["traffic_bytes_rung5"] = r.mem.flash;
  n["paper_standard_elements"] = r.mem.paper_standard;
  n["theorem_2_applies"] = r.mem.theorem_applies;
  if (r.mem.theorem_applies) n["paper_flash_elements"] = r.mem.paper_flash;
  n["long_lk_ratio"] = r.mem.long_lk_ratio;
  rep.lines.push_back(r.budget_caption);
  for (size_t i = 0; i < r.budget.size(); ++i) {
    const Budget& bu = r.budget[i];
    rep.lines.push_back("budget: " + bu.label + ": " + std::to_string(bu.total) + " bytes of " +
                        std::to_string(bu.limit) + (bu.fits ? " (fits)" : " (does not fit)"));
    n["budget_bytes_" + std::to_string(i)] = bu.total;
  }
  return rep;
}

study::Entry entry() {
  study::Entry e;
  e.panel = "flash-attention";
  e.summary = "rung 5: online-softmax state per step, checks, shared memory and device-memory traffic";
  e.params = [] { return params(); };
  e.run = [](Backend b, const ParamValues& p) {
    Result r = run(b, p);
    return report(r, r.step);
  };
  return e;
}

}  // namespace kl::flash_attention_study
