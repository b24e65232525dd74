// Rung 1½'s study: the three transposes traced over one matrix, their access logs turned into sectors and
// bank conflicts, the output checked bit for bit, and the speed measured (CUDA) or recorded (H200).
#include "kernels/studies/transpose_study.h"

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>

#include "kernels/measure/peers.h"
#include "kernels/runtime/errors.h"

namespace kl::study::transpose_study {
namespace {

namespace wa = warp_access;
using transpose::Variant;

std::string printf_text(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string printf_text(const char* f, ...) {
  char buf[640];
  va_list a;
  va_start(a, f);
  std::vsnprintf(buf, sizeof buf, f, a);
  va_end(a);
  return buf;
}

const char* name(Variant v) { return transpose::variant_name(v); }

std::vector<wa::Request> of_program(const std::vector<wa::Request>& rs, int64_t program) {
  std::vector<wa::Request> out;
  for (const wa::Request& r : rs)
    if (r.program == program) out.push_back(r);
  return out;
}
std::vector<wa::Request> of_warp(const std::vector<wa::Request>& rs, int64_t program, int warp) {
  std::vector<wa::Request> out;
  for (const wa::Request& r : rs)
    if (r.program == program && r.warp == warp) out.push_back(r);
  return out;
}

void check_output(KernelCosts& k, const std::vector<float>& ref, const std::vector<float>& got,
                  const std::vector<uint32_t>& counts) {
  for (size_t i = 0; i < ref.size(); ++i) {
    if (counts[i] == 0) ++k.never_written;
    else if (std::memcmp(&ref[i], &got[i], sizeof(float)) != 0) ++k.mismatched;
  }
  k.matches.name = std::string(name(k.variant)) + "_matches_reference";
  k.matches.pass = k.mismatched == 0 && k.never_written == 0 && k.fault.kind == editable::Fault::None;
  if (k.matches.pass) k.matches.sentence = "yes, bit for bit";
  else if (k.never_written && k.mismatched)
    k.matches.sentence = printf_text("no: %" PRId64 " elements differ, %" PRId64 " never written", k.mismatched, k.never_written);
  else if (k.never_written) k.matches.sentence = printf_text("no: %" PRId64 " elements never written", k.never_written);
  else if (k.mismatched) k.matches.sentence = printf_text("no: %" PRId64 " of %zu elements differ", k.mismatched, ref.size());
  else k.matches.sentence = "no: " + k.fault_line;
}

// "no bank conflict" (degree 1: one pass), "32-way bank conflicts" (the worst request's degree).
std::string conflict_text(int degree) {
  return degree <= 1 ? "no bank conflict" : printf_text("%d-way bank conflicts", degree);
}

void describe(KernelCosts& k) {
  std::string s = printf_text("%s: in's loads %s sectors a request, out's stores %s", name(k.variant),
                              per_request_text(k.loads.sectors_per_request()).c_str(),
                              per_request_text(k.stores.sectors_per_request()).c_str());
  if (k.uses_tile)
    s += "; the tile's stores " + conflict_text(k.tile_stores.max_degree) + ", its loads " +
         conflict_text(k.tile_loads.max_degree) + " (" + per_request_text(k.tile_loads.wavefronts_per_request()) +
         (per_request_text(k.tile_loads.wavefronts_per_request()) == "1" ? " shared-memory pass" : " shared-memory passes") +
         " a load)";
  else s += "; no shared memory";
  k.line = s;
}

void run_kernel(KernelCosts& k, Backend b, const TransposeResult& r, const std::vector<float>& host,
                const std::vector<float>& ref, const editable::Source* src) {
  const size_t n = host.size();
  Buffer<float> in(b, n), out(b, n);
  in.upload(host);
  out.fill_bytes(0xFF);  // poison: NaN wherever no program stores
  transpose::TransposeTrace t;
  t.reset(b, r.rows, r.cols, kAccessEveryProgram);
  transpose::TransposeTraceView tv = t.view();
  k.fault = transpose::run(b, k.variant, in.data(), out.data(), r.rows, r.cols, &tv, src);
  if (k.fault.kind != editable::Fault::None)
    k.fault_line = std::string("edited kernel: ") + transpose::kernel_name(k.variant) + ": " + k.fault.text();
  check_output(k, ref, out.to_host(), t.write_count.to_host());
  const wa::Log in_log = wa::decode(t.in.to_host()), out_log = wa::decode(t.out.to_host());
  const wa::Log tile_log = k.variant == Variant::Naive ? wa::Log{} : wa::decode(t.tile.to_host());
  k.overflow = in_log.overflow || out_log.overflow || tile_log.overflow;
  k.uses_tile = !tile_log.requests.empty();
  k.loads = wa::global_totals(in_log.requests, wa::Kind::Load);
  k.stores = wa::global_totals(out_log.requests, wa::Kind::Store);
  k.tile_stores = wa::shared_totals(tile_log.requests, wa::Kind::Store);
  k.tile_loads = wa::shared_totals(tile_log.requests, wa::Kind::Load);
  k.chosen_loads = wa::global_totals(of_program(in_log.requests, r.program), wa::Kind::Load);
  k.chosen_stores = wa::global_totals(of_program(out_log.requests, r.program), wa::Kind::Store);
  k.chosen_tile_stores = wa::shared_totals(of_program(tile_log.requests, r.program), wa::Kind::Store);
  k.chosen_tile_loads = wa::shared_totals(of_program(tile_log.requests, r.program), wa::Kind::Load);
  k.warp_loads = of_warp(in_log.requests, r.program, r.warp);
  k.warp_stores = of_warp(out_log.requests, r.program, r.warp);
  k.warp_tile = of_warp(tile_log.requests, r.program, r.warp);
  describe(k);
}

// The one line a student reads first, from the three kernels' numbers.
std::string notice(const TransposeResult& r) {
  const KernelCosts &nv = r.of(Variant::Naive), &tl = r.of(Variant::Tiled), &pd = r.of(Variant::Padded);
  const std::string nl = per_request_text(nv.loads.sectors_per_request());
  const std::string ns = per_request_text(nv.stores.sectors_per_request());
  std::string s;
  s += ns != nl ? "naive's stores cost " + ns + " sectors a request against " + nl + " for its loads"
                : "naive's loads and stores cost " + nl + " sectors a request each";
  const std::string tlo = per_request_text(tl.loads.sectors_per_request());
  const std::string tst = per_request_text(tl.stores.sectors_per_request());
  s += tlo == tst ? "; tiled makes both " + tlo : "; tiled's loads and stores cost " + tlo + " and " + tst;
  if (tl.uses_tile && tl.tile_loads.max_degree > 1)
    s += printf_text(" but reads its tile with %d-way bank conflicts", tl.tile_loads.max_degree);
  else if (tl.uses_tile) s += " and reads its tile without bank conflicts";
  const bool tiled_conflicts = tl.uses_tile && tl.tile_loads.max_degree > 1;
  if (pd.uses_tile && pd.tile_loads.max_degree <= 1)
    s += tiled_conflicts ? "; padded's 33-float tile rows remove them" : "; so does padded";
  else if (pd.uses_tile)
    s += printf_text("; padded reads its tile with %d-way conflicts", pd.tile_loads.max_degree);
  return s + ".";
}

std::optional<std::vector<bench::Row>> g_measured;
std::mutex g_measured_mutex;

// "naive 1234 GB/s (0.29 of copy), ..." for the kernels whose speed is known.
void speed_figures(TransposeResult& r, const char* where) {
  std::string figures;
  for (Variant v : transpose::kVariants) {
    const Speed& s = r.speed[int(v)];
    if (!s.known) continue;
    figures += printf_text("%s%s %.0f GB/s (%.2f of copy)", figures.empty() ? "" : ", ", name(v), s.gbs, s.of_copy);
  }
  if (!figures.empty()) r.speed_line += (r.speed_line.empty() ? "" : " ") + std::string(where) + figures + ".";
}

void speed(TransposeResult& r) {
  if (r.backend != Backend::Cuda) return apply_recorded(r, peers::embedded());
  for (const bench::Row& row : measured_rows(r.backend)) {
    for (Variant v : transpose::kVariants)
      if (row.variant == name(v)) {
        r.speed[int(v)] = {true, row.gbs, row.ratio};
        if (row.ratio > 0) r.copy_gbs = row.gbs / row.ratio;
      }
  }
  r.measured = r.speed[0].known;
  r.speed_source = printf_text("measured here at %" PRId64 " x %" PRId64
                               " floats (the fast build) against a device-to-device copy of the same bytes, same run",
                               transpose::kBenchSide, transpose::kBenchSide);
  r.speed_title = printf_text("GB/s measured here, %" PRId64 " x %" PRId64 " floats", transpose::kBenchSide,
                              transpose::kBenchSide);
  speed_figures(r, "Here: ");
  if (r.measured) r.speed_line += printf_text(" The copy: %.0f GB/s.", r.copy_gbs);
}

}  // namespace

std::string per_request_text(double v) {
  if (std::fabs(v - std::round(v)) < 0.05) return printf_text("%.0f", v);
  return printf_text("%.1f", v);
}

std::string global_caption(const wa::Request& r, const std::string& what) {
  const wa::GlobalCost c = wa::global_cost(r);
  std::string s = printf_text("%s: %d lane%s, %d sector%s of 32 B in %d line%s: %" PRId64 " B used of %d B moved",
                              what.c_str(), r.lanes(), r.lanes() == 1 ? "" : "s",
                              c.sectors, c.sectors == 1 ? "" : "s", c.lines, c.lines == 1 ? "" : "s", c.bytes_used,
                              c.sectors * wa::kSectorBytes);
  const int ideal = wa::ideal_sectors(r.lanes(), r.bytes);
  if (c.sectors > ideal) s += printf_text(" (%d if coalesced)", ideal);
  return s;
}

std::string shared_caption(const wa::Request& r, const std::string& what) {
  const wa::SharedCost c = wa::shared_cost(r);
  int busiest = 0;
  for (int b = 1; b < wa::kBanks; ++b)
    if (c.words_in_bank[b] > c.words_in_bank[busiest]) busiest = b;
  int banks = 0;
  for (int b = 0; b < wa::kBanks; ++b) banks += c.words_in_bank[b] > 0;
  std::string s = printf_text("%s: %d lane%s", what.c_str(), r.lanes(), r.lanes() == 1 ? "" : "s");
  if (c.degree <= 1)
    return s + printf_text(", %d word%s in %d bank%s: 1 pass, no bank conflict", c.distinct_words,
                           c.distinct_words == 1 ? "" : "s", banks, banks == 1 ? "" : "s");
  return s + printf_text(", %d words in bank %d: %d passes, a %d-way bank conflict", c.words_in_bank[busiest], busiest,
                         c.wavefronts, c.degree);
}

void apply_recorded(TransposeResult& r, const peers::Recorded& rec) {
  r.speed_line = "GB/s need a GPU: the CPU backend runs a warp's lanes one after another, so sectors and bank "
                 "conflicts cost it nothing; the counts above are what a GPU pays.";
  r.recorded = false;
  if (const peers::Section* mem = rec.find("memory")) {
    for (const peers::Row& row : mem->rows)
      for (Variant v : transpose::kVariants)
        if (row.name == std::string("transpose ") + name(v) && !row.values.empty() && row.values[0] && !row.gbs.empty() &&
            row.gbs[0])
          r.speed[int(v)] = {true, *row.gbs[0], *row.values[0]};
    r.recorded = r.speed[0].known || r.speed[1].known || r.speed[2].known;
  }
  if (!r.recorded) {
    r.speed_line += " No GPU figure is recorded for the transposes yet (docs/perf/h200.json).";
    return;
  }
  r.speed_source = "recorded on " + peers::caption(rec) + " (docs/perf/h200.json)";
  r.speed_title = "GB/s recorded on " + rec.device;
  speed_figures(r, "Recorded on a GPU: ");
}

std::vector<ParamSpec> params() {
  return {int_param("rows", 1, kMaxSide, 64, "rows of in (out is cols x rows)"),
          int_param("cols", 1, kMaxSide, 96, "columns of in"),
          choice_param("variant", {"naive", "tiled", "padded"}, "tiled", "the kernel the warp views draw"),
          int_param("program", 0, (kMaxSide / transpose::kTile) * (kMaxSide / transpose::kTile) - 1, 0,
                    "the program (tile) whose warp is drawn: bx + grid_x * by"),
          int_param("warp", 0, transpose::kBlockRows - 1, 0, "the warp drawn: threads with threadIdx.y = warp")};
}

const std::vector<bench::Row>& measured_rows(Backend b) {
  static const std::vector<bench::Row> none;
  if (b != Backend::Cuda) return none;
  std::lock_guard<std::mutex> lock(g_measured_mutex);
  if (!g_measured) g_measured = transpose::bench_rows(b, false);
  return *g_measured;
}

TransposeResult run(Backend b, const ParamValues& settings) {
  const std::optional<editable::Source> e = editable::edited("transpose");
  return run(b, settings, e ? &*e : nullptr);
}

TransposeResult run(Backend b, const ParamValues& settings, const editable::Source* src) {
  TransposeResult r;
  r.backend = b;
  r.rows = settings.get_int("rows");
  r.cols = settings.get_int("cols");
  require_range("rows", r.rows, 1, kMaxSide);
  require_range("cols", r.cols, 1, kMaxSide);
  r.shown = transpose::parse_variant(settings.get_text("variant"));
  r.grid_x = transpose::grid_x(r.cols);
  r.grid_y = transpose::grid_y(r.rows);
  r.programs = r.grid_x * r.grid_y;
  r.program = settings.get_int("program");
  if (r.program >= r.programs)
    throw InputError(out_of_range_message("program", std::to_string(r.program),
                                          printf_text("[0, %" PRId64 "] (a %" PRId64 " x %" PRId64 " matrix is %" PRId64
                                                      " x %" PRId64 " tiles of 32 x 32)",
                                                      r.programs - 1, r.rows, r.cols, r.grid_y, r.grid_x)));
  r.program_x = r.program % r.grid_x;
  r.program_y = r.program / r.grid_x;
  r.warp = int(settings.get_int("warp"));
  require_range("warp", r.warp, 0, transpose::kBlockRows - 1);
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("transpose");
  if (src) r.source_line = "kernel: " + r.source_file + " (edited)";
  std::vector<float> host(size_t(r.rows * r.cols)), ref(host.size());
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i);  // distinct values: a misplaced one shows
  transpose::reference(host.data(), ref.data(), r.rows, r.cols);
  for (Variant v : transpose::kVariants) {
    r.kernels[int(v)].variant = v;
    run_kernel(r.kernels[int(v)], b, r, host, ref, src);
  }
  r.notice = notice(r);
  r.grid_line = printf_text("in is %" PRId64 " x %" PRId64 ", out %" PRId64 " x %" PRId64 ": %" PRId64 " x %" PRId64
                            " = %" PRId64 " programs of 32 x 8 threads, each moving one 32 x 32 tile; program %" PRId64
                            " moves in's rows %" PRId64 "..%" PRId64 ", columns %" PRId64 "..%" PRId64,
                            r.rows, r.cols, r.cols, r.rows, r.grid_x, r.grid_y, r.programs, r.program,
                            r.program_y * 32, std::min(r.rows, r.program_y * 32 + 32) - 1, r.program_x * 32,
                            std::min(r.cols, r.program_x * 32 + 32) - 1);
  r.warp_line = printf_text("warp %d of program %" PRId64 " is its threads with threadIdx.y = %d: lane L is threadIdx.x = L; "
                            "each thread moves 4 elements, 8 rows apart, so the warp makes 4 loads and 4 stores",
                            r.warp, r.program, r.warp);
  speed(r);
  return r;
}

Report report(const TransposeResult& r) {
  Report rep;
  rep.panel = "transpose";
  rep.lines.push_back(r.notice);
  rep.lines.push_back(r.grid_line);
  for (const KernelCosts& k : r.kernels) {
    rep.checks.push_back({k.matches.name, k.matches.pass, std::string(name(k.variant)) + " matches reference: " + k.matches.sentence});
    rep.lines.push_back(k.line);
    if (k.overflow) rep.lines.push_back(std::string(name(k.variant)) + ": an access log ran out of room; later accesses are not counted");
  }
  rep.lines.push_back(r.warp_line);
  if (!r.speed_line.empty()) rep.lines.push_back(r.speed_line);
  if (!r.speed_source.empty()) rep.lines.push_back(r.speed_source);
  if (r.edited) {
    rep.lines.push_back(r.source_line);
    for (const KernelCosts& k : r.kernels)
      if (!k.fault_line.empty()) rep.lines.push_back(k.fault_line);
  }
  rep.numbers = {{"rows", r.rows}, {"cols", r.cols}, {"programs", r.programs}, {"program", r.program}, {"warp", r.warp}};
  for (const KernelCosts& k : r.kernels) {
    const std::string v = name(k.variant);
    rep.numbers[v + "_load_sectors_per_request"] = k.loads.sectors_per_request();
    rep.numbers[v + "_store_sectors_per_request"] = k.stores.sectors_per_request();
    rep.numbers[v + "_load_requests"] = k.loads.requests;
    rep.numbers[v + "_store_requests"] = k.stores.requests;
    rep.numbers[v + "_tile_store_degree"] = k.tile_stores.max_degree;
    rep.numbers[v + "_tile_load_degree"] = k.tile_loads.max_degree;
    rep.numbers[v + "_tile_load_wavefronts_per_request"] = k.tile_loads.wavefronts_per_request();
    rep.numbers[v + "_mismatched"] = k.mismatched;
    rep.numbers[v + "_never_written"] = k.never_written;
    if (r.speed[int(k.variant)].known) {
      rep.numbers[v + "_gbs"] = r.speed[int(k.variant)].gbs;
      rep.numbers[v + "_of_copy"] = r.speed[int(k.variant)].of_copy;
    }
    if (r.edited) rep.numbers[v + "_fault"] = k.fault.kind == editable::Fault::None ? 0 : 1;
  }
  if (r.measured) rep.numbers["copy_gbs"] = r.copy_gbs;
  return rep;
}

Entry entry() {
  Entry e;
  e.panel = "transpose";
  e.summary = "rung 1½: a warp's loads and stores as sectors and bank conflicts, naive vs tiled vs padded";
  e.params = [] { return params(); };
  e.run = [](Backend b, const ParamValues& v) {
    Report rep = report(run(b, v));
    rep.settings = settings_text(v);
    return rep;
  };
  return e;
}

}  // namespace kl::study::transpose_study
