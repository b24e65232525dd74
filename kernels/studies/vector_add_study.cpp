// Rung 1's study: the traced launch, its check against the host reference, and what the trace says.
#include "kernels/studies/vector_add_study.h"

#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/runtime/errors.h"
#include "kernels/rungs/vector_add.h"

namespace kl::study {
namespace {

constexpr int kTritonDefaultWarps = 4;  // triton.Config's num_warps default

std::string printf_text(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string printf_text(const char* f, ...) {
  char buf[800];
  va_list a;
  va_start(a, f);
  std::vsnprintf(buf, sizeof buf, f, a);
  va_end(a);
  return buf;
}

// Small integers in [-100, 100] from the seed: sums are exact in float32, so the check asks for 0 diff.
void make_inputs(VectorAddResult& r, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-100, 100);
  r.x.resize(size_t(r.n));
  r.y.resize(size_t(r.n));
  for (int64_t i = 0; i < r.n; ++i) r.x[size_t(i)] = float(d(rng)), r.y[size_t(i)] = float(d(rng));
}

void check_output(VectorAddResult& r) {
  std::vector<float> ref(static_cast<size_t>(r.n));
  vector_add::reference(r.x.data(), r.y.data(), ref.data(), r.n);
  const std::vector<float> got = r.out.to_host();
  for (int64_t i = 0; i < r.n; ++i) {
    if (std::isnan(got[size_t(i)])) ++r.never_written;
    else r.max_abs_diff = std::max(r.max_abs_diff, double(std::fabs(got[size_t(i)] - ref[size_t(i)])));
  }
  Check& c = r.matches_reference;
  c.name = "matches_reference";
  c.pass = r.never_written == 0 && r.max_abs_diff == 0;
  c.sentence = r.never_written ? printf_text("no, %" PRId64 " elements never written", r.never_written)
                               : printf_text("%s, max abs diff %g", c.pass ? "yes" : "no", r.max_abs_diff);
}

// An edited kernel's access past the end fails the check whatever the elements hold: this tracer caught the
// access and did not perform it; a plain kernel on a GPU would have, usually silently.
void note_fault(VectorAddResult& r) {
  const editable::Fault& f = r.fault;
  if (f.kind == editable::Fault::None) return;
  Check& c = r.matches_reference;
  c.pass = false;
  if (f.kind == editable::Fault::OutOfBounds && f.index >= r.n) {
    const int64_t over = (r.offsets - r.n) * int64_t(sizeof(float));
    c.sentence = printf_text("no: the %" PRId64 " elements %s (max abs diff %g), but the kernel %s up to %" PRId64
                             " bytes past the end of %s's %" PRId64 ": this tracer caught the first and did not "
                             "perform it; on a GPU a plain kernel would, usually silently (%s)",
                             r.n, r.never_written ? "written" : "all match", r.max_abs_diff,
                             f.store ? "stored" : "read", over, f.tensor.c_str(), r.n * int64_t(sizeof(float)),
                             f.store ? "corrupting whatever lies there" : "reading whatever lies there");
  } else {
    c.sentence = r.fault_line + "; " + c.sentence;
  }
}

void check_trace(VectorAddResult& r) {
  const std::vector<uint32_t> counts = r.trace.write_count.to_host();
  const std::vector<uint8_t> states = r.trace.lane_state.to_host();
  for (uint32_t c : counts) r.stored_once += c == 1;
  for (uint8_t s : states) r.masked_recorded += s == kLaneMasked;
  Check& c = r.trace_check;
  c.name = "trace";
  c.pass = r.stored_once == r.n && r.masked_recorded == r.masked;
  const bool unmasked_past_n = r.fault.kind == editable::Fault::OutOfBounds && r.fault.index >= r.n;
  c.sentence = unmasked_past_n
                   ? printf_text("%" PRId64 " of %" PRId64 " elements stored exactly once; %" PRId64 " offsets past n "
                                 "with the mask off (expected %" PRId64 "), but the kernel's %s %s does not use the "
                                 "mask", r.stored_once, r.n, r.masked_recorded, r.masked,
                                 r.fault.store ? "store to" : "load from", r.fault.tensor.c_str())
                   : printf_text("%" PRId64 " of %" PRId64 " elements stored exactly once; %" PRId64
                                 " masked offsets recorded (expected %" PRId64 ")",
                                 r.stored_once, r.n, r.masked_recorded, r.masked);
  // An edited kernel that misbehaved fails the trace check whatever it stored, and says what it did first.
  if (r.fault.kind != editable::Fault::None) {
    c.pass = false;
    c.sentence = r.fault_line + "; " + c.sentence;
  }
}

void describe(VectorAddResult& r) {
  r.grid_line = printf_text("grid = ceil(n / BLOCK_SIZE) = ceil(%" PRId64 " / %d) = %" PRId64 " programs,  %" PRId64
                            " offsets,  %" PRId64 " masked%s",
                            r.n, r.block_size, r.grid, r.offsets, r.masked,
                            r.masked > 0 ? " (all in the last program)" : "");
  // Triton's default num_warps = 4: 128 threads share a program's BLOCK_SIZE elements. This build's traced
  // kernel gives each element its own thread up to 1024 (its launch says how many): a choice, not the rule.
  const int threads = int(vector_add::detail::traced_launch(nullptr, nullptr, nullptr, r.n, r.block_size, nullptr).block.x);
  const int triton = kTritonDefaultWarps * 32;
  const std::string per_thread =
      r.block_size >= triton ? printf_text("%d elements each", r.block_size / triton)
                             : printf_text("more threads than elements, so some hold copies");
  r.block_line = printf_text("BLOCK_SIZE = %d counts elements, not threads: each program covers offsets pid * %d + "
                             "arange(%d). Triton runs a program on num_warps x 32 threads, by default 4 x 32 = %d "
                             "(%s); this build's traced kernel happens to give each element its own thread up to "
                             "1024, so here %d threads%s",
                             r.block_size, r.block_size, r.block_size, triton, per_thread.c_str(), threads,
                             threads < r.block_size ? ", each taking several offsets" : "");
  const int64_t last = r.grid - 1, first = last * r.block_size, in_last = r.n - first;
  const editable::Fault& f = r.fault;
  r.accessed_past_n = f.kind == editable::Fault::OutOfBounds && f.index >= r.n;
  r.fault_offset = r.accessed_past_n ? f.index : -1;
  r.past_n_label = r.accessed_past_n ? "hatched = offset past n, accessed unmasked (refused)" : "hatched = masked offset";
  r.past_n_tooltip = r.accessed_past_n
                         ? printf_text("offset past n: this kernel does not mask its %s %s, so the access is out of "
                                       "bounds, refused by the bounds check (the first: %s[%" PRId64 "], lane %" PRId64 ")",
                                       f.store ? "store to" : "load from", f.tensor.c_str(), f.tensor.c_str(), f.index,
                                       f.lane)
                         : "masked offset: no load, no store";
  if (r.masked > 0 && r.accessed_past_n)
    r.tail_line = printf_text("pid %" PRId64 ": offsets %" PRId64 "..%" PRId64 " (arange 0..%" PRId64
                              ") store; offsets %" PRId64 "..%" PRId64 " (arange %" PRId64 "..%d) fail offsets < n, "
                              "but this kernel's %s %s is not masked: each is out of bounds, refused by the bounds "
                              "check, the first (%s[%" PRId64 "] by lane %" PRId64 ") reported above",
                              last, first, r.n - 1, in_last - 1, r.n, first + r.block_size - 1, in_last,
                              r.block_size - 1, f.store ? "store to" : "load from", f.tensor.c_str(), f.tensor.c_str(),
                              f.index, f.lane);
  else if (r.masked > 0)
    r.tail_line = printf_text("pid %" PRId64 ": offsets %" PRId64 "..%" PRId64 " (arange 0..%" PRId64
                              ") store; offsets %" PRId64 "..%" PRId64 " (arange %" PRId64 "..%d) fail offsets < n "
                              "and are masked",
                              last, first, r.n - 1, in_last - 1, r.n, first + r.block_size - 1, in_last,
                              r.block_size - 1);
  else
    r.tail_line = printf_text("pid %" PRId64 ": every offset stores (n is a multiple of BLOCK_SIZE, nothing masked)",
                              last);
}

void notice(VectorAddResult& r) {
  const editable::Fault& f = r.fault;
  if (r.accessed_past_n)
    r.notice = printf_text("this kernel's %s %s is not masked: it reaches up to %" PRId64 " bytes past the end "
                           "(offsets %" PRId64 "..%" PRId64 "); this tracer refused it, a plain kernel on a GPU "
                           "would not", f.store ? "store to" : "load from", f.tensor.c_str(),
                           r.masked * int64_t(sizeof(float)), r.n, r.offsets - 1);
  else if (r.never_written > 0)
    r.notice = printf_text("%" PRId64 " of the %" PRId64 " elements were never written (red checker): no program "
                           "stored them", r.never_written, r.n);
  else if (r.masked > 0)
    r.notice = printf_text("ceil(%" PRId64 " / %d) = %" PRId64 " programs cover %" PRId64 " offsets: the last "
                           "program's %" PRId64 " offsets past n are masked off (hatched), so nothing is loaded or "
                           "stored past the end", r.n, r.block_size, r.grid, r.offsets, r.masked);
  else
    r.notice = printf_text("n = %" PRId64 " is a multiple of BLOCK_SIZE = %d: %" PRId64 " programs, nothing masked; "
                           "make n a non-multiple to see the mask at work", r.n, r.block_size, r.grid);
}

}  // namespace

// The panel's parameters: the rung's block_size spec, with the panel's own default (an override the
// `list` command shows beside the kernel's); n and seed belong to the panel's synthetic inputs.
std::vector<ParamSpec> vector_add_params() {
  return {int_param("n", 1, vector_add::kMaxN, 1000, "number of elements"),
          panel_override(vector_add::param::block_size(), "256",
                         "opens on n=1000 as four programs, the last one's lanes masked past n"),
          int_param("seed", 0, 1 << 30, 1, "seed of the synthetic inputs (small integers)")};
}

VectorAddResult run_vector_add(Backend b, const ParamValues& settings) {
  const std::optional<editable::Source> e = editable::edited("vector-add");
  return run_vector_add(b, settings, e ? &*e : nullptr);
}

VectorAddResult run_vector_add(Backend b, const ParamValues& settings, const editable::Source* src) {
  VectorAddResult r;
  r.backend = b;
  r.n = settings.get_int("n");
  r.block_size = int(settings.get_int("block_size"));
  require_range("n", r.n, 1, vector_add::kMaxN);
  vector_add::detail::check_shape(r.n, r.block_size);
  r.grid = (r.n + r.block_size - 1) / r.block_size;
  r.offsets = r.grid * r.block_size;
  r.masked = r.offsets - r.n;
  // Host bytes per element this computation holds at once: inputs, reference and read-backs (21),
  // plus the CPU backend's buffers and trace (21). Refused up front rather than failing half-way.
  mem::require_host(uint64_t(r.n) * (b == Backend::Cpu ? 42 : 21), "vector-add panel, n=" + std::to_string(r.n));
  make_inputs(r, uint32_t(settings.get_int("seed")));
  Buffer<float> x(b, size_t(r.n)), y(b, size_t(r.n));
  x.upload(r.x);
  y.upload(r.y);
  r.out.resize(b, size_t(r.n));
  r.out.fill_bytes(0xFF);  // poison: NaN wherever no program stores
  r.trace.reset(b, r.n, r.block_size);
  ElementTraceView tv = r.trace.view();
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("vector-add");
  r.fault = vector_add::run_traced(b, x.data(), y.data(), r.out.data(), r.n, r.block_size, &tv, src);
  if (r.fault.kind != editable::Fault::None) r.fault_line = "edited kernel: " + r.fault.text();
  check_output(r);
  note_fault(r);
  check_trace(r);
  describe(r);
  notice(r);
  return r;
}

Report vector_add_report(const VectorAddResult& r) {
  Report rep;
  rep.panel = "vector-add";
  rep.notice = r.notice;
  rep.checks = {{r.matches_reference.name, r.matches_reference.pass, "matches reference: " + r.matches_reference.sentence},
                {r.trace_check.name, r.trace_check.pass, "trace: " + r.trace_check.sentence}};
  rep.lines = {r.grid_line, r.block_line, r.tail_line};
  if (r.edited) {
    rep.lines.push_back("kernel: " + r.source_file + " (edited)");
    if (!r.fault_line.empty()) rep.lines.push_back(r.fault_line);
  }
  rep.numbers = {{"n", r.n},
                 {"block_size", r.block_size},
                 {"programs", r.grid},
                 {"offsets", r.offsets},
                 {"masked", r.masked},
                 {"max_abs_diff", r.max_abs_diff},
                 {"never_written", r.never_written},
                 {"stored_once", r.stored_once},
                 {"masked_recorded", r.masked_recorded}};
  if (r.edited) rep.numbers["fault"] = r.fault.kind == editable::Fault::None ? 0 : 1;
  return rep;
}

Entry vector_add_entry() {
  Entry e;
  e.panel = "vector-add";
  e.summary = "the launch grid: programs, offsets, the masked tail, checked against the reference and the trace";
  e.params = vector_add_params;
  e.run = [](Backend b, const ParamValues& v) {
    Report rep = vector_add_report(run_vector_add(b, v));
    rep.settings = settings_text(v);
    return rep;
  };
  return e;
}

}  // namespace kl::study
