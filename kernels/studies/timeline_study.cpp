#include "kernels/studies/timeline_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "assets/embedded.h"
#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/runtime/errors.h"

namespace kl::timeline_study {

using timeline::Event;
using timeline::Interval;
using timeline::Lane;

const char* const kEmbeddedName = "perf/timeline-h200.json";
const char* const kSourcePath = "docs/perf/timeline-h200.json";

namespace {

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
std::string percent(double share) { return fixed(100.0 * share, 0) + "%"; }
std::string us(double ns) { return fixed(ns * 1e-3, 1) + " µs"; }

}  // namespace

// ---- [SECTION] the recordings -------------------------------------------------------------------------------
const timeline::File& embedded() {
  static const timeline::File f = [] {
    const std::string_view text = assets::find(kEmbeddedName);
    if (text.empty()) throw RuntimeError(std::string("embedded ") + kEmbeddedName + " is missing from this build");
    try {
      return timeline::parse(std::string(text), kSourcePath);
    } catch (const InputError& e) {
      throw RuntimeError(std::string("embedded recording: ") + e.what());
    }
  }();
  return f;
}

namespace {

// The backward's default path, wgmma-tma, in either dQ mode (deterministic: its dK/dV kernel, bulk-copy loads).
bool backward_default(const Recording& r) { return r.path == flash_attention_backward::kFastBackwardDefaultSm90; }
bool default_path(const Recording& r) {
  return r.requested == "auto" || (r.kernel == timeline::kBackward && backward_default(r));
}

}  // namespace

std::string short_name(const Recording& r) {
  std::string s = "d" + std::to_string(r.d);
  if (r.causal) s += "-causal";
  if (!default_path(r)) s += "-" + r.path;
  if (r.dq == "deterministic") s += "-deterministic";
  return s;
}

std::vector<Named> named(const timeline::File& f, const std::string& kernel) {
  std::vector<Named> out;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < f.recordings.size(); ++i) {
    if (f.recordings[i].kernel != kernel) continue;
    std::string name = short_name(f.recordings[i]);
    const int n = ++seen[name];
    if (n > 1) name += "-" + std::to_string(n);
    out.push_back({int(i), name});
  }
  return out;
}

std::string path_note(const Recording& r) {
  if (r.requested == "auto") return "the by-shape default";
  if (r.kernel == timeline::kBackward) return backward_default(r) ? "the default" : "";
  if (r.path == "wgmma" || r.path == "wgmma-late") return "one CTA per tile";
  return "";
}

namespace {

std::string path_named(const Recording& r) {
  const std::string note = path_note(r);
  return r.path + (note.empty() ? "" : " (" + note + ")");
}

}  // namespace

std::string title(const Recording& r) {
  return std::string(r.kernel == timeline::kBackward ? "backward" : "forward") + ", d = " + std::to_string(r.d) +
         (r.causal ? " causal" : "") + ", " + path_named(r) + (r.dq.empty() ? "" : ", dQ " + r.dq) +
         ", B=" + std::to_string(r.B) + " H=" + std::to_string(r.H) + timeline::kv_heads_text(r) + " L=" +
         std::to_string(r.Lq);
}

std::string label(const Recording& r) {
  return std::string(r.kernel == timeline::kBackward ? "backward" : "forward") + " d=" + std::to_string(r.d) +
         (r.causal ? " causal" : "") + ", " + path_named(r) + (r.dq.empty() ? "" : ", dQ " + r.dq);
}

namespace {

// A backward recording of wgmma-tma's atomic kernel made before that kernel took 80 query rows a step at the
// recording's shape (fast_backward_steps80, the twenty-first session of 2026-12-07): the rows it takes there now; 0
// where the recording shows the steps the kernel takes.
int backward_rows_now(const Recording& r) {
  namespace fab = flash_attention_backward;
  if (r.kernel != timeline::kBackward || r.path != fab::kFastBackwardDefaultSm90 || r.dq != "atomic") return 0;
  fab::FastBackwardParams p;
  p.B = r.B, p.H = r.H, p.H_kv = r.Hkv, p.Lq = r.Lq, p.Lk = r.Lk, p.d = r.d, p.causal = r.causal;
  p.path = fab::FastBackwardPath::WgmmaTma;
  constexpr int k80 = fab::FastBackwardTraitsSm90<128>::kBlockM80;
  return fab::fast_backward_steps80(p, true) && r.block_m != k80 ? k80 : 0;
}

}  // namespace

std::string provenance(const Recording& r) {
  std::string s = "recorded on " + r.device + ", " + r.date + " (CUDA " + r.cuda + ")";
  if (const int rows = backward_rows_now(r))
    s += ", when this kernel took " + std::to_string(r.block_m) + " query rows a step (it takes " +
         std::to_string(rows) + " at this shape now)";
  return s;
}

// ---- [SECTION] phases as the view names them -----------------------------------------------------------------
namespace {

struct Names {
  Phase phase;
  const char* short_label;
  const char* prose;
};
const Names kNames[] = {
    {Phase::Setup, "CTA start", "starting the CTA"},
    {Phase::Schedule, "next tile", "taking the next tile"},
    {Phase::WaitQ, "wait Q", "waiting for Q's copy"},
    {Phase::WaitK, "wait K", "waiting for K's copy"},
    {Phase::WaitV, "wait V", "waiting for V's copy"},
    {Phase::WaitTurn, "wait turn", "waiting for their turn on the tensor cores"},
    {Phase::IssueS, "issue S=QK^T", "issuing S = QK^T"},
    {Phase::IssuePV, "issue O+=PV", "issuing O += PV"},
    {Phase::WaitS, "wait S", "waiting for S"},
    {Phase::Softmax, "softmax", "in the softmax"},
    {Phase::WaitPV, "wait PV", "waiting for PV"},
    {Phase::Rescale, "rescale", "rescaling O"},
    {Phase::Pack, "pack P", "packing P"},
    {Phase::Epilogue, "epilogue", "writing the output"},
    {Phase::WaitQFree, "wait Q free", "waiting for a free Q buffer"},
    {Phase::LoadQ, "load Q", "issuing Q's copy"},
    {Phase::WaitKFree, "wait K free", "waiting for a free K stage"},
    {Phase::LoadK, "load K", "issuing K's copy"},
    {Phase::WaitVFree, "wait V free", "waiting for a free V stage"},
    {Phase::LoadV, "load V", "issuing V's copy"},
    {Phase::WaitTiles, "wait tiles", "waiting for the step's tiles"},
    {Phase::LoadTiles, "load tiles", "issuing the next step's copies"},
    {Phase::IssueDP, "issue dP", "issuing dP^T = V dO^T"},
    {Phase::WaitDP, "wait dP", "waiting for dP"},
    {Phase::DS, "dS", "computing dS"},
    {Phase::IssueDVDK, "issue dV, dK", "issuing dV and dK"},
    {Phase::StoreDS, "store dS", "storing dS"},
    {Phase::WaitDS, "wait dS", "waiting at the dS barrier"},
    {Phase::IssueDQ, "issue dQ", "issuing dQ = dS K"},
    {Phase::WaitDQ, "wait dV, dK, dQ", "waiting for dV, dK and dQ"},
    {Phase::AddDQ, "add dQ", "adding dQ into fp32"},
    {Phase::WaitDVDK, "wait dV, dK", "waiting for dV and dK"},
    {Phase::WaitOFree, "wait O free", "waiting for the O tile to be free"},
    {Phase::StoreO, "store O", "issuing O's bulk stores"},
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(Phase::Done), "one entry per phase, in order");

}  // namespace

const char* short_label(Phase p) {
  if (p >= Phase::Done) throw RuntimeError("timeline: phase " + std::to_string(int(p)) + " has no name");
  return kNames[int(p)].short_label;
}
const char* prose(Phase p) {
  if (p >= Phase::Done) throw RuntimeError("timeline: phase " + std::to_string(int(p)) + " has no name");
  return kNames[int(p)].prose;
}

// ---- [SECTION] what the recording adds up to ------------------------------------------------------------------
namespace {

// The length of [a, b) covered by a merged set.
double covered(const std::vector<Interval>& set, double a, double b) {
  auto it = std::lower_bound(set.begin(), set.end(), a, [](const Interval& i, double x) { return i.end < x; });
  double t = 0;
  for (; it != set.end() && it->start < b; ++it) t += std::max(0.0, std::min(b, it->end) - std::max(a, it->start));
  return t;
}

std::vector<Interval> consumers_in_flight(const Cta& cta) {
  std::vector<Interval> all;
  for (const Lane& lane : cta.lanes)
    if (timeline::consumer_role(lane.role)) {
      const std::vector<Interval> f = timeline::in_flight(lane);
      all.insert(all.end(), f.begin(), f.end());
    }
  return timeline::merged(all);
}

int tiles_of(const Cta& cta) {
  for (const Lane& lane : cta.lanes) {
    if (!timeline::consumer_role(lane.role)) continue;
    std::set<int> tiles;
    for (const Event& e : lane.events)
      if (e.tile >= 0) tiles.insert(e.tile);
    return int(tiles.size());
  }
  return 0;
}

// Adds each consumer phase's time with no product in flight to idle[phase].
void add_idle(const Cta& cta, const std::vector<Interval>& flight, std::map<Phase, double>* idle) {
  for (const Lane& lane : cta.lanes) {
    if (!timeline::consumer_role(lane.role)) continue;
    for (const Event& e : lane.events) {
      const double open = (e.end_ns - e.start_ns) - covered(flight, e.start_ns, e.end_ns);
      if (open > 0) (*idle)[e.phase] += open;
    }
  }
}

}  // namespace

Facts facts(const Recording& r) {
  const timeline::Summary s = timeline::summarize(r);
  Facts f;
  f.tensor_share = s.tensor_share, f.overlap = s.overlap;
  f.tflops = r.tflops(), f.plain_ms = r.plain_ms, f.traced_ms = r.traced_ms, f.overhead = r.overhead();
  f.recorded_ms = r.recorded_ms, f.recorded_span_ms = s.span_ns * 1e-6;
  std::map<Phase, double> idle;
  f.tiles_min = std::numeric_limits<int>::max();
  for (size_t c = 0; c < r.ctas.size(); ++c) {
    const Cta& cta = r.ctas[c];
    const timeline::CtaSummary& cs = s.ctas[c];
    CtaFacts cf;
    cf.index = cta.index, cf.sm = cta.sm;
    cf.start_ns = cs.start_ns, cf.span_ns = cs.span_ns;
    cf.tensor_share = cs.tensor_share, cf.overlap = cs.overlap;
    for (const timeline::LaneSummary& l : cs.lanes)
      if (timeline::consumer_role(l.role)) cf.lanes.push_back({l.role, l.in_flight_share});
    const std::vector<Interval> flight = consumers_in_flight(cta);
    if (!flight.empty()) {
      cf.before_first_ns = flight.front().start - cs.start_ns;
      cf.after_last_ns = cs.start_ns + cs.span_ns - flight.back().end;
    }
    cf.tiles = tiles_of(cta);
    add_idle(cta, flight, &idle);
    f.ramp_ns += (cf.before_first_ns + cf.after_last_ns) / double(r.ctas.size());
    f.span_ns += cf.span_ns / double(r.ctas.size());
    f.tiles_min = std::min(f.tiles_min, cf.tiles);
    f.tiles_max = std::max(f.tiles_max, cf.tiles);
    f.ctas.push_back(std::move(cf));
  }
  if (r.ctas.empty()) f.tiles_min = 0;
  double total = 0;
  for (const auto& [phase, t] : idle) total += t;
  for (const auto& [phase, t] : idle)
    if (total > 0) f.idle.push_back({phase, t / total});
  std::stable_sort(f.idle.begin(), f.idle.end(), [](const IdleShare& a, const IdleShare& b) { return a.share > b.share; });
  return f;
}

int counterpart(const std::vector<Recording>& all, int index) {
  const Recording& r = all[size_t(index)];
  for (size_t i = 0; i < all.size(); ++i) {
    const Recording& o = all[i];
    if (int(i) == index || o.kernel != r.kernel || o.path == r.path) continue;
    if (o.B == r.B && o.H == r.H && o.Lq == r.Lq && o.Lk == r.Lk && o.d == r.d && o.causal == r.causal && o.dq == r.dq)
      return int(i);
  }
  return -1;
}

namespace {

std::string tiles_text(const Facts& f) {
  if (f.tiles_min == f.tiles_max) return std::to_string(f.tiles_min) + " tiles";
  return std::to_string(f.tiles_min) + "-" + std::to_string(f.tiles_max) + " tiles";
}

// A one-CTA-per-tile kernel's ramp against a persistent one's: "a wgmma CTA spends 4.1 µs of its 34.5 µs
// (12%) before its first product and after its last, for one tile; a wgmma-persistent-q2-late CTA 5.9 µs
// for its 3-4 tiles".
std::string ramp_sentence(const Recording& one, const Facts& fo, const Recording& pers, const Facts& fp) {
  return "a " + one.path + " CTA spends " + us(fo.ramp_ns) + " of its " + us(fo.span_ns) + " (" +
         percent(fo.span_ns > 0 ? fo.ramp_ns / fo.span_ns : 0) +
         ") before its first product and after its last, for one tile; a " + pers.path + " CTA " + us(fp.ramp_ns) +
         " for its " + tiles_text(fp);
}

std::string idle_sentence(const Facts& f) {
  std::vector<std::string> parts;
  for (const IdleShare& i : f.idle) {
    if (parts.size() == 3 || (!parts.empty() && i.share < 0.1)) break;
    parts.push_back(std::string(prose(i.phase)) + " (" + percent(i.share) + ")");
  }
  if (parts.empty()) return "";
  std::string s = "; with none in flight its warpgroups are mostly " + parts[0];
  for (size_t i = 1; i < parts.size(); ++i) s += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s;
}

}  // namespace

std::string notice(const std::vector<Recording>& all, int index) {
  const Recording& r = all[size_t(index)];
  const Facts f = facts(r);
  std::string s = path_named(r) + " has a tensor-core product in flight " + percent(f.tensor_share) +
                  " of the time";
  const int o = counterpart(all, index);
  if (o < 0) return s + idle_sentence(f) + ". Measured: " + fixed(f.tflops, 0) + " TFLOP/s.";
  const Recording& other = all[size_t(o)];
  const Facts g = facts(other);
  s += ", " + path_named(other) + " " + percent(g.tensor_share);
  if (f.tiles_max == 1 && g.tiles_max > 1) s += ": " + ramp_sentence(r, f, other, g);
  else if (g.tiles_max == 1 && f.tiles_max > 1) s += ": " + ramp_sentence(other, g, r, f);
  else s += idle_sentence(f);  // the same schedule of tiles: what this one still does with no product in flight
  return s + ". Measured: " + fixed(f.tflops, 0) + " against " + fixed(g.tflops, 0) + " TFLOP/s.";
}

std::vector<std::string> summary_lines(const Recording& r, const Facts& f) {
  std::vector<std::string> out;
  const int rows_now = backward_rows_now(r);
  out.push_back(title(r) + (r.causal ? "" : " non-causal") + ": " + std::to_string(r.grid_ctas) + " CTAs of " +
                std::to_string(r.block_m) + " x " + std::to_string(r.block_n) + " tiles" +
                (rows_now ? " (the kernel takes " + std::to_string(rows_now) + " query rows a step here now)" : ""));
  out.push_back("measured (the plain kernel): " + fixed(f.tflops, 1) + " TFLOP/s, " + fixed(f.plain_ms, 3) +
                " ms, median of " + std::to_string(r.iterations));
  out.push_back("cost of recording: the instrumented kernel " + fixed(f.traced_ms, 3) + " ms, " +
                (f.overhead >= 0 ? "+" : "") + fixed(100.0 * f.overhead, 1) + "%; its output " +
                (r.same_output ? "bit-identical to the plain kernel's" : "DIFFERS from the plain kernel's"));
  out.push_back("a product on the tensor cores (issue to its wait's end): " + percent(f.tensor_share) +
                " of the time, mean over the " + std::to_string(f.ctas.size()) + " recorded CTAs");
  out.push_back("overlap: " + percent(f.overlap) +
                " of the warpgroups' CUDA-core work (softmax, rescale, epilogue...) ran under a product");
  if (!f.idle.empty()) {
    std::string idle = "with no product in flight:";
    for (size_t i = 0; i < f.idle.size() && i < 4; ++i)
      idle += std::string(i ? "," : "") + " " + short_label(f.idle[i].phase) + " " + percent(f.idle[i].share);
    out.push_back(idle);
  }
  out.push_back("the recorded CTAs span " + fixed(f.recorded_span_ms, 3) + " ms of the recorded launch's " +
                fixed(f.recorded_ms, 3) + " ms; clock64 at " + fixed(r.clock_ghz, 2) + " GHz");
  return out;
}

// ---- [SECTION] time windows -----------------------------------------------------------------------------------
double cta_start(const Cta& cta) {
  double t = std::numeric_limits<double>::max();
  for (const Lane& l : cta.lanes)
    if (!l.events.empty()) t = std::min(t, l.events.front().start_ns);
  return t == std::numeric_limits<double>::max() ? 0 : t;
}

Window whole(const Cta& cta, bool aligned) {
  const double start = cta_start(cta);
  double end = start;
  for (const Lane& l : cta.lanes)
    if (!l.events.empty()) end = std::max(end, l.events.back().end_ns);
  const double off = aligned ? start : 0;
  return {start - off, std::max(end, start + 1) - off};
}

Window steady(const Cta& cta, bool aligned) {
  const Window all = whole(cta, aligned);
  const double off = aligned ? cta_start(cta) : 0;
  for (const Lane& l : cta.lanes) {
    if (!timeline::consumer_role(l.role)) continue;
    std::vector<double> issues;  // the starts of the lane's S products in its first work tile
    int tile = std::numeric_limits<int>::min();
    for (const Event& e : l.events) {
      if (e.phase != Phase::IssueS) continue;
      if (tile == std::numeric_limits<int>::min()) tile = e.tile;
      if (e.tile != tile) break;
      issues.push_back(e.start_ns - off);
    }
    if (issues.size() < 7) return all;
    return {issues[2], issues[6]};
  }
  return all;
}

}  // namespace kl::timeline_study
