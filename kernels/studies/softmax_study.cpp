// Rung 3's study (see softmax_study.h): the experiment the softmax panel draws, computed here.
#include "kernels/studies/softmax_study.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"
#include "kernels/studies/kernel_resources.h"

namespace kl::study {
namespace {

using softmax::Variant;
constexpr int64_t kBuggyBlock = softmax::kBuggyBlock;
constexpr int64_t kMaxCols = 8192, kMaxRows = 64;  // the panel's picture (the kernels take more)

std::string format(const char* f, ...) {
  va_list a, b;
  va_start(a, f);
  va_copy(b, a);
  const int n = std::vsnprintf(nullptr, 0, f, a);
  va_end(a);
  std::string s(size_t(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(s.data(), s.size(), f, b);
  va_end(b);
  s.resize(size_t(std::max(n, 0)));
  return s;
}

// "65,536": thousands separated, as the texts write them.
std::string grouped(int64_t v) {
  std::string s = std::to_string(v), o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) o += ',';
    o += s[i];
  }
  return o;
}

// Max abs diff against the reference over the finite elements a kernel wrote (the recorded writer says
// which; an inf or NaN it wrote is counted apart, by count_nonfinite).
double written_diff(const std::vector<float>& out, const std::vector<double>& ref, const std::vector<int32_t>& writer) {
  double diff = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (writer[i] >= 0 && std::isfinite(out[i])) diff = std::max(diff, std::fabs(double(out[i]) - ref[i]));
  return diff;
}

// Written elements that are inf or NaN; `first` gets the first one's index (or keeps -1).
int64_t count_nonfinite(const std::vector<float>& out, const std::vector<int32_t>& writer, int64_t& first) {
  int64_t count = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (writer[i] >= 0 && !std::isfinite(out[i])) {
      if (count++ == 0) first = int64_t(i);
    }
  return count;
}

// Runs `v` traced on x (already where b runs) into a NaN-poisoned output; the edited kernel's fault, if any.
editable::Fault run_traced(Backend b, Variant v, const Buffer<float>& x, Buffer<float>& out,
                           softmax::SoftmaxTrace& trace, int64_t rows, int64_t n, const editable::Source* src) {
  out.resize(b, size_t(rows * n));
  out.fill_bytes(0xFF);  // poison: NaN wherever no program stores
  trace.reset(b, rows, n);
  softmax::SoftmaxTraceView tv = trace.view();
  return softmax::run(b, v, x.data(), out.data(), rows, n, &tv, softmax::kDefaultChunk, nullptr, src);
}

void fill_checks(SoftmaxBug& r, const std::vector<uint32_t>& count_fixed) {
  const int64_t N = r.rows * r.n_cols;
  const bool once = std::all_of(count_fixed.begin(), count_fixed.end(), [](uint32_t c) { return c == 1; });
  r.buggy.name = "buggy_matches_reference";
  r.buggy.pass = r.unwritten_buggy == 0 && r.nonfinite_buggy == 0 && r.diff_buggy < 1e-6;
  if (r.nonfinite_buggy)
    r.buggy.sentence = format("no: %" PRId64 " of %" PRId64 " written elements are inf or NaN; the finite ones off by "
                              "up to %.3g (max abs diff)", r.nonfinite_buggy, N, r.diff_buggy);
  else if (r.unwritten_buggy)
    r.buggy.sentence = format("no: %" PRId64 " of %" PRId64 " elements never written (NaN); written ones off by "
                              "up to %.3g (max abs diff)", r.unwritten_buggy, N, r.diff_buggy);
  else
    r.buggy.sentence = format("%s, max abs diff %.3g", r.buggy.pass ? "yes" : "no", r.diff_buggy);
  r.fixed.name = "fixed_matches_reference";
  r.fixed.pass = r.unwritten_fixed == 0 && r.nonfinite_fixed == 0 && once && r.diff_fixed < 1e-6;
  if (r.nonfinite_fixed)
    r.fixed.sentence = format("no: %" PRId64 " of %" PRId64 " written elements are inf or NaN; the finite ones off by "
                              "up to %.3g (max abs diff)", r.nonfinite_fixed, N, r.diff_fixed);
  else if (r.unwritten_fixed)
    r.fixed.sentence = format("no: %" PRId64 " of %" PRId64 " elements never written (NaN); max abs diff %.3g",
                              r.unwritten_fixed, N, r.diff_fixed);
  else
    r.fixed.sentence = format("%s, max abs diff %.3g, %s", r.fixed.pass ? "yes" : "no", r.diff_fixed,
                              once ? "every element written once" : "some elements written more than once");
  // An edited kernel that misbehaved fails both checks whatever it stored, and says what it did first.
  if (r.fault.kind != editable::Fault::None)
    for (Check* c : {&r.buggy, &r.fixed}) c->pass = false, c->sentence = r.fault_line + "; " + c->sentence;
}

// The largest |row sum - 1| over the rows (NaN rows count as infinitely far).
double worst_row_sum(const std::vector<double>& sums) {
  double worst = 0;
  for (double v : sums) worst = std::isnan(v) ? HUGE_VAL : std::max(worst, std::fabs(v - 1.0));
  return worst;
}

// What the recorded writers say was written: "columns 0..c-1" when every row got the same prefix, else a count.
void written_texts(const std::vector<int32_t>& writer, int64_t rows, int64_t n, std::string& written,
                   std::string& unwritten) {
  int64_t prefix = -1, count = 0;
  bool same_prefix = true;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t c = 0;
    while (c < n && writer[size_t(row * n + c)] >= 0) ++c;
    for (int64_t k = c; k < n; ++k) same_prefix = same_prefix && writer[size_t(row * n + k)] < 0;
    for (int64_t k = 0; k < n; ++k) count += writer[size_t(row * n + k)] >= 0;
    if (prefix < 0) prefix = c;
    same_prefix = same_prefix && c == prefix;
  }
  unwritten.clear();
  if (count == rows * n) {
    written = format("written (from the trace): all %" PRId64 " columns of every row", n);
  } else if (same_prefix && prefix > 0) {
    written = format("written (from the trace): columns 0..%" PRId64, prefix - 1);
    unwritten = format("  never written: %" PRId64 "..%" PRId64 " (red/black)", prefix, n - 1);
  } else {
    written = format("written (from the trace): %" PRId64 " of %" PRId64 " elements", count, rows * n);
    unwritten = format("  never written: %" PRId64 " (red/black)", rows * n - count);
  }
}

// The columns every row's program wrote, 0..c-1 with nothing past, when all rows agree on c; else -1.
int64_t covered_prefix(const std::vector<int32_t>& writer, int64_t rows, int64_t n) {
  int64_t prefix = -1;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t c = 0;
    while (c < n && writer[size_t(row * n + c)] >= 0) ++c;
    for (int64_t k = c; k < n; ++k)
      if (writer[size_t(row * n + k)] >= 0) return -1;
    if (prefix >= 0 && c != prefix) return -1;
    prefix = c;
  }
  return prefix;
}

void fill_sentences(SoftmaxBug& r) {
  const int64_t n = r.n_cols;
  r.truncated = n > kBuggyBlock;
  if (r.truncated)
    r.headline = format("BLOCK_SIZE = 1024 but n_cols = %" PRId64 ": columns 1024..%" PRId64 " are never written (%" PRId64
                        " of %" PRId64 " per row), and the written ones are normalised over the first 1024 only.",
                        n, n - 1, n - kBuggyBlock, n);
  else
    r.headline = format("n_cols = %" PRId64 " <= 1024: one BLOCK_SIZE = 1024 program covers the whole row; buggy and "
                        "fixed agree. Push n_cols past 1024 to see the bug.", n);
  r.buggy_caption = "buggy: BLOCK_SIZE = 1024 (fixed constant)";
  r.fixed_caption = format("fixed: BLOCK_SIZE = next_power_of_2(%" PRId64 ") = %" PRId64, n, r.block_fixed);
  // The caption follows the kernel that ran: an edited kernel whose programs covered fewer columns than the
  // BLOCK_SIZE passed (the gallery's hard-coded 1024) is captioned by what its trace shows it covered.
  const int64_t covered = covered_prefix(r.writer_fixed, r.rows, n);
  if (r.edited && covered >= 0 && covered < n)
    r.fixed_caption = format("fixed (edited kernel): BLOCK_SIZE = %" PRId64 " passed, but it covered columns 0..%" PRId64
                             " only%s", r.block_fixed, covered - 1,
                             (covered & (covered - 1)) == 0 && covered > 0
                                 ? format(", as BLOCK_SIZE = %" PRId64 " would", covered).c_str() : "");
  std::string fixed_unwritten;
  written_texts(r.writer_buggy, r.rows, n, r.buggy_written, r.buggy_unwritten);
  written_texts(r.writer_fixed, r.rows, n, r.fixed_written, fixed_unwritten);
  r.fixed_written += fixed_unwritten;
  r.inputs_sentence = format("Inputs: x from the standard normal N(0, 1), as torch.randn draws it (seed %" PRId64 "). "
                             "The exact max abs diff depends on the draw: the write-up's 0.00978 at n_cols = 2000 "
                             "was one torch.randn draw; this is another draw of the same distribution.", r.seed);
  if (r.x_scale != 1.0) r.inputs_sentence += format(" Scaled: x = %g * N(0, 1).", r.x_scale);
  const double worst_buggy = worst_row_sum(r.sum_buggy_written), worst_fixed = worst_row_sum(r.sum_fixed);
  const bool fixed_nan_rows = std::any_of(r.sum_fixed.begin(), r.sum_fixed.end(), [](double v) { return std::isnan(v); });
  const bool fixed_has_unwritten = std::count(r.writer_fixed.begin(), r.writer_fixed.end(), -1) > 0;
  if (fixed_nan_rows && fixed_has_unwritten)  // an edited kernel that leaves elements of fixed's rows unwritten
    r.row_sums_sentence = "Fixed's rows hold never-written (NaN) elements: its programs no longer cover whole rows.";
  else if (fixed_nan_rows)  // an edited kernel that writes inf or NaN
    r.row_sums_sentence = "Fixed's row sums are NaN: the kernel wrote inf or NaN into its rows (the line above says where).";
  else if (worst_buggy > 1e-4 || worst_fixed > 1e-4)  // an edited kernel's rows (the shipped ones sum to 1)
    r.row_sums_sentence = format("Rows that do not sum to 1: buggy's written entries up to %.3g away, fixed's up to "
                                 "%.3g (row 0: buggy %.6g, fixed %.6g).", worst_buggy, worst_fixed,
                                 r.sum_buggy_written[0], r.sum_fixed[0]);
  else if (r.truncated && r.ref_head_mass[0] < 0.9995)
    r.row_sums_sentence = format("Row 0's written entries (buggy) sum to 1, yet the reference puts only %.1f%% of the "
                                 "row's mass in those columns: every written value is %.2fx too large, and the columns "
                                 "past 1024 are never written.",
                                 100.0 * r.ref_head_mass[0], 1.0 / r.ref_head_mass[0]);
  else if (r.truncated)  // a large x_scale: one large x can hold the row's mass in the first 1024 columns
    r.row_sums_sentence = format("Row 0's written entries (buggy) sum to 1, and the reference puts %.1f%% of the row's "
                                 "mass in those columns too (its largest x is there), so they are close to right; the "
                                 "columns past 1024 are still never written.",
                                 100.0 * r.ref_head_mass[0]);
  else
    r.row_sums_sentence = "Every row sums to 1 in both kernels.";
  const int64_t fixed_unwritten_count = std::count(r.writer_fixed.begin(), r.writer_fixed.end(), -1);
  if (r.nonfinite_buggy || r.nonfinite_fixed)
    r.notice = format("exp(x) overflowed: %" PRId64 " written elements of fixed are inf or NaN (x up to %.4g); a "
                      "kernel that subtracts the row max first never overflows", r.nonfinite_fixed,
                      double(r.first_nonfinite_x));
  else if (fixed_unwritten_count > 0)
    r.notice = format("fixed too leaves %" PRId64 " elements never written (red): the kernel that ran covers fewer "
                      "columns than the BLOCK_SIZE = %" PRId64 " the host passes", fixed_unwritten_count, r.block_fixed);
  else if (!r.fixed.pass)
    r.notice = "fixed does not match the reference: " + r.fixed.sentence;
  else if (r.truncated)
    r.notice = format("BLOCK_SIZE = 1024 but n_cols = %" PRId64 ": buggy never writes columns 1024..%" PRId64 " (red) "
                      "and its written values are %.2fx too large; BLOCK_SIZE = next_power_of_2 = %" PRId64
                      " covers the row", n, n - 1, 1.0 / std::max(r.ref_head_mass[0], 1e-300), r.block_fixed);
  else
    r.notice = format("n_cols = %" PRId64 " fits in BLOCK_SIZE = 1024: buggy and fixed agree; push n_cols past 1024 "
                      "to see the bug", n);
  if (r.nonfinite_buggy || r.nonfinite_fixed)
    r.nonfinite_sentence = format("inf/NaN where the inputs are large: %" PRId64 " written elements of buggy and %" PRId64
                                  " of fixed are not finite; the first at row %" PRId64 ", column %" PRId64
                                  " (x = %.4g; x_scale = %g). exp(x) overflows float32 past x = 88.7 unless the row "
                                  "max is subtracted first.",
                                  r.nonfinite_buggy, r.nonfinite_fixed, r.first_nonfinite_row, r.first_nonfinite_col,
                                  double(r.first_nonfinite_x), r.x_scale);
}

void fill_sums(SoftmaxBug& r) {
  const int64_t n = r.n_cols, rows = r.rows;
  r.vmax = 0;
  r.sum_buggy_all.assign(size_t(rows), 0.0);
  r.sum_buggy_written.assign(size_t(rows), 0.0);
  r.sum_fixed.assign(size_t(rows), 0.0);
  r.ref_head_mass.assign(size_t(rows), 0.0);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t c = 0; c < n; ++c) {
      const size_t i = size_t(row * n + c);
      const float hb = r.out_buggy[i], hf = r.out_fixed[i];
      if (r.writer_buggy[i] < 0) ++r.unwritten_buggy;
      else r.sum_buggy_written[size_t(row)] += hb;
      if (r.writer_fixed[i] < 0) ++r.unwritten_fixed;
      r.sum_buggy_all[size_t(row)] += hb;  // NaN once any column is unwritten
      r.sum_fixed[size_t(row)] += hf;
      if (c < kBuggyBlock) r.ref_head_mass[size_t(row)] += r.ref[i];
      if (std::isfinite(hb)) r.vmax = std::max(r.vmax, hb);
      if (std::isfinite(hf)) r.vmax = std::max(r.vmax, hf);
    }
  if (!(r.vmax > 0)) r.vmax = 1;
}

// Standard normal values (as torch.randn draws them), by Box-Muller from the generator's raw 32-bit words:
// the same numbers for a seed on every platform (std::normal_distribution's algorithm is the library's).
std::vector<float> normal_input(size_t count, std::mt19937& rng) {
  auto open01 = [&rng] { return (double(rng()) + 0.5) / 4294967296.0; };  // in (0, 1): log() stays finite
  std::vector<float> x(count);
  for (size_t i = 0; i < count; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(open01())), t = 2.0 * 3.14159265358979323846 * open01();
    x[i] = float(r * std::cos(t));
    if (i + 1 < count) x[i + 1] = float(r * std::sin(t));
  }
  return x;
}

// A rising wave plus noise: the running max moves in several chunks, so the rescale is visible.
std::vector<float> online_input(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed + 13u);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const double t = n > 1 ? double(c) / double(n - 1) : 0.0;
      x[size_t(r * n + c)] = float(4.0 * t + 1.2 * std::sin(6.0 * 3.14159265 * t + r)) + d(rng);
    }
  return x;
}

std::string settings_text(const ParamValues& p, std::initializer_list<const char*> keys) {
  std::string s;
  for (const char* k : keys) s += (s.empty() ? "" : ", ") + std::string(k) + "=" + p.get_text(k);
  return s;
}

}  // namespace

std::vector<ParamSpec> softmax_params() {
  return {int_param("n_cols", 1, kMaxCols, 2000, "columns per row (the buggy kernel covers 1024)"),
          int_param("rows", 1, kMaxRows, 12, "rows of x shown"),
          int_param("seed", 0, 1 << 30, 1, "seed of the synthetic inputs (standard normal, as torch.randn)"),
          float_param("x_scale", 0.01, 1000.0, 1.0,
                      "inputs x_scale * N(0, 1); ~100 overflows exp(x) unless the row max is subtracted"),
          choice_param("view", {"bug", "online"}, "bug", "bug: buggy vs fixed; online: running max/sum"),
          panel_override(softmax::param::chunk(), "256", "the online view opens on n_cols=2000 in eight chunks"),
          int_param("trace_row", 0, kMaxRows - 1, 0, "online: the row whose chunks are recorded")};
}

SoftmaxLimits softmax_limits(Backend b) {
  const DeviceInfo d = device_info(b);
  SoftmaxLimits l;
  l.build_max_cols = softmax::fixed_max_cols(d);
  l.threads_per_block = d.max_threads_per_block;
  l.values_per_thread = softmax::kMaxRowRegsPerThread;
  l.hw_regs_per_thread_at_full_block = l.hw_regs_per_block / std::max(1, l.threads_per_block);
  l.device = d.name;
  l.kernel_threads = int(softmax::detail::traced_launch(Variant::Fixed, nullptr, nullptr, 1, l.build_max_cols, nullptr).block.x);
  l.kernel_values_per_thread = l.build_max_cols / l.kernel_threads;
  const KernelResources kr = kernel_resources(b, "softmax.cu", "softmax_traced");
  l.kernel_registers = kr.registers;
  l.kernel_stack_bytes = kr.stack_bytes;
  l.kernel_origin = kr.origin;
  const std::string where =
      l.kernel_stack_bytes > 0
          ? format("so it lives in local memory, not registers: a %" PRId64 "-byte stack frame per thread (%d "
                   "registers; %s)", l.kernel_stack_bytes, l.kernel_registers, l.kernel_origin.c_str())
          : format("yet the compiler kept it in registers (%d, no stack frame; %s)", l.kernel_registers,
                   l.kernel_origin.c_str());
  l.sentence = format(
      "The widest row fixed takes is this build's choice: %d threads x %d row values each = %s columns. The kernel "
      "that runs it is launched as Triton picks num_warps (16 from BLOCK_SIZE 4096): %d threads x %" PRId64 " row "
      "values each, in an array float v[64] indexed by a bound known only at run time, %s. The chip's register "
      "file: %s 32-bit registers per SM and per block, at most %d per thread (%" PRId64 " each when a block has %d "
      "threads). Past %s columns this build refuses fixed and points to online; Triton compiles a larger "
      "BLOCK_SIZE and spills the row to local memory (it refuses only past 2^20 elements per tensor).",
      l.threads_per_block, l.values_per_thread, grouped(l.build_max_cols).c_str(), l.kernel_threads,
      l.kernel_values_per_thread, where.c_str(), grouped(l.hw_regs_per_block).c_str(), l.hw_regs_per_thread,
      l.hw_regs_per_thread_at_full_block, l.threads_per_block, grouped(l.build_max_cols).c_str());
  return l;
}

SoftmaxBug softmax_bug(Backend b, const ParamValues& p) {
  const std::optional<editable::Source> e = editable::edited("softmax");
  return softmax_bug(b, p, e ? &*e : nullptr);
}

SoftmaxBug softmax_bug(Backend b, const ParamValues& p, const editable::Source* src) {
  SoftmaxBug r;
  r.n_cols = p.get_int("n_cols");
  r.rows = p.get_int("rows");
  r.seed = p.get_int("seed");
  r.x_scale = p.get_float("x_scale");
  const int64_t n = r.n_cols, rows = r.rows, N = n * rows;
  r.block_fixed = softmax::block_size(Variant::Fixed, n);
  std::mt19937 rng(uint32_t(r.seed));
  r.x = normal_input(size_t(N), rng);
  if (r.x_scale != 1.0)
    for (float& v : r.x) v = float(double(v) * r.x_scale);
  Buffer<float> x(b, size_t(N));
  x.upload(r.x);
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("softmax");
  r.fault = run_traced(b, Variant::Buggy, x, r.dev_out_buggy, r.trace_buggy, rows, n, src);
  const editable::Fault f2 = run_traced(b, Variant::Fixed, x, r.dev_out_fixed, r.trace_fixed, rows, n, src);
  if (r.fault.kind == editable::Fault::None) r.fault = f2;
  if (r.fault.kind != editable::Fault::None) r.fault_line = "edited kernel: " + r.fault.text();

  // The checks and sums, on the host against the float64 reference.
  r.out_buggy = r.dev_out_buggy.to_host();
  r.out_fixed = r.dev_out_fixed.to_host();
  r.writer_buggy = r.trace_buggy.writer.to_host();
  r.writer_fixed = r.trace_fixed.writer.to_host();
  r.ref.resize(size_t(N));
  softmax::reference(r.x.data(), r.ref.data(), rows, n);
  r.diff_buggy = written_diff(r.out_buggy, r.ref, r.writer_buggy);
  r.diff_fixed = written_diff(r.out_fixed, r.ref, r.writer_fixed);
  int64_t first_buggy = -1, first_fixed = -1;
  r.nonfinite_buggy = count_nonfinite(r.out_buggy, r.writer_buggy, first_buggy);
  r.nonfinite_fixed = count_nonfinite(r.out_fixed, r.writer_fixed, first_fixed);
  const int64_t first = first_fixed >= 0 ? first_fixed : first_buggy;
  if (first >= 0)
    r.first_nonfinite_row = first / n, r.first_nonfinite_col = first % n, r.first_nonfinite_x = r.x[size_t(first)];
  fill_sums(r);
  fill_checks(r, r.trace_fixed.write_count.to_host());
  fill_sentences(r);
  return r;
}

SoftmaxSweep softmax_sweep(Backend b, const ParamValues& p) {
  const std::optional<editable::Source> e = editable::edited("softmax");
  return softmax_sweep(b, p, e ? &*e : nullptr);
}

// What the sweep's numbers say, claiming "rounding level" only for diffs at or below kSweepRounding: an
// edited kernel (a race, a missing max) can be off below 1024 columns, or its fixed kernel past it.
std::string sweep_sentence(const SoftmaxSweep& s) {
  const double r = SoftmaxSweep::kRounding;
  const std::string below =
      s.rounding_max <= r
          ? format("Up to n_cols = 1024 both kernels are at float32 rounding level (%.2g to %.2g), not zero; ",
                   s.rounding_min, s.rounding_max)
          : format("Up to n_cols = 1024 the kernels are off by up to %.2g, far above float32 rounding (%.0e): "
                   "this kernel is wrong below the truncation width too; ",
                   s.rounding_max, r);
  const std::string buggy = s.buggy_past_min > r
                                ? format("past it the buggy kernel is off by %.2g or more", s.buggy_past_min)
                                : format("past it the buggy kernel is at rounding level too (from %.2g)", s.buggy_past_min);
  const std::string fixed = s.fixed_past_max <= r
                                ? format("the fixed one stays at rounding level (at most %.2g).", s.fixed_past_max)
                                : format("the fixed one is off by up to %.2g, far above rounding: it is wrong too.",
                                         s.fixed_past_max);
  return below + buggy + (s.buggy_past_min > r ? ", while " : ", and ") + fixed;
}

SoftmaxSweep softmax_sweep(Backend b, const ParamValues& p, const editable::Source* src) {
  SoftmaxSweep s;
  s.n_cols = {1,   2,    4,    8,    16,   32,   64,   128,  256,  512,  768,  1000, 1023, 1024, 1025,
              1100, 1280, 1536, 1823, 2000, 2048, 3000, 4096, 5000, 6144, 8192};
  std::mt19937 rng(uint32_t(p.get_int("seed")) + 7u);
  const int64_t rows = SoftmaxSweep::kRows;
  for (int64_t n : s.n_cols) {
    const std::vector<float> x = normal_input(size_t(rows * n), rng);
    std::vector<double> ref(x.size());
    softmax::reference(x.data(), ref.data(), rows, n);
    Buffer<float> dx(b, x.size()), dout(b, x.size());
    dx.upload(x);
    softmax::SoftmaxTrace trace;  // the traced kernels (the editable source), as the heatmaps draw them
    for (Variant v : {Variant::Buggy, Variant::Fixed}) {
      run_traced(b, v, dx, dout, trace, rows, n, src);
      (v == Variant::Buggy ? s.buggy : s.fixed).push_back(written_diff(dout.to_host(), ref, trace.writer.to_host()));
    }
  }
  // What the numbers say: rounding up to 1024 (both kernels), the bug past it.
  double lo = std::numeric_limits<double>::infinity(), hi = 0, smallest = lo, past = lo, fixed_past = 0;
  for (size_t i = 0; i < s.n_cols.size(); ++i) {
    for (double v : {s.buggy[i], s.fixed[i]}) {
      if (v > 0) smallest = std::min(smallest, v);
      if (s.n_cols[i] <= kBuggyBlock && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    if (s.n_cols[i] > kBuggyBlock) past = std::min(past, s.buggy[i]), fixed_past = std::max(fixed_past, s.fixed[i]);
  }
  s.rounding_min = std::isfinite(lo) ? lo : 0;
  s.rounding_max = hi;
  s.buggy_past_min = std::isfinite(past) ? past : 0;
  s.fixed_past_max = fixed_past;
  s.plot_floor = std::isfinite(smallest) ? std::pow(10.0, std::floor(std::log10(smallest))) : 1e-9;
  double largest = 0;  // finite diffs only: an edited kernel's diffs can pass 0.1 (the shipped ones stay below)
  for (size_t i = 0; i < s.n_cols.size(); ++i)
    for (double v : {s.buggy[i], s.fixed[i]})
      if (std::isfinite(v)) largest = std::max(largest, v);
  s.plot_ceiling = std::max(1e-1, largest > 0 ? std::pow(10.0, std::ceil(std::log10(largest))) : 0.0);
  std::string where;  // the n_cols whose points are clipped
  for (size_t i = 0; i < s.n_cols.size(); ++i) {
    const int c = (s.buggy[i] < s.plot_floor) + (s.fixed[i] < s.plot_floor);
    s.clipped += c;
    if (c) where += (where.empty() ? "" : ", ") + std::to_string(s.n_cols[i]);
  }
  // The sweep draws its own N(0, 1) inputs: x_scale, a setting of the heatmaps above, is not applied here.
  const double x_scale = p.get_float("x_scale");
  s.title = format("max |out - reference| over written columns, n_cols = 1..8192 (%" PRId64 " rows%s)", rows,
                   x_scale != 1.0 ? ", x from N(0, 1): x_scale not applied" : "");
  s.sentence = sweep_sentence(s);
  if (s.clipped)
    s.clipped_sentence = format("Grey: %d exact zero%s (n_cols = %s), drawn on the %.0e floor of the log axis.",
                                s.clipped, s.clipped == 1 ? "" : "s", where.c_str(), s.plot_floor);
  return s;
}

SoftmaxOnline softmax_online(Backend b, const ParamValues& p) {
  const std::optional<editable::Source> e = editable::edited("softmax");
  return softmax_online(b, p, e ? &*e : nullptr);
}

SoftmaxOnline softmax_online(Backend b, const ParamValues& p, const editable::Source* src) {
  SoftmaxOnline r;
  r.n_cols = p.get_int("n_cols");
  r.rows = p.get_int("rows");
  r.chunk = int(p.get_int("chunk"));
  r.row = p.get_int("trace_row");
  const int64_t n = r.n_cols, rows = r.rows, row = r.row;
  if (row >= rows)
    throw InputError(out_of_range_message("trace_row", std::to_string(row), "[0, rows-1] = [0, " +
                                                                                std::to_string(rows - 1) + "]"));
  const std::vector<float> x = online_input(rows, n, uint32_t(p.get_int("seed")));
  r.dev_x.resize(b, x.size());
  r.dev_x.upload(x);
  Buffer<float> out(b, x.size());
  out.fill_bytes(0xFF);
  softmax::SoftmaxTrace trace;
  trace.reset(b, rows, n, row, r.chunk);
  softmax::SoftmaxTraceView tv = trace.view();
  const editable::Fault fault = softmax::run(b, Variant::Online, r.dev_x.data(), out.data(), rows, n, &tv, r.chunk,
                                             nullptr, src);
  const std::vector<float> cmax = trace.chunk_max.to_host(), m = trace.running_max.to_host(),
                           l = trace.running_sum.to_host();
  r.row_x.assign(x.begin() + row * n, x.begin() + (row + 1) * n);
  r.row_absmax = 0;
  for (float v : r.row_x) r.row_absmax = std::max(r.row_absmax, std::fabs(v));
  for (size_t k = 0; k < m.size(); ++k) {
    SoftmaxOnlineStep s;
    s.first_col = int64_t(k) * r.chunk;
    s.last_col = std::min(n, int64_t(k + 1) * r.chunk) - 1;
    s.chunk_max = cmax[k], s.m = m[k], s.l = l[k];
    s.alpha = k ? std::exp(double(m[k - 1]) - m[k]) : 0.0;  // m_old = -inf before the first chunk
    s.m_moved = s.alpha < 1.0;
    for (int64_t c = 0; c <= s.last_col; ++c) s.ref_sum += std::exp(double(r.row_x[size_t(c)]) - m[k]);
    r.steps.push_back(s);
  }

  std::vector<double> ref(static_cast<size_t>(n));
  softmax::reference(r.row_x.data(), ref.data(), 1, n);
  std::vector<float> o(static_cast<size_t>(n));
  mem::to_host(b, o.data(), out.data() + row * n, size_t(n) * sizeof(float));
  double diff = 0;
  bool nan = false;
  for (int64_t c = 0; c < n; ++c) {
    nan = nan || std::isnan(o[size_t(c)]);
    diff = std::max(diff, std::fabs(double(o[size_t(c)]) - ref[size_t(c)]));
  }
  r.check.name = "online_matches_reference";
  r.check.pass = !nan && diff < 1e-6;
  r.check.sentence = nan ? std::string("no: unwritten elements")
                         : format("%s, max abs diff %.3g", r.check.pass ? "yes" : "no", diff);
  if (fault.kind != editable::Fault::None)
    r.check.pass = false, r.check.sentence = "edited kernel: " + fault.text() + "; " + r.check.sentence;
  int64_t moved = 0;
  for (size_t k = 1; k < r.steps.size(); ++k) moved += r.steps[k].m_moved ? 1 : 0;
  r.notice = format("one program walks the row in %zu chunks of %d keeping only a running max m and sum l: m moved "
                    "in %" PRId64 " chunk%s after the first, and each time l was rescaled by alpha = exp(m_old - m_new) "
                    "< 1; %s", r.steps.size(), r.chunk, moved, moved == 1 ? "" : "s",
                    r.check.pass ? "the result matches the reference" : "the result does not match the reference");
  r.intro = format("One program walks row %" PRId64 " in %" PRId64 " chunks of %d columns, keeping only a running "
                   "max m and a running sum l:  m_new = max(m_old, rowmax(chunk)),  l_new = l_old * exp(m_old - m_new) "
                   "+ rowsum(exp(chunk - m_new)).  A second pass writes exp(x - m) / l.  Any width works: nothing "
                   "holds the whole row.",
                   row, int64_t(r.steps.size()), r.chunk);
  return r;
}

Report softmax_report(Backend b, const ParamValues& p) {
  Report rep;
  rep.panel = "softmax";
  nlohmann::json& num = rep.numbers;
  if (p.get_text("view") == "online") {
    const SoftmaxOnline o = softmax_online(b, p);
    rep.settings = settings_text(p, {"view", "n_cols", "rows", "seed", "chunk", "trace_row"});
    rep.notice = o.notice;
    rep.checks.push_back({o.check.name, o.check.pass, "online matches reference (this row): " + o.check.sentence});
    rep.lines.push_back(o.intro);
    for (size_t k = 0; k < o.steps.size(); ++k) {
      const SoftmaxOnlineStep& s = o.steps[k];
      rep.lines.push_back(format("chunk %zu, columns %" PRId64 "..%" PRId64 ": rowmax(chunk) %.4f, m %.4f, "
                                 "alpha = exp(m_old - m_new) %.4f%s, l %.4f (float64: %.4f)",
                                 k, s.first_col, s.last_col, s.chunk_max, s.m, s.alpha,
                                 k == 0 ? " (m_old = -inf)" : (s.m_moved ? " (m moved)" : ""), s.l, s.ref_sum));
      num["steps"].push_back({{"first_col", s.first_col}, {"last_col", s.last_col}, {"chunk_max", s.chunk_max},
                              {"m", s.m}, {"alpha", s.alpha}, {"l", s.l}, {"ref_sum", s.ref_sum}});
    }
    return rep;
  }
  const SoftmaxBug g = softmax_bug(b, p);
  const SoftmaxSweep s = softmax_sweep(b, p);
  const SoftmaxLimits l = softmax_limits(b);
  rep.settings = settings_text(p, {"view", "n_cols", "rows", "seed", "x_scale"});
  rep.notice = g.notice;
  rep.checks.push_back({g.buggy.name, g.buggy.pass, "buggy matches reference: " + g.buggy.sentence});
  rep.checks.push_back({g.fixed.name, g.fixed.pass, "fixed matches reference: " + g.fixed.sentence});
  rep.lines.push_back(g.headline);
  rep.lines.push_back(g.inputs_sentence);
  if (!g.nonfinite_sentence.empty()) rep.lines.push_back(g.nonfinite_sentence);
  if (g.edited) {
    rep.lines.push_back("kernel: " + g.source_file + " (edited)");
    if (!g.fault_line.empty()) rep.lines.push_back(g.fault_line);
  }
  for (int64_t row = 0; row < g.rows; ++row)
    rep.lines.push_back(format("row %" PRId64 " sums: buggy, all cols %s; buggy, written %.6f; fixed %.6f; "
                               "reference mass in 0..1023 %.6f", row,
                               std::isnan(g.sum_buggy_all[size_t(row)]) ? "NaN (unwritten)"
                                   : format("%.6f", g.sum_buggy_all[size_t(row)]).c_str(),
                               g.sum_buggy_written[size_t(row)],
                               g.sum_fixed[size_t(row)], g.ref_head_mass[size_t(row)]));
  rep.lines.push_back(g.row_sums_sentence);
  rep.lines.push_back(s.title + ":");
  for (size_t i = 0; i < s.n_cols.size(); ++i)
    rep.lines.push_back(format("  n_cols %5" PRId64 ": buggy %.3g, fixed %.3g", s.n_cols[i], s.buggy[i], s.fixed[i]));
  rep.lines.push_back(s.sentence);
  rep.lines.push_back(l.sentence);
  num["n_cols"] = g.n_cols, num["rows"] = g.rows, num["block_fixed"] = g.block_fixed;
  num["unwritten_buggy"] = g.unwritten_buggy, num["unwritten_fixed"] = g.unwritten_fixed;
  num["diff_buggy"] = g.diff_buggy, num["diff_fixed"] = g.diff_fixed;
  num["x_scale"] = g.x_scale;
  num["nonfinite_buggy"] = g.nonfinite_buggy, num["nonfinite_fixed"] = g.nonfinite_fixed;
  num["first_nonfinite"] = {{"row", g.first_nonfinite_row}, {"col", g.first_nonfinite_col}, {"x", g.first_nonfinite_x}};
  if (g.edited) num["fault"] = g.fault.kind == editable::Fault::None ? 0 : 1;
  num["sum_buggy_written"] = g.sum_buggy_written, num["sum_fixed"] = g.sum_fixed;
  num["ref_head_mass"] = g.ref_head_mass;
  num["sweep"] = {{"n_cols", s.n_cols}, {"buggy", s.buggy}, {"fixed", s.fixed}, {"rounding_min", s.rounding_min},
                  {"rounding_max", s.rounding_max}, {"buggy_past_min", s.buggy_past_min}};
  num["limits"] = {{"build_max_cols", l.build_max_cols}, {"threads_per_block", l.threads_per_block},
                   {"values_per_thread", l.values_per_thread}, {"hw_regs_per_block", l.hw_regs_per_block},
                   {"hw_regs_per_thread", l.hw_regs_per_thread}, {"kernel_threads", l.kernel_threads},
                   {"kernel_values_per_thread", l.kernel_values_per_thread},
                   {"kernel_registers", l.kernel_registers}, {"kernel_stack_bytes", l.kernel_stack_bytes}};
  return rep;
}

Entry softmax_entry() {
  return {"softmax", "rung 3: buggy vs fixed softmax, max abs diff over n_cols, the online form's m and l per chunk",
          softmax_params, softmax_report};
}

}  // namespace kl::study
