#include "kernels/measure/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/rungs/flash_attention_backward_fast.h"  // the backward's default path's name
#include "kernels/rungs/flash_attention_fast.h"           // the forward's named paths
#include "kernels/runtime/errors.h"

namespace kl::timeline {

// ---- [SECTION] phases and products ------------------------------------------------------------------------
namespace {

const PhaseInfo kPhases[] = {
    {Phase::Setup, "setup", "start of the CTA (barrier init, register hand-over)", PhaseKind::Setup},
    {Phase::Schedule, "schedule", "take the next work tile", PhaseKind::Setup},
    {Phase::WaitQ, "wait-q", "wait for Q (bulk copy)", PhaseKind::Wait},
    {Phase::WaitK, "wait-k", "wait for K (bulk copy)", PhaseKind::Wait},
    {Phase::WaitV, "wait-v", "wait for V (bulk copy)", PhaseKind::Wait},
    {Phase::WaitTurn, "wait-turn", "wait for the turn on the tensor cores", PhaseKind::Wait},
    {Phase::IssueS, "issue-s", "issue S = Q K^T (wgmma)", PhaseKind::Issue},
    {Phase::IssuePV, "issue-pv", "issue O += P V (wgmma)", PhaseKind::Issue},
    {Phase::WaitS, "wait-s", "wait for S", PhaseKind::Wait},
    {Phase::Softmax, "softmax", "softmax (mask, max, exp2, sum)", PhaseKind::Compute},
    {Phase::WaitPV, "wait-pv", "wait for P V", PhaseKind::Wait},
    {Phase::Rescale, "rescale", "rescale O by alpha", PhaseKind::Compute},
    {Phase::Pack, "pack", "pack P into A fragments", PhaseKind::Compute},
    {Phase::Epilogue, "epilogue", "epilogue (write the output)", PhaseKind::Compute},
    {Phase::WaitQFree, "wait-q-free", "wait for a free Q buffer", PhaseKind::Wait},
    {Phase::LoadQ, "load-q", "issue Q's bulk copy", PhaseKind::Load},
    {Phase::WaitKFree, "wait-k-free", "wait for a free K stage", PhaseKind::Wait},
    {Phase::LoadK, "load-k", "issue K's bulk copy", PhaseKind::Load},
    {Phase::WaitVFree, "wait-v-free", "wait for a free V stage", PhaseKind::Wait},
    {Phase::LoadV, "load-v", "issue V's bulk copy", PhaseKind::Load},
    {Phase::WaitTiles, "wait-tiles", "wait for the step's tiles and the CTA barrier", PhaseKind::Wait},
    {Phase::LoadTiles, "load-tiles", "issue the next step's copies (cp.async)", PhaseKind::Load},
    {Phase::IssueDP, "issue-dp", "issue dP^T = V dO^T (wgmma)", PhaseKind::Issue},
    {Phase::WaitDP, "wait-dp", "wait for dP", PhaseKind::Wait},
    {Phase::DS, "ds", "dS = P (dP - D), pack P and dS", PhaseKind::Compute},
    {Phase::IssueDVDK, "issue-dvdk", "issue dV += P^T dO, dK += dS^T Q (wgmma)", PhaseKind::Issue},
    {Phase::StoreDS, "store-ds", "store dS to shared memory", PhaseKind::Compute},
    {Phase::WaitDS, "wait-ds", "barrier: dS stored by both warpgroups", PhaseKind::Wait},
    {Phase::IssueDQ, "issue-dq", "issue dQ = dS K (wgmma)", PhaseKind::Issue},
    {Phase::WaitDQ, "wait-dq", "wait for dV, dK and dQ", PhaseKind::Wait},
    {Phase::AddDQ, "add-dq", "add dQ into the fp32 accumulator", PhaseKind::Compute},
    {Phase::WaitDVDK, "wait-dvdk", "wait for dV and dK", PhaseKind::Wait},
    {Phase::WaitOFree, "wait-o-free", "wait until the last stores have read the O tile", PhaseKind::Wait},
    {Phase::StoreO, "store-o", "issue O's bulk stores (TMA) after the warpgroup's barrier", PhaseKind::Load},
};
static_assert(sizeof(kPhases) / sizeof(kPhases[0]) == size_t(Phase::Done), "one entry per phase, in order");

}  // namespace

const PhaseInfo& phase_info(Phase p) {
  if (p >= Phase::Done) throw RuntimeError("timeline: phase " + std::to_string(int(p)) + " has no description");
  return kPhases[int(p)];
}

bool phase_from_name(const std::string& name, Phase* out) {
  for (const PhaseInfo& info : kPhases)
    if (name == info.name) {
      *out = info.phase;
      return true;
    }
  return false;
}

std::string phase_names() {
  std::string s;
  for (const PhaseInfo& info : kPhases) s += (s.empty() ? "" : ", ") + std::string(info.name);
  return s;
}

const char* kind_name(PhaseKind k) {
  switch (k) {
    case PhaseKind::Setup: return "setup";
    case PhaseKind::Wait: return "wait";
    case PhaseKind::Issue: return "issue";
    case PhaseKind::Compute: return "compute";
    default: return "load";
  }
}

const std::vector<Product>& products() {
  static const std::vector<Product> all = {
      {"S = Q K^T", Phase::IssueS, {Phase::WaitS, Phase::Count}},
      {"O += P V", Phase::IssuePV, {Phase::WaitPV, Phase::Count}},
      {"dP^T = V dO^T", Phase::IssueDP, {Phase::WaitDP, Phase::Count}},
      {"dV += P^T dO, dK += dS^T Q", Phase::IssueDVDK, {Phase::WaitDQ, Phase::WaitDVDK}},
      {"dQ = dS K", Phase::IssueDQ, {Phase::WaitDQ, Phase::Count}},
  };
  return all;
}

// ---- [SECTION] writing the file -----------------------------------------------------------------------------
namespace {

using nlohmann::json;

// A time rounded to 0.1 ns, as the shortest text that reads back to it ("100", "100.5").
std::string ns_text(double ns) {
  const double r = std::round(ns * 10.0) / 10.0;
  if (r == std::floor(r) && std::fabs(r) < 1e15) return std::to_string(int64_t(r));
  return json(r).dump();
}

json recording_header(const Recording& r) {
  json j;
  j["kernel"] = r.kernel;
  j["path"] = r.path;
  j["requested"] = r.requested;
  j["launch"] = r.launch;
  j["shape"] = {{"B", r.B}, {"H", r.H}, {"Lq", r.Lq}, {"Lk", r.Lk}, {"d", r.d}, {"causal", r.causal}, {"dtype", r.dtype}};
  if (r.Hkv != 0 && r.Hkv != r.H) j["shape"]["Hkv"] = r.Hkv;  // grouped-query attention only
  if (!r.dq.empty()) j["dq"] = r.dq;
  j["tiles"] = {{"block_m", r.block_m}, {"block_n", r.block_n}, {"ctas", r.grid_ctas}};
  j["device"] = r.device;
  j["date"] = r.date;
  j["cuda"] = r.cuda;
  j["clock_ghz"] = r.clock_ghz;
  j["time"] = {{"plain_ms", r.plain_ms},       {"traced_ms", r.traced_ms}, {"iterations", r.iterations},
               {"recorded_ms", r.recorded_ms}, {"flops", r.flops}};
  j["same_output"] = r.same_output;
  return j;
}

void write_lane(std::ostringstream& out, const Lane& lane) {
  out << "{\"role\": " << json(lane.role).dump() << ", \"events\": [";
  for (size_t i = 0; i < lane.events.size(); ++i) {
    const Event& e = lane.events[i];
    out << (i ? ",\n" : "\n") << "[\"" << phase_info(e.phase).name << "\", " << e.step << ", " << e.tile << ", "
        << ns_text(e.start_ns) << ", " << ns_text(e.end_ns) << "]";
  }
  out << "]}";
}

void write_recording(std::ostringstream& out, const Recording& r) {
  std::string head = recording_header(r).dump();
  head.pop_back();  // the closing brace: "ctas" follows
  out << head << ", \"ctas\": [";
  for (size_t c = 0; c < r.ctas.size(); ++c) {
    const Cta& cta = r.ctas[c];
    out << (c ? ",\n" : "\n") << "{\"index\": " << cta.index << ", \"sm\": " << cta.sm << ", \"lanes\": [";
    for (size_t l = 0; l < cta.lanes.size(); ++l) {
      out << (l ? ",\n" : "\n");
      write_lane(out, cta.lanes[l]);
    }
    out << "]}";
  }
  out << "]}";
}

}  // namespace

std::string to_json(const File& f) {
  std::ostringstream out;
  out << "{\"schema\": " << kSchema << ", \"recordings\": [";
  for (size_t i = 0; i < f.recordings.size(); ++i) {
    out << (i ? ",\n" : "\n");
    write_recording(out, f.recordings[i]);
  }
  out << "\n]}\n";
  return out.str();
}

void save(const File& f, const std::string& path) {
  const std::string text = to_json(f);
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError("--json " + path + ": cannot write the file");
  out << text;
  if (!out.flush()) throw InputError("--json " + path + ": writing the file failed");
}

// ---- [SECTION] reading the file, one named field at a time -----------------------------------------------
namespace {

struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(origin + ": " + (path.empty() ? "top level" : path) + ": " + what);
  }
  static std::string shown(const json& v) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }
  const json& field(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "expected an object, got " + shown(obj));
    auto it = obj.find(key);
    if (it == obj.end()) fail(path, std::string("missing field \"") + key + "\"");
    return *it;
  }
  static std::string at(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
  std::string text(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_string() || v.get<std::string>().empty()) fail(at(path, key), "expected a non-empty string, got " + shown(v));
    return v.get<std::string>();
  }
  int integer(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi) const {
    return integer_value(field(obj, path, key), at(path, key), lo, hi);
  }
  int integer_value(const json& v, const std::string& path, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + shown(v));
    return int(v.get<int64_t>());
  }
  double number(const json& obj, const std::string& path, const char* key, bool positive) const {
    return number_value(field(obj, path, key), at(path, key), positive);
  }
  double number_value(const json& v, const std::string& path, bool positive) const {
    const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                    (positive ? v.get<double>() > 0 : v.get<double>() >= 0);
    if (!ok) fail(path, std::string("expected a ") + (positive ? "positive" : "non-negative") + " number, got " + shown(v));
    return v.get<double>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_boolean()) fail(at(path, key), "expected true or false, got " + shown(v));
    return v.get<bool>();
  }
  const json& array(const json& obj, const std::string& path, const char* key, bool non_empty) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(at(path, key), "expected an array, got " + shown(v));
    if (non_empty && v.empty()) fail(at(path, key), "expected at least one entry");
    return v;
  }
};

constexpr int kMaxL = 1 << 30;

Event read_event(const Reader& rd, const json& e, const std::string& path, double prev_end) {
  if (!e.is_array() || e.size() != 5) rd.fail(path, "expected [phase, step, tile, start_ns, end_ns], got " + Reader::shown(e));
  Event ev;
  if (!e[0].is_string() || !phase_from_name(e[0].get<std::string>(), &ev.phase))
    rd.fail(path + "[0]", "unknown phase " + Reader::shown(e[0]) + " (allowed: " + phase_names() + ")");
  ev.step = rd.integer_value(e[1], path + "[1]", -1, kMaxL);
  ev.tile = rd.integer_value(e[2], path + "[2]", -1, std::numeric_limits<int>::max());
  ev.start_ns = rd.number_value(e[3], path + "[3]", false);
  ev.end_ns = rd.number_value(e[4], path + "[4]", false);
  if (ev.end_ns < ev.start_ns) rd.fail(path + "[4]", "ends (" + Reader::shown(e[4]) + " ns) before it starts");
  if (ev.start_ns < prev_end)
    rd.fail(path + "[3]", "starts (" + Reader::shown(e[3]) + " ns) before the previous event ends: events must be in order");
  return ev;
}

Lane read_lane(const Reader& rd, const json& l, const std::string& path) {
  Lane lane;
  lane.role = rd.text(l, path, "role");
  const json& events = rd.array(l, path, "events", true);
  double prev_end = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    lane.events.push_back(read_event(rd, events[i], path + ".events[" + std::to_string(i) + "]", prev_end));
    prev_end = lane.events.back().end_ns;
  }
  return lane;
}

Cta read_cta(const Reader& rd, const json& c, const std::string& path, int grid_ctas) {
  Cta cta;
  cta.index = rd.integer(c, path, "index", 0, grid_ctas - 1);
  cta.sm = rd.integer(c, path, "sm", 0, 1 << 16);
  const json& lanes = rd.array(c, path, "lanes", true);
  for (size_t i = 0; i < lanes.size(); ++i)
    cta.lanes.push_back(read_lane(rd, lanes[i], path + ".lanes[" + std::to_string(i) + "]"));
  return cta;
}

void read_shape(const Reader& rd, const json& j, const std::string& path, Recording& r) {
  const std::string at = path + ".shape";
  const json& s = rd.field(j, path, "shape");
  r.B = rd.integer(s, at, "B", 1, 65535);
  r.H = rd.integer(s, at, "H", 1, 65535);
  r.Hkv = s.contains("Hkv") ? rd.integer(s, at, "Hkv", 1, r.H) : r.H;  // grouped-query attention only
  if (r.H % r.Hkv != 0)
    rd.fail(at + ".Hkv", "expected a divisor of H = " + std::to_string(r.H) + ", got " + std::to_string(r.Hkv));
  r.Lq = rd.integer(s, at, "Lq", 1, kMaxL);
  r.Lk = rd.integer(s, at, "Lk", 1, kMaxL);
  r.d = rd.integer(s, at, "d", 64, 128);
  if (r.d != 64 && r.d != 128) rd.fail(at + ".d", "expected 64 or 128, got " + std::to_string(r.d));
  r.causal = rd.boolean(s, at, "causal");
  r.dtype = rd.text(s, at, "dtype");
  if (r.dtype != "bf16") rd.fail(at + ".dtype", "expected \"bf16\", got \"" + r.dtype + "\"");
}

void read_time(const Reader& rd, const json& j, const std::string& path, Recording& r) {
  const std::string at = path + ".time";
  const json& t = rd.field(j, path, "time");
  r.plain_ms = rd.number(t, at, "plain_ms", true);
  r.traced_ms = rd.number(t, at, "traced_ms", true);
  r.iterations = rd.integer(t, at, "iterations", 1, 100000);
  r.recorded_ms = rd.number(t, at, "recorded_ms", true);
  r.flops = rd.number(t, at, "flops", true);
}

void read_names(const Reader& rd, const json& j, const std::string& path, Recording& r) {
  r.kernel = rd.text(j, path, "kernel");
  if (r.kernel != kForward && r.kernel != kBackward)
    rd.fail(path + ".kernel", "expected \"" + std::string(kForward) + "\" or \"" + kBackward + "\", got \"" + r.kernel + "\"");
  r.path = rd.text(j, path, "path");
  r.requested = rd.text(j, path, "requested");
  r.launch = rd.text(j, path, "launch");
  if (r.kernel == kBackward) {
    r.dq = rd.text(j, path, "dq");
    if (r.dq != "atomic" && r.dq != "deterministic")
      rd.fail(path + ".dq", "expected \"atomic\" or \"deterministic\", got \"" + r.dq + "\"");
  }
  r.device = rd.text(j, path, "device");
  r.date = rd.text(j, path, "date");
  if (r.date.size() != 10 || r.date[4] != '-' || r.date[7] != '-')
    rd.fail(path + ".date", "expected YYYY-MM-DD, got \"" + r.date + "\"");
  r.cuda = rd.text(j, path, "cuda");
}

Recording read_recording(const Reader& rd, const json& j, const std::string& path) {
  Recording r;
  read_names(rd, j, path, r);
  read_shape(rd, j, path, r);
  const std::string tiles = path + ".tiles";
  const json& t = rd.field(j, path, "tiles");
  r.block_m = rd.integer(t, tiles, "block_m", 1, 1024);
  r.block_n = rd.integer(t, tiles, "block_n", 1, 1024);
  r.grid_ctas = rd.integer(t, tiles, "ctas", 1, std::numeric_limits<int>::max());
  r.clock_ghz = rd.number(j, path, "clock_ghz", true);
  read_time(rd, j, path, r);
  r.same_output = rd.boolean(j, path, "same_output");
  const json& ctas = rd.array(j, path, "ctas", true);
  for (size_t i = 0; i < ctas.size(); ++i)
    r.ctas.push_back(read_cta(rd, ctas[i], path + ".ctas[" + std::to_string(i) + "]", r.grid_ctas));
  return r;
}

}  // namespace

File parse(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(origin + ": not JSON (" + e.what() + ")");
  }
  const Reader rd{origin};
  rd.integer(doc, "", "schema", kSchema, kSchema);
  const json& recs = rd.array(doc, "", "recordings", true);
  File f;
  for (size_t i = 0; i < recs.size(); ++i)
    f.recordings.push_back(read_recording(rd, recs[i], "recordings[" + std::to_string(i) + "]"));
  return f;
}

File load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

// ---- [SECTION] reading the kernels' buffer back ---------------------------------------------------------------
namespace {

struct RawLane {
  uint32_t count = 0, sm = 0;
  uint64_t gt0 = 0, clk0 = 0, gt1 = 0, clk1 = 0;
  std::vector<uint64_t> clocks;
  std::vector<Event> events;  // phase, step, tile; times filled later
};

uint64_t word64(const std::vector<uint32_t>& w, size_t at) { return uint64_t(w[at]) | (uint64_t(w[at + 1]) << 32); }

RawLane read_raw_lane(const std::vector<uint32_t>& w, size_t rec0, int capacity, const std::string& who) {
  RawLane l;
  if (w[rec0 * 4 + 2] != kLaneMagic)
    throw RuntimeError(who + ": the instrumented kernel wrote no header (it did not run, or ran without recording)");
  l.count = w[rec0 * 4];
  l.sm = w[rec0 * 4 + 1];
  if (l.count > uint32_t(capacity))
    throw RuntimeError(who + ": " + std::to_string(l.count) + " events, more than the " + std::to_string(capacity) +
                       " it had room for (the capacity bound is wrong)");
  l.gt0 = word64(w, (rec0 + 1) * 4), l.clk0 = word64(w, (rec0 + 1) * 4 + 2);
  l.gt1 = word64(w, (rec0 + 2) * 4), l.clk1 = word64(w, (rec0 + 2) * 4 + 2);
  for (uint32_t i = 0; i < l.count; ++i) {
    const size_t at = (rec0 + kHeaderRecords + i) * 4;
    const uint32_t code = w[at + 2];
    if ((code & 0xFFu) >= uint32_t(Phase::Count))
      throw RuntimeError(who + ": event " + std::to_string(i) + " has an unknown phase " + std::to_string(code & 0xFFu));
    Event e;
    e.phase = Phase(code & 0xFFu);
    e.step = int32_t(code) >> 8;
    e.tile = int32_t(w[at + 3]);
    l.clocks.push_back(word64(w, at));
    l.events.push_back(e);
  }
  if (l.events.empty() || l.events.back().phase != Phase::Done)
    throw RuntimeError(who + ": the last event is not the lane's end");
  if (l.clk1 < l.clk0 || l.gt1 < l.gt0) throw RuntimeError(who + ": its clocks run backwards");
  return l;
}

// The lanes' events as phases from one event to the next (Done closes the last), at
// t = gt0 + (clock - clk0) / ghz - origin.
Lane timed_lane(const RawLane& l, const std::string& role, uint64_t gt0, uint64_t clk0, double ghz, double origin) {
  Lane lane;
  lane.role = role;
  auto at = [&](uint64_t clk) { return double(gt0) - origin + (double(clk) - double(clk0)) / ghz; };
  for (size_t i = 0; i + 1 < l.events.size(); ++i) {
    Event e = l.events[i];
    e.start_ns = at(l.clocks[i]);
    e.end_ns = at(l.clocks[i + 1]);
    lane.events.push_back(e);
  }
  return lane;
}

}  // namespace

std::vector<Cta> decode(const std::vector<uint32_t>& words, const BufferLayout& layout, double* clock_ghz) {
  const int lanes = int(layout.roles.size());
  const size_t per_lane = size_t(kHeaderRecords + layout.capacity);
  if (words.size() < layout.cta_of_slot.size() * lanes * per_lane * 4)
    throw RuntimeError("timeline: the trace buffer is shorter than its layout");
  std::vector<std::vector<RawLane>> raw(layout.cta_of_slot.size());
  double cycles = 0, ns = 0;
  for (size_t s = 0; s < raw.size(); ++s)
    for (int l = 0; l < lanes; ++l) {
      const std::string who = "CTA " + std::to_string(layout.cta_of_slot[s]) + " " + layout.roles[size_t(l)];
      raw[s].push_back(read_raw_lane(words, (s * lanes + size_t(l)) * per_lane, layout.capacity, who));
      cycles += double(raw[s].back().clk1 - raw[s].back().clk0);
      ns += double(raw[s].back().gt1 - raw[s].back().gt0);
    }
  if (!(ns > 0 && cycles > 0)) throw RuntimeError("timeline: the lanes measured no time on %globaltimer");
  const double ghz = cycles / ns;
  // Each CTA is placed by the lane that started first (smallest clock on that SM); the origin is the earliest.
  std::vector<size_t> first(raw.size(), 0);
  double origin = std::numeric_limits<double>::max();
  for (size_t s = 0; s < raw.size(); ++s) {
    for (size_t l = 1; l < raw[s].size(); ++l)
      if (raw[s][l].clk0 < raw[s][first[s]].clk0) first[s] = l;
    origin = std::min(origin, double(raw[s][first[s]].gt0));
  }
  std::vector<Cta> out;
  for (size_t s = 0; s < raw.size(); ++s) {
    Cta cta;
    cta.index = layout.cta_of_slot[s];
    cta.sm = int(raw[s][0].sm);
    const RawLane& a = raw[s][first[s]];
    for (int l = 0; l < lanes; ++l)
      cta.lanes.push_back(timed_lane(raw[s][size_t(l)], layout.roles[size_t(l)], a.gt0, a.clk0, ghz, origin));
    out.push_back(std::move(cta));
  }
  *clock_ghz = ghz;
  return out;
}

// ---- [SECTION] what the timeline adds up to -------------------------------------------------------------------
bool consumer_role(const std::string& role) { return role != "producer"; }

std::vector<Interval> in_flight(const Lane& lane) {
  std::vector<Interval> out;
  const std::vector<Event>& ev = lane.events;
  for (size_t i = 0; i < ev.size(); ++i)
    for (const Product& p : products()) {
      if (ev[i].phase != p.issue) continue;
      for (size_t j = i + 1; j < ev.size(); ++j)
        if (ev[j].phase == p.retired_by[0] || ev[j].phase == p.retired_by[1]) {
          out.push_back({ev[i].start_ns, ev[j].end_ns});
          break;
        }
    }
  return out;
}

std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (!out.empty() && i.start <= out.back().end)
      out.back().end = std::max(out.back().end, i.end);
    else
      out.push_back(i);
  }
  return out;
}

double length(const std::vector<Interval>& set) {
  double t = 0;
  for (const Interval& i : set) t += i.end - i.start;
  return t;
}

namespace {

// The length of [a, b) covered by a merged set (sorted, disjoint: the ends are sorted too).
double covered(const std::vector<Interval>& set, double a, double b) {
  auto it = std::lower_bound(set.begin(), set.end(), a, [](const Interval& i, double x) { return i.end < x; });
  double t = 0;
  for (; it != set.end() && it->start < b; ++it) t += std::max(0.0, std::min(b, it->end) - std::max(a, it->start));
  return t;
}

LaneSummary summarize_lane(const Lane& lane) {
  LaneSummary s;
  s.role = lane.role;
  if (lane.events.empty()) return s;
  s.span_ns = lane.events.back().end_ns - lane.events.front().start_ns;
  if (s.span_ns <= 0) return s;
  for (const Event& e : lane.events) s.share[int(phase_info(e.phase).kind)] += (e.end_ns - e.start_ns) / s.span_ns;
  s.in_flight_share = length(merged(in_flight(lane))) / s.span_ns;
  return s;
}

CtaSummary summarize_cta(const Cta& cta) {
  CtaSummary s;
  s.index = cta.index;
  double start = std::numeric_limits<double>::max(), end = 0;
  std::vector<Interval> flight;
  for (const Lane& lane : cta.lanes) {
    s.lanes.push_back(summarize_lane(lane));
    if (lane.events.empty()) continue;
    start = std::min(start, lane.events.front().start_ns);
    end = std::max(end, lane.events.back().end_ns);
    if (!consumer_role(lane.role)) continue;
    const std::vector<Interval> f = in_flight(lane);
    flight.insert(flight.end(), f.begin(), f.end());
  }
  if (end <= start) return s;
  s.start_ns = start, s.span_ns = end - start;
  const std::vector<Interval> any = merged(flight);
  s.tensor_share = length(any) / s.span_ns;
  double compute = 0, hidden = 0;
  for (const Lane& lane : cta.lanes)
    for (const Event& e : lane.events)
      if (consumer_role(lane.role) && phase_info(e.phase).kind == PhaseKind::Compute) {
        compute += e.end_ns - e.start_ns;
        hidden += covered(any, e.start_ns, e.end_ns);
      }
  s.overlap = compute > 0 ? hidden / compute : 0;
  return s;
}

}  // namespace

Summary summarize(const Recording& r) {
  Summary s;
  double start = std::numeric_limits<double>::max(), end = 0;
  for (const Cta& cta : r.ctas) {
    s.ctas.push_back(summarize_cta(cta));
    const CtaSummary& c = s.ctas.back();
    if (c.span_ns <= 0) continue;
    start = std::min(start, c.start_ns);
    end = std::max(end, c.start_ns + c.span_ns);
    s.tensor_share += c.tensor_share / double(r.ctas.size());
    s.overlap += c.overlap / double(r.ctas.size());
  }
  s.span_ns = end > start ? end - start : 0;
  return s;
}

namespace {

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
std::string percent(double share) { return fixed(100.0 * share, 0) + "%"; }

}  // namespace

std::string kv_heads_text(const Recording& r) {
  return r.Hkv == 0 || r.Hkv == r.H ? "" : " Hkv=" + std::to_string(r.Hkv);
}

std::vector<std::string> summary_lines(const Recording& r) {
  const Summary s = summarize(r);
  std::vector<std::string> out;
  out.push_back(r.kernel + ": " + r.path + (r.requested == "auto" ? " (the by-shape default)" : "") + ", B=" +
                std::to_string(r.B) + " H=" + std::to_string(r.H) + kv_heads_text(r) + " L=" + std::to_string(r.Lq) +
                " d=" + std::to_string(r.d) + (r.causal ? " causal " : " non-causal ") + r.dtype +
                (r.dq.empty() ? "" : " dq=" + r.dq) + ", " + r.device + ", " + r.date);
  out.push_back("  " + std::to_string(r.grid_ctas) + " CTAs, " + std::to_string(r.ctas.size()) + " recorded; plain " +
                fixed(r.plain_ms, 3) + " ms (" + fixed(r.tflops(), 1) + " TFLOP/s), instrumented " +
                fixed(r.traced_ms, 3) + " ms (" + (r.overhead() >= 0 ? "+" : "") + fixed(100.0 * r.overhead(), 1) +
                "%), median of " + std::to_string(r.iterations) + " each; output " +
                (r.same_output ? "bit-identical to the plain kernel's" : "DIFFERS from the plain kernel's"));
  out.push_back("  recorded launch " + fixed(r.recorded_ms, 3) + " ms; the recorded CTAs span " +
                fixed(s.span_ns * 1e-6, 3) + " ms; clock64 at " + fixed(r.clock_ghz, 3) + " GHz");
  for (const CtaSummary& c : s.ctas) {
    size_t events = 0;
    for (const Cta& cta : r.ctas)
      if (cta.index == c.index)
        for (const Lane& l : cta.lanes) events += l.events.size();
    out.push_back("  CTA " + std::to_string(c.index) + ": " + fixed(c.span_ns * 1e-3, 1) + " us, " +
                  std::to_string(events) + " phases; a product in flight " + percent(c.tensor_share) +
                  " of the time; compute under a product " + percent(c.overlap));
  }
  return out;
}

// ---- [SECTION] the request ------------------------------------------------------------------------------------
namespace {

// The forward: auto and every named path (flash_attention::kNamedWgmmaPaths, all instrumented).
const char* const kBackwardPaths[] = {"wgmma", "wgmma-tma"};

bool is_forward_path(const std::string& s) {
  using namespace flash_attention;
  return s == "auto" || std::any_of(std::begin(kNamedWgmmaPaths), std::end(kNamedWgmmaPaths),
                                    [&](FastPath p) { return s == fast_path_name(p); });
}

template <size_t N>
bool listed(const char* const (&names)[N], const std::string& s) {
  return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

void require(bool ok, const std::string& name, const std::string& value, const std::string& allowed) {
  if (!ok) throw InputError(out_of_range_message(name, value, allowed));
}

}  // namespace

std::string path_names(const std::string& kernel) {
  if (kernel != kBackward) return "auto, " + flash_attention::fast_named_paths_text();
  std::string s;
  for (const char* n : kBackwardPaths) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

void validate(const RecordRequest& r) {
  require(r.kernel == kForward || r.kernel == kBackward, "kernel", r.kernel,
          std::string(kForward) + ", " + kBackward);
  require(r.d == 64 || r.d == 128, "d", std::to_string(r.d), "{64, 128} (the instrumented kernels)");
  require(r.L >= 128 && r.L <= 65536, "L", std::to_string(r.L), "[128, 65536]");
  require(r.B >= 1 && r.B <= 64, "B", std::to_string(r.B), "[1, 64]");
  require(r.H >= 1 && r.H <= 128, "H", std::to_string(r.H), "[1, 128]");
  require(r.Hkv == 0 || (r.Hkv >= 1 && r.Hkv <= r.H && r.H % r.Hkv == 0), "Hkv", std::to_string(r.Hkv),
          "0 (as many as H) or a divisor of H = " + std::to_string(r.H));
  require(r.kernel == kForward || r.Hkv == 0 || r.Hkv == r.H, "Hkv", std::to_string(r.Hkv),
          "0 or H = " + std::to_string(r.H) +
              " (the backward's instrumented kernel is the one without grouped queries)");
  const bool path_ok = r.kernel == kBackward ? listed(kBackwardPaths, r.path) : is_forward_path(r.path);
  require(path_ok, "--path", r.path, path_names(r.kernel));
  require(r.kernel == kBackward || !r.deterministic, "deterministic", "1", "0 (the forward has no dQ mode)");
  require(r.iterations >= 1 && r.iterations <= 1000, "iterations", std::to_string(r.iterations), "[1, 1000]");
  require(r.ctas.size() <= size_t(kMaxTracedCtas), "--ctas", std::to_string(r.ctas.size()) + " CTAs",
          "at most " + std::to_string(kMaxTracedCtas) + ", or all");
  for (int c : r.ctas) require(c >= 0, "--ctas", std::to_string(c), "CTA indices >= 0");
  for (size_t i = 0; i < r.ctas.size(); ++i)
    for (size_t j = 0; j < i; ++j) require(r.ctas[i] != r.ctas[j], "--ctas", std::to_string(r.ctas[i]), "each CTA once");
}

void parse_ctas(const std::string& text, RecordRequest* r) {
  r->ctas.clear();
  r->all_ctas = text == "all";
  if (r->all_ctas) return;
  const std::string allowed = "all, or CTA indices separated by commas (0,66,131)";
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    const bool digits = !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
    require(digits, "--ctas", text, allowed);
    r->ctas.push_back(std::stoi(item));
  }
  require(!r->ctas.empty() && text.back() != ',', "--ctas", text, allowed);
}

std::vector<ParamSpec> record_params() {
  return {int_param("L", 128, 65536, 4096, "sequence length (Lq = Lk)"),
          choice_param("d", {"64", "128"}, "128", "head dimension"),
          bool_param("causal", false, "the causal mask (bottom-right aligned)"),
          int_param("B", 1, 64, 1, "batch"),
          int_param("H", 1, 128, 16, "heads"),
          int_param("Hkv", 0, 128, 0,
                    "forward: heads of K and V (grouped-query attention), dividing H; 0: as many as H"),
          bool_param("deterministic", false,
                     "backward: the deterministic mode's dK/dV kernel (dQ left to its pass), the mode's kernel below "
                     "L = 512; from there the mode runs the ordered kernel, which is not recorded")};
}

RecordRequest request_of(const std::string& kernel, const ParamValues& v, const std::string& path, int iterations) {
  RecordRequest r;
  r.kernel = kernel;
  r.L = int(v.get_int("L"));
  r.d = std::stoi(v.get_text("d"));
  r.causal = v.get_bool("causal");
  r.B = int(v.get_int("B"));
  r.H = int(v.get_int("H"));
  r.Hkv = int(v.get_int("Hkv"));
  r.deterministic = v.get_bool("deterministic");
  // The backward's default path on the H100/H200, in either dQ mode.
  r.path = kernel == kBackward && path == "auto" ? flash_attention_backward::kFastBackwardDefaultSm90 : path;
  r.iterations = iterations;
  validate(r);
  return r;
}

#ifdef KL_HAS_CUDA
bool can_record(std::string* why) {
  if (flash_attention::fast_wgmma_kernels_loaded()) return true;
  *why = "recording needs an H100/H200 with the sm_90a build loaded; this device or build is not one";
  return false;
}
#else
bool can_record(std::string* why) {
  *why = "recording runs the Hopper kernels: it needs the CUDA backend, and this build has no CUDA";
  return false;
}

Recording record(const RecordRequest& r) {
  validate(r);
  throw InputError("timeline " + r.kernel + " records the Hopper kernels: it needs the CUDA backend, and this build "
                   "has no CUDA");
}
OutputPair outputs_plain_and_traced(const RecordRequest& r) {
  record(r);  // refuses: no CUDA
  return {};
}
#endif

}  // namespace kl::timeline
