#include "kernels/studies/attention_study.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/runtime/errors.h"
#include "kernels/studies/kernel_resources.h"

namespace kl::attention_study {
namespace {

std::string kib(int64_t bytes) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f KiB", double(bytes) / 1024.0);
  return b;
}

double rel(double num, double den) { return den > 0 ? std::sqrt(num / den) : std::sqrt(num); }

}  // namespace

// [SECTION] Inputs ---------------------------------------------------------------------------------------

void Inputs::make(Backend b, int64_t lq, int64_t lk, int d, float magnitude, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uq(-magnitude, magnitude), uv(-1.0f, 1.0f);
  hq.resize(size_t(lq * d));
  hk.resize(size_t(lk * d));
  hv.resize(size_t(lk * d));
  for (float& x : hq) x = uq(rng);
  for (float& x : hk) x = uq(rng);
  for (float& x : hv) x = uv(rng);
  q.resize(b, hq.size());
  k.resize(b, hk.size());
  v.resize(b, hv.size());
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
}

// The shape (lq, lk, d) and the inputs (magnitude, seed) are the panel's own: no kernel of the rung
// takes them as a parameter (`run` reads the shape from the inputs' files). causal and scale are the
// kernel's specs as they are: the panel opens unmasked, as the kernel does; its first tour stop masks.
std::vector<ParamSpec> params() {
  return {int_param("lq", 1, 4096, 12, "Lq: number of queries"),
          int_param("lk", 1, 4096, 20, "Lk: number of keys (walk it past the wall)"),
          pow2_param("d", 16, 128, 32, "d: head dimension"),
          attention::param::causal(),
          attention::param::scale(),
          float_param("magnitude", 0.1, 10, 2.0, "q and k drawn uniformly from [-magnitude, magnitude]"),
          int_param("seed", 0, 1 << 30, 1, "seed of the random inputs")};
}

// [SECTION] The budget, the wall and the occupancy ---------------------------------------------------------

Occupancy occupancy(int64_t lk, int d, const DeviceInfo& info, int registers, const std::string& origin) {
  Occupancy o;
  o.registers = registers;
  o.registers_origin = origin;
  const int threads = attention::kWarps * 32;
  const int64_t need = attention::smem_bytes(lk, d);
  o.by_registers = study::blocks_by_registers(registers, threads, info);
  o.by_smem = need > info.smem_per_block_optin ? 0 : int(info.smem_per_sm / (need + kReservedSmemPerBlock));
  o.by_threads = info.max_threads_per_sm / threads;
  o.by_block_limit = info.max_blocks_per_sm;
  o.blocks = std::min({o.by_registers, o.by_smem, o.by_threads, o.by_block_limit});
  for (auto [n, name] : {std::pair<int, const char*>{o.by_registers, "registers"}, {o.by_smem, "shared memory"},
                         {o.by_threads, "threads"}, {o.by_block_limit, "the SM's block limit"}})
    if (n == o.blocks) o.binding += (o.binding.empty() ? "" : " and ") + std::string(name);
  return o;
}

int blocks_per_sm(int64_t lk, int d, const DeviceInfo& info, int registers) {
  return occupancy(lk, d, info, registers).blocks;
}

int64_t one_block_from_lk(int d, const DeviceInfo& info, int registers) {
  const int64_t wall = attention::max_lk(d, info.smem_per_block_optin);
  for (int64_t lk = 1; lk <= wall; ++lk)
    if (blocks_per_sm(lk, d, info, registers) == 1) return lk;
  return 0;
}

Budget budget(Backend b, int64_t lk, int d) {
  const DeviceInfo info = device_info(b);
  Budget g;
  g.lk = lk;
  g.d = d;
  g.limit = info.smem_per_block_optin;
  g.need = attention::smem_bytes(lk, d);
  g.wall = attention::max_lk(d, g.limit);
  g.past = g.need > g.limit;
  g.assumed = info.assumed;
  g.device = info.name;
  const study::KernelResources kr = study::kernel_resources(b, "attention.cu", "attention_smem");
  g.occ = occupancy(lk, d, info, kr.registers, kr.origin);
  g.blocks = g.occ.blocks;
  g.one_block_lk = one_block_from_lk(d, info, kr.registers);
  const int q = attention::kBlockQ;
  char t[700];
  std::snprintf(t, sizeof t, "%s needed of %s", kib(g.need).c_str(), kib(g.limit).c_str());
  g.bar_text = t;
  std::snprintf(t, sizeof t,
                "(2 x Lk x d + %d x d) x 4 B (all of K and V, the block's %d query rows) = "
                "(2 x %" PRId64 " x %d + %d x %d) x 4 = %" PRId64 " bytes",
                q, q, lk, d, q, d, g.need);
  g.formula_line = t;
  std::snprintf(t, sizeof t, "limit per block: %" PRId64 " bytes (%s)", g.limit,
                info.assumed ? "assumed: an H200's opt-in maximum, CPU backend" : info.name.c_str());
  g.limit_line = t;
  std::snprintf(t, sizeof t, "the wall at d=%d: Lk = %" PRId64 " is the largest that fits%s", d, g.wall,
                g.past ? " -- this Lk is past it" : "");
  g.wall_line = t;
  const Occupancy& o = g.occ;
  if (g.past)
    std::snprintf(t, sizeof t, "occupancy: none, the block does not fit (one block per SM from Lk = %" PRId64
                  " at d=%d, up to the wall)", g.one_block_lk, d);
  else
    std::snprintf(t, sizeof t,
                  "occupancy: %d block%s of 256 threads per SM, bound by %s. Registers allow %d (%d per thread: %s), "
                  "shared memory %d (%s + 1 KiB reserved per block, of %s per SM), threads %d (%d per SM); one "
                  "block per SM from Lk = %" PRId64 " at d=%d",
                  o.blocks, o.blocks == 1 ? "" : "s", o.binding.c_str(), o.by_registers, o.registers,
                  o.registers_origin.c_str(), o.by_smem, kib(g.need).c_str(), kib(info.smem_per_sm).c_str(),
                  o.by_threads, info.max_threads_per_sm, g.one_block_lk, d);
  g.occupancy_line = t;
  g.legend = "K+V+Q rows, d=" + std::to_string(d);
  return g;
}

// [SECTION] The run and its checks -------------------------------------------------------------------------

namespace {

void check_against_reference(Result& r) {
  const attention::Shape& s = r.shape;
  const int64_t lq = s.lq, lk = s.lk;
  std::vector<double> ref(size_t(lq * s.d)), refw(size_t(lq * lk));
  attention::reference(r.in.hq.data(), r.in.hk.data(), r.in.hv.data(), s, r.opt, ref.data(), refw.data());
  double num = 0, den = 0, wnum = 0, wden = 0;
  r.nans = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(r.hout[i])) ++r.nans;
    num += (r.hout[i] - ref[i]) * (r.hout[i] - ref[i]);
    den += ref[i] * ref[i];
    r.omax = std::max(r.omax, std::fabs(ref[i]));
  }
  for (size_t c = 0; c < refw.size(); ++c) {
    const double w = r.hw[c * 2];
    if (std::isnan(w)) ++r.nans;
    wnum += (w - refw[c]) * (w - refw[c]);
    wden += refw[c] * refw[c];
    r.pmax = std::max(r.pmax, refw[c]);
  }
  r.err = rel(num, den);
  r.werr = rel(wnum, wden);
  std::vector<double> vis;
  for (int64_t i = 0; i < lq; ++i)
    for (int64_t j = 0; j < attention::visible_keys(i, lq, lk, r.opt.causal); ++j) vis.push_back(refw[size_t(i * lk + j)]);
  double p99 = r.pmax;
  if (!vis.empty()) {
    const size_t k = std::min(vis.size() - 1, size_t(double(vis.size()) * 0.99));
    std::nth_element(vis.begin(), vis.begin() + std::ptrdiff_t(k), vis.end());
    p99 = vis[k];
  }
  if (p99 > 0 && p99 < 0.5 * r.pmax) {
    r.p_scale = p99;
    char b[160];
    std::snprintf(b, sizeof b, "colour top: the 99th percentile, %.2g; larger weights (up to %.2g) clipped", p99, r.pmax);
    r.p_scale_note = b;
    r.p_scale_label = "weight (p99 top)";
  } else {
    r.p_scale = r.pmax;
    r.p_scale_label = "weight";
  }
  r.check.label = "matches reference (float64):";
  r.check.ok = r.nans == 0 && r.err < 1e-5 && r.werr < 1e-5;
  char buf[200];
  if (r.nans)
    std::snprintf(buf, sizeof buf, "no: %" PRId64 " values never written (NaN)", r.nans);
  else
    std::snprintf(buf, sizeof buf, "%s, relative error %.1e (output), %.1e (weights)", r.check.ok ? "yes" : "no",
                  r.err, r.werr);
  r.check.text = buf;
}

// Row sums of the kernel's P; rows that see no key sum to 0.
void check_row_sums(Result& r) {
  const int64_t lq = r.shape.lq, lk = r.shape.lk;
  r.rowsum_worst = 0;
  r.empty_rows = 0;
  for (int64_t i = 0; i < lq; ++i) {
    double s = 0;
    for (int64_t j = 0; j < lk; ++j) s += r.hw[size_t(i * lk + j) * 2];
    if (attention::visible_keys(i, lq, lk, r.opt.causal) == 0) {
      ++r.empty_rows;
      r.rowsum_worst = std::max(r.rowsum_worst, std::fabs(s));
    } else {
      r.rowsum_worst = std::max(r.rowsum_worst, std::fabs(s - 1.0));
    }
  }
  r.rowsum.label = "row sums of the weights:";
  r.rowsum.ok = r.rowsum_worst < 1e-5;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s (max |sum - 1| = %.1e over %" PRId64 " rows)%s", r.rowsum.ok ? "1" : "not 1",
                r.rowsum_worst, lq - r.empty_rows, r.empty_rows ? "; rows that see no key are all 0 and sum to 0" : "");
  r.rowsum.text = buf;
  if (r.empty_rows) {
    std::snprintf(buf, sizeof buf, "; %" PRId64 " such rows", r.empty_rows);
    r.rowsum.text += buf;
  }
}

// The largest |score| over visible cells, for the colour scale.
void score_scale(Result& r) {
  const int64_t lq = r.shape.lq, lk = r.shape.lk;
  const int d = r.shape.d;
  const float scale = r.opt.resolved_scale(d);
  r.smax = 0;
  for (int64_t i = 0; i < lq; ++i)
    for (int64_t j = 0; j < attention::visible_keys(i, lq, lk, r.opt.causal); ++j) {
      double a = 0;
      for (int c = 0; c < d; ++c) a += double(r.in.hq[size_t(i * d + c)]) * r.in.hk[size_t(j * d + c)];
      r.smax = std::max(r.smax, std::fabs(a * scale));
    }
}

// Standard attention on the same inputs: S and P through device memory, then checked like rung 4.
void run_unfused(Backend b, Result& r) {
  const attention::Shape& s = r.shape;
  const size_t cells = size_t(s.lq * s.lk);
  Buffer<float> S(b, cells), P(b, cells), O(b, size_t(s.lq * s.d));
  for (Buffer<float>* x : {&S, &P, &O}) x->fill_bytes(0xFF);  // poison
  attention::run_unfused(b, r.in.q.data(), r.in.k.data(), r.in.v.data(), O.data(), S.data(), P.data(), s, r.opt);
  const std::vector<float> ho = O.to_host();
  std::vector<double> ref(ho.size());
  attention::reference(r.in.hq.data(), r.in.hk.data(), r.in.hv.data(), s, r.opt, ref.data());
  double num = 0, den = 0;
  r.unfused_nans = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    r.unfused_nans += std::isnan(ho[i]) ? 1 : 0;
    num += (ho[i] - ref[i]) * (ho[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  r.unfused_err = rel(num, den);
  r.unfused.label = "standard attention (--variant unfused):";
  r.unfused.ok = r.unfused_nans == 0 && r.unfused_err < 1e-5;
  char buf[300];
  if (r.unfused_nans)
    std::snprintf(buf, sizeof buf, "no: %" PRId64 " values never written (NaN)", r.unfused_nans);
  else
    std::snprintf(buf, sizeof buf,
                  "%s, relative error %.1e; it writes S and P to device memory and reads them back, rung 4 does not",
                  r.unfused.ok ? "matches" : "does not match", r.unfused_err);
  r.unfused.text = buf;
}

void traffic(Result& r) {
  r.traffic_smem = attention::traffic_bytes_smem(r.shape);
  r.traffic_unfused = attention::traffic_bytes_unfused(r.shape);
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "device memory traffic (one unit, KiB): standard attention %s (S and P: 4 x Lq x Lk x 4 B = %s of "
                "it), rung 4 %s",
                kib(int64_t(r.traffic_unfused)).c_str(), kib(16 * r.shape.lq * r.shape.lk).c_str(),
                kib(int64_t(r.traffic_smem)).c_str());
  r.traffic_line = buf;
}

void run_kernel(Backend b, Result& r, const Sinks& sinks, const editable::Source* src) {
  const attention::Shape& s = r.shape;
  const size_t cells = size_t(s.lq * s.lk), nout = size_t(s.lq * s.d);
  Buffer<float> own_s, own_w, own_o;
  attention::Extras x{sinks.scores, sinks.weights, 2};
  float* o = sinks.out;
  if (!x.scores) own_s.resize(b, cells * 2), x.scores = own_s.data();
  if (!x.weights) own_w.resize(b, cells * 2), x.weights = own_w.data();
  if (!o) own_o.resize(b, nout), o = own_o.data();
  mem::set(b, x.scores, 0xFF, cells * 2 * sizeof(float));  // poison
  mem::set(b, x.weights, 0xFF, cells * 2 * sizeof(float));
  mem::set(b, o, 0xFF, nout * sizeof(float));
  r.fault = attention::run(b, r.in.q.data(), r.in.k.data(), r.in.v.data(), o, s, r.opt, x, src);
  if (r.fault.kind != editable::Fault::None) r.fault_line = "edited kernel: " + r.fault.text();
  r.hout.resize(nout);
  r.hw.resize(cells * 2);
  mem::to_host(b, r.hout.data(), o, nout * sizeof(float));
  mem::to_host(b, r.hw.data(), x.weights, r.hw.size() * sizeof(float));
  if (!sinks.scores) {
    r.hs.resize(cells * 2);
    mem::to_host(b, r.hs.data(), x.scores, r.hs.size() * sizeof(float));
  }
}

}  // namespace

// An edited kernel that misbehaved fails the reference check whatever it wrote, and says what it did first.
void note_fault(Result& r) {
  if (r.fault.kind == editable::Fault::None) return;
  r.check.ok = false;
  r.check.text = r.fault_line + "; " + r.check.text;
}

Result run(Backend b, const ParamValues& p, const Sinks& sinks) {
  const std::optional<editable::Source> e = editable::edited("attention");
  return run(b, p, sinks, e ? &*e : nullptr);
}

static void notice(Result& r) {
  const Budget& g = r.budget;
  char t[600];
  if (!r.ran)
    std::snprintf(t, sizeof t, "Lk = %" PRId64 " needs %s of shared memory per block, past the %s limit: refused "
                  "before launch (the wall at d = %d is Lk = %" PRId64 "); rung 5 streams K and V in tiles",
                  g.lk, kib(g.need).c_str(), kib(g.limit).c_str(), g.d, g.wall);
  else if (!r.check.ok)
    std::snprintf(t, sizeof t, "the output does not match the float64 reference: %s", r.check.text.c_str());
  else
    std::snprintf(t, sizeof t, "all of K and V sit in shared memory: %s of the %s a block may have at Lk = %" PRId64
                  "; the wall at d = %d is Lk = %" PRId64 ". %d block%s per SM, bound by %s",
                  kib(g.need).c_str(), kib(g.limit).c_str(), g.lk, g.d, g.wall, g.blocks, g.blocks == 1 ? "" : "s",
                  g.occ.binding.c_str());
  r.notice = t;
}

Result run(Backend b, const ParamValues& p, const Sinks& sinks, const editable::Source* src) {
  Result r;
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("attention");
  r.shape.lq = p.get_int("lq");
  r.shape.lk = p.get_int("lk");
  r.shape.d = int(p.get_int("d"));
  r.opt.causal = p.get_bool("causal");
  r.opt.scale = p.get_float("scale");
  r.magnitude = float(p.get_float("magnitude"));
  r.budget = budget(b, r.shape.lk, r.shape.d);
  traffic(r);
  try {
    attention::check_shape(b, r.shape);  // the wall, before anything is allocated
  } catch (const InputError& e) {
    r.run_error = e.what();
    notice(r);
    return r;
  }
  r.in.make(b, r.shape.lq, r.shape.lk, r.shape.d, r.magnitude, uint32_t(p.get_int("seed")));
  run_kernel(b, r, sinks, src);
  r.ran = true;
  check_against_reference(r);
  note_fault(r);
  check_row_sums(r);
  score_scale(r);
  run_unfused(b, r);
  notice(r);
  return r;
}

study::Report report(const Result& r) {
  study::Report rep;
  rep.panel = "attention";
  rep.notice = r.notice;
  rep.settings = r.shape.text() + (r.opt.causal ? " causal" : "") + ", magnitude=" + std::to_string(r.magnitude);
  const Budget& g = r.budget;
  rep.checks.push_back({"fits_shared_memory", !g.past, g.wall_line});
  rep.lines = {g.bar_text, g.formula_line, g.limit_line, g.occupancy_line};
  if (!r.ran) {
    rep.lines.push_back(r.run_error);
  } else {
    rep.checks.push_back({"matches_reference", r.check.ok, r.check.sentence()});
    rep.checks.push_back({"row_sums", r.rowsum.ok, r.rowsum.sentence()});
    rep.checks.push_back({"unfused_matches_reference", r.unfused.ok, r.unfused.sentence()});
  }
  rep.lines.push_back(r.traffic_line);
  if (r.edited) {
    rep.lines.push_back("kernel: " + r.source_file + " (edited)");
    if (!r.fault_line.empty()) rep.lines.push_back(r.fault_line);
  }
  auto& n = rep.numbers;
  n["smem_bytes"] = g.need;
  n["smem_limit"] = g.limit;
  n["wall_lk"] = g.wall;
  n["blocks_per_sm"] = g.blocks;
  n["blocks_per_sm_by_registers"] = g.occ.by_registers;
  n["blocks_per_sm_by_smem"] = g.occ.by_smem;
  n["blocks_per_sm_by_threads"] = g.occ.by_threads;
  n["registers_per_thread"] = g.occ.registers;
  n["one_block_per_sm_from_lk"] = g.one_block_lk;
  n["traffic_bytes_smem"] = r.traffic_smem;
  n["traffic_bytes_unfused"] = r.traffic_unfused;
  if (r.ran) {
    n["relative_error_output"] = r.err;
    n["relative_error_weights"] = r.werr;
    n["nan_count"] = r.nans;
    n["row_sum_max_deviation"] = r.rowsum_worst;
    n["rows_seeing_no_key"] = r.empty_rows;
    n["unfused_relative_error"] = r.unfused_err;
  }
  if (r.edited) n["fault"] = r.fault.kind == editable::Fault::None ? 0 : 1;
  return rep;
}

study::Entry entry() {
  study::Entry e;
  e.panel = "attention";
  e.summary = "rung 4: output and weights against float64, the shared-memory wall, occupancy, traffic";
  e.params = [] { return params(); };
  e.run = [](Backend b, const ParamValues& p) { return report(run(b, p)); };
  return e;
}

}  // namespace kl::attention_study
