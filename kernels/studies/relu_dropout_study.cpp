// Rung 2's study: the traced launch and its checks, the drop rate over seeds, the survivor histogram,
// the tie check and fused against unfused.
#include "kernels/studies/relu_dropout_study.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <optional>

#include "kernels/measure/bench.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/gpu_expectation.h"
#include "kernels/rungs/philox.h"

namespace kl::study {
namespace rd = relu_dropout;
namespace {

std::string printf_text(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string printf_text(const char* f, ...) {
  char buf[400];
  va_list a;
  va_start(a, f);
  std::vsnprintf(buf, sizeof buf, f, a);
  va_end(a);
  return buf;
}

// Inputs: uniform in [-1, 1) (half of them negative, so ReLU has work), from Philox under a fixed key.
std::vector<float> make_inputs(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = philox::uniform(philox::element_word(0x5eed, uint64_t(i))) * 2.0f - 1.0f;
  return x;
}

// "3.86 us", "27.2 ms": three significant digits in the unit that keeps them plain.
std::string time_text(double us) { return us < 1000.0 ? printf_text("%.3g us", us) : printf_text("%.3g ms", us / 1e3); }

bool in_band(const ReluDropoutResult& r, double rate) { return std::fabs(rate - r.p) <= kZ99 * r.sigma + 1e-12; }

void drop_rates(ReluDropoutResult& r, const Buffer<float>& x, const rd::Summary& s, const editable::Source* src) {
  r.dropped = s.dropped;
  r.rate = double(s.dropped) / double(r.n);
  r.sigma = std::sqrt(r.p * (1 - r.p) / double(r.n));
  r.lo99 = r.p - kZ99 * r.sigma;
  r.hi99 = r.p + kZ99 * r.sigma;
  r.inside = in_band(r, r.rate);
  Buffer<float> o(r.backend, size_t(r.n));
  rd::DropoutTrace t;
  for (int k = 0; k < kDropoutSeeds; ++k) {
    t.reset(r.backend, r.n, r.block_size);
    rd::DropoutTraceView v = t.view();
    rd::run_traced(r.backend, x.data(), o.data(), r.n, r.p, r.seed + uint64_t(k), r.block_size, &v, src);
    const rd::Summary sk = rd::summarize(r.backend, x.data(), o.data(), t.keep.data(), r.n, 0.0, 1.0, 1);
    r.seed_rates.push_back(double(sk.dropped) / double(r.n));
    r.seeds_inside += in_band(r, r.seed_rates.back());
  }
  r.rate_inside = {"rate_inside_interval", r.inside, r.inside ? "yes" : "no"};
  r.rate_line = printf_text("dropped %" PRId64 " of %" PRId64 " = %.4f;  99%% binomial interval p +- 2.576 "
                            "sqrt(p(1-p)/n) = [%.4f, %.4f]", r.dropped, r.n, r.rate, r.lo99, r.hi99);
  r.seeds_line = printf_text("(%d of %d seeds inside; expect about 1 in 100 outside)", r.seeds_inside, kDropoutSeeds);
  r.rate_title = "empirical drop rate, seeds " + std::to_string(r.seed) + ".." +
                 std::to_string(r.seed + kDropoutSeeds - 1);
}

void histogram(ReluDropoutResult& r, const rd::Summary& s) {
  r.hist = s.ratio_hist;
  r.survivors = s.survivors;
  r.in_spike = r.hist[size_t(r.spike_bin)];
  r.elsewhere = r.survivors - r.in_spike;
  r.bin_centres.clear();
  r.bin_labels.clear();
  for (int k = 0; k < kDropoutBins; ++k) {
    r.bin_centres.push_back(r.bin_width * k);
    r.bin_labels.push_back(printf_text("%.4g", r.bin_width * k));
  }
  r.hist_title = printf_text("one spike at 1/(1-p) = %.4g: %" PRId64 " of %" PRId64 " survivors in the bin centred "
                             "there (%.4g wide), %" PRId64 " elsewhere",
                             1.0 / (1.0 - r.p), r.in_spike, r.survivors, r.bin_width, r.elsewhere);
  const auto fullest = std::max_element(r.hist.begin(), r.hist.end());
  if (r.survivors > 0 && *fullest > r.hist[size_t(r.spike_bin)])  // an edited kernel's survivors moved off it
    r.hist_title += printf_text("; the fullest bin is centred on %.4g (%u survivors)",
                                r.bin_centres[size_t(fullest - r.hist.begin())], *fullest);
}

// The traced output against the float64 reference (1 ulp; dropped exactly 0), and the other versions' bits.
void check_output(ReluDropoutResult& r, const Buffer<float>& x) {
  const std::vector<float> got = r.out.to_host();
  std::vector<float> ref(static_cast<size_t>(r.n));
  rd::reference(r.x.data(), ref.data(), nullptr, r.n, r.p, r.seed);
  int64_t bad = 0, nan = 0;
  for (int64_t i = 0; i < r.n; ++i) {
    const float g = got[size_t(i)], e = ref[size_t(i)];
    const bool close = g == e || std::fabs(double(g) - e) <= std::fabs(double(e)) * 1.2e-7;
    if (std::isnan(g)) ++nan;
    else if (!close) ++bad;
    if (!std::isnan(g) && close && e > 0.0f) ++r.within_1ulp;
  }
  r.matches_reference.name = "matches_reference";
  r.matches_reference.pass = bad == 0 && nan == 0;
  r.matches_reference.sentence = r.matches_reference.pass
                                     ? std::string("yes, every survivor within 1 ulp of relu(x)/(1-p), dropped exactly 0")
                                     : "no: " + std::to_string(bad) + " wrong, " + std::to_string(nan) + " never written";
  if (r.fault.kind != editable::Fault::None) {  // an access it did not make is not in the output: say what it did
    r.matches_reference.pass = false;
    r.matches_reference.sentence = r.fault_line + "; " + r.matches_reference.sentence;
  }
  Buffer<float> fused(r.backend, size_t(r.n)), tmp(r.backend, size_t(r.n));
  fused.fill_bytes(0xFF);
  rd::run_fused(r.backend, x.data(), fused.data(), r.n, r.p, r.seed, r.block_size);
  const std::vector<float> f = fused.to_host();
  rd::run_unfused(r.backend, x.data(), tmp.data(), fused.data(), r.n, r.p, r.seed, r.block_size);
  const std::vector<float> u = fused.to_host();
  const bool same = std::memcmp(f.data(), got.data(), f.size() * 4) == 0 && std::memcmp(u.data(), got.data(), u.size() * 4) == 0;
  r.bit_for_bit = {"fused_traced_unfused_same_bits", same, same ? "yes" : "no"};
}

// keep = u >= p: an element whose u equals p exactly is kept. The statistics cannot see a u > p test
// (u lies on a 2^-24 grid, so ties move the rate by about 6e-8); this check runs each version at
// p = u of the first element with x > 0 and looks at that element.
void tie_check(ReluDropoutResult& r, const editable::Source* src) {
  int64_t i = 0;
  while (i + 1 < r.n && !(r.x[size_t(i)] > 0.0f)) ++i;
  r.tie_element = i;
  r.tie_p = double(philox::uniform(philox::element_word(r.seed, uint64_t(i))));
  const int64_t n = i + 1;
  Buffer<float> x(r.backend, size_t(n)), out(r.backend, size_t(n)), tmp(r.backend, size_t(n));
  x.upload(r.x.data(), size_t(n));
  auto kept = [&](const char* which) {
    out.fill_bytes(0xFF);
    if (!std::strcmp(which, "fused")) rd::run_fused(r.backend, x.data(), out.data(), n, r.tie_p, r.seed, r.block_size);
    else if (!std::strcmp(which, "unfused"))
      rd::run_unfused(r.backend, x.data(), tmp.data(), out.data(), n, r.tie_p, r.seed, r.block_size);
    else rd::run_traced(r.backend, x.data(), out.data(), n, r.tie_p, r.seed, r.block_size, nullptr, src);
    const std::vector<float> o = out.to_host();
    return o[size_t(i)] != 0.0f;  // x > 0: a kept element's output is not 0, whatever it was scaled by
  };
  r.tie_kept_traced = kept("traced");
  r.tie_kept_fused = kept("fused");
  r.tie_kept_unfused = kept("unfused");
  const bool pass = r.tie_kept_traced && r.tie_kept_fused && r.tie_kept_unfused && r.x[size_t(i)] > 0.0f;
  r.tie_kept.name = "tie_u_equals_p_kept";
  r.tie_kept.pass = pass;
  r.tie_kept.sentence =
      pass ? printf_text("yes: a separate run at p = %.9g, element %" PRId64 "'s own u (a tie made on purpose; the "
                         "panel's p is %g): traced, fused and unfused all keep it, as keep = u >= p must; a kernel "
                         "testing u > p would drop it", r.tie_p, i, r.p)
           : printf_text("no: at p = %.9g (element %" PRId64 "'s u) kept by traced %s, fused %s, unfused %s",
                         r.tie_p, i, r.tie_kept_traced ? "yes" : "no", r.tie_kept_fused ? "yes" : "no",
                         r.tie_kept_unfused ? "yes" : "no");
}

// Median of a few runs after warm-up; on the CPU backend fewer at the large size, so a change of
// settings in the window stays quick.
double time_pair(Backend b, const Buffer<float>& x, Buffer<float>& out, Buffer<float>& tmp, int64_t n, double p,
                 uint64_t seed, int block, bool unfused, bool big = false) {
  const bool cpu = b == Backend::Cpu;
  const int warmup = cpu && big ? 1 : 2, iters = cpu ? (big ? 3 : 5) : 20;
  if (unfused)
    return bench::time(b, [&] { rd::run_unfused(b, x.data(), tmp.data(), out.data(), n, p, seed, block); }, warmup,
                       iters)
        .median_ms;
  return bench::time(b, [&] { rd::run_fused(b, x.data(), out.data(), n, p, seed, block); }, warmup, iters).median_ms;
}

// Fused against unfused at the panel's n, and at big_n where the bytes (8 against 16 per element) dominate
// on a GPU; the panel-n saving is called launch-bound when its time is over twice what its bytes take at
// big_n's measured rate.
void fusion(ReluDropoutResult& r, const Buffer<float>& x) {
  const Backend b = r.backend;
  Buffer<float> out(b, size_t(r.n)), tmp(b, size_t(r.n));
  r.t_fused_ms = time_pair(b, x, out, tmp, r.n, r.p, r.seed, r.block_size, false);
  r.t_unfused_ms = time_pair(b, x, out, tmp, r.n, r.p, r.seed, r.block_size, true);
  r.big_n = b == Backend::Cpu ? int64_t(1) << 22 : int64_t(1) << 24;
  {
    Buffer<float> bx(b, size_t(r.big_n)), bout(b, size_t(r.big_n)), btmp(b, size_t(r.big_n));
    bx.fill_bytes(0x3F);  // 0.747: every element positive, so relu keeps it and dropout decides
    r.t_fused_big_ms = time_pair(b, bx, bout, btmp, r.big_n, r.p, r.seed, r.block_size, false, true);
    r.t_unfused_big_ms = time_pair(b, bx, bout, btmp, r.big_n, r.p, r.seed, r.block_size, true, true);
  }
  r.bytes_time_us = r.t_fused_big_ms * 1e3 * double(r.n) / double(r.big_n);
  r.launch_bound = r.t_fused_ms * 1e3 > 2.0 * r.bytes_time_us;
  const double ratio = r.t_unfused_ms / std::max(r.t_fused_ms, 1e-12);
  const double big_ratio = r.t_unfused_big_ms / std::max(r.t_fused_big_ms, 1e-12);
  // Fused first, as the bars are drawn: "fused 1.15x faster" (a ratio unfused / fused read against bars in
  // the other order).
  auto speed = [](double x) { return x >= 1.0 ? printf_text("fused %.2fx faster", x) : printf_text("fused %.2fx slower", 1.0 / x); };
  r.time_title = printf_text("n = %" PRId64 ": median us; %s", r.n, speed(ratio).c_str());
  r.big_time_title = printf_text("n = %" PRId64 ": median ms; %s", r.big_n, speed(big_ratio).c_str());
  r.big_fused_label = printf_text("fused, %.0f MB", 8.0 * double(r.big_n) / 1e6);
  r.big_unfused_label = printf_text("unfused, %.0f MB", 16.0 * double(r.big_n) / 1e6);
  const std::string fused = time_text(r.t_fused_ms * 1e3), bytes = time_text(r.bytes_time_us);
  if (b == Backend::Cpu) {  // no launch on a CPU: what it measured, and what a GPU does instead
    r.launch_bound = false;
    r.fusion_line = printf_text("measured on this CPU: fused %s at n = %" PRId64 ", unfused / fused %.2fx here and %.2fx "
                                "at n = %" PRId64, fused.c_str(), r.n, ratio, big_ratio, r.big_n);
    r.gpu_line = relu_dropout_on_gpu().sentence;
    return;
  }
  if (r.launch_bound)
    r.fusion_line = printf_text("launch-bound at n = %" PRId64 ": fused %s, where its %.3g MB take %s at the "
                                "n = %" PRId64 " rate, so the %.2fx is one launch saved; the %.2fx at n = %" PRId64
                                " is bytes",
                                r.n, fused.c_str(), 8.0 * double(r.n) / 1e6, bytes.c_str(), r.big_n, ratio, big_ratio,
                                r.big_n);
  else
    r.fusion_line = printf_text("not launch-bound at n = %" PRId64 ": fused %s, its %.3g MB take %s at the "
                                "n = %" PRId64 " rate; unfused / fused %.2fx here, %.2fx at n = %" PRId64,
                                r.n, fused.c_str(), 8.0 * double(r.n) / 1e6, bytes.c_str(), r.big_n, ratio, big_ratio,
                                r.big_n);
}

void describe(ReluDropoutResult& r) {
  r.formula_line = printf_text("out = keep ? max(x, 0) / (1 - p) : 0,   keep = u(Philox(seed, i)) >= p,   "
                               "scale 1/(1-p) = %.6g", double(r.scale));
  r.philox_line = "u = top 24 bits of word i % 4 of Philox-4x32-10(seed, counter i / 4), times 2^-24: not "
                  "Triton's tl.rand mask (word 0 of Philox(seed, counter i))";
}

}  // namespace

// The panel's parameters: p, seed and block_size are the rung's own specs; n is the panel's input size.
std::vector<ParamSpec> relu_dropout_params() {
  return {int_param("n", 1, kReluDropoutMaxN, 65536, "number of elements"), rd::param::p(), rd::param::seed(),
          rd::param::block_size()};
}

ReluDropoutResult run_relu_dropout(Backend b, const ParamValues& settings) {
  const std::optional<editable::Source> e = editable::edited("relu-dropout");
  return run_relu_dropout(b, settings, e ? &*e : nullptr);
}

ReluDropoutResult run_relu_dropout(Backend b, const ParamValues& settings, const editable::Source* src) {
  ReluDropoutResult r;
  r.backend = b;
  r.n = settings.get_int("n");
  r.p = settings.get_float("p");
  r.seed = uint64_t(settings.get_int("seed"));
  r.block_size = int(settings.get_int("block_size"));
  require_range("n", r.n, 1, kReluDropoutMaxN);
  rd::detail::check_args(r.n, r.p, r.block_size);
  r.scale = rd::keep_scale(r.p);
  r.x = make_inputs(r.n);
  Buffer<float> x(b, size_t(r.n));
  x.upload(r.x);
  r.out.resize(b, size_t(r.n));
  r.out.fill_bytes(0xFF);  // poison
  r.trace.reset(b, r.n, r.block_size);
  rd::DropoutTraceView tv = r.trace.view();
  r.edited = src != nullptr;
  r.source_file = src ? src->file : editable::shipped_file("relu-dropout");
  r.fault = rd::run_traced(b, x.data(), r.out.data(), r.n, r.p, r.seed, r.block_size, &tv, src);
  if (r.fault.kind != editable::Fault::None) r.fault_line = "edited kernel: " + r.fault.text();

  // Statistics where the backend runs; only the counts come back.
  r.bin_width = 1.0 / (1.0 - r.p) / 4.0;
  const rd::Summary s = rd::summarize(b, x.data(), r.out.data(), r.trace.keep.data(), r.n, -0.5 * r.bin_width,
                                      (kDropoutBins - 0.5) * r.bin_width, kDropoutBins);
  drop_rates(r, x, s, src);
  histogram(r, s);
  check_output(r, x);
  tie_check(r, src);
  fusion(r, x);
  describe(r);
  if (r.elsewhere > 0 || !r.matches_reference.pass)
    r.notice = printf_text("every survivor should be x / (1 - p) = %.4gx, one spike; here %" PRId64 " of %" PRId64
                           " survivors are elsewhere and the output does not match: the scale is wrong",
                           1.0 / (1.0 - r.p), r.elsewhere, r.survivors);
  else
    r.notice = printf_text("dropped %" PRId64 " of %" PRId64 " = %.4f, inside the 99%% interval [%.4f, %.4f] around "
                           "p = %g, and every survivor is exactly x / (1 - p) = %.4gx: a random kernel is checked by "
                           "its distribution", r.dropped, r.n, r.rate, r.lo99, r.hi99, r.p, 1.0 / (1.0 - r.p));
  return r;
}

Report relu_dropout_report(const ReluDropoutResult& r) {
  Report rep;
  rep.panel = "relu-dropout";
  rep.notice = r.notice;
  rep.checks = {{r.matches_reference.name, r.matches_reference.pass, "matches reference: " + r.matches_reference.sentence},
                {r.bit_for_bit.name, r.bit_for_bit.pass, "fused == traced == unfused, bit for bit: " + r.bit_for_bit.sentence},
                {r.rate_inside.name, r.rate_inside.pass, "this seed's rate inside the interval: " + r.rate_inside.sentence},
                {r.tie_kept.name, r.tie_kept.pass, "tie u == p kept: " + r.tie_kept.sentence}};
  rep.lines = {r.formula_line, r.philox_line, r.rate_line, r.seeds_line, r.hist_title, r.fusion_line};
  if (!r.gpu_line.empty()) rep.lines.push_back(r.gpu_line);
  if (r.edited) {
    rep.lines.push_back("kernel: " + r.source_file + " (edited)");
    if (!r.fault_line.empty()) rep.lines.push_back(r.fault_line);
  }
  nlohmann::json bins = nlohmann::json::array();
  for (size_t k = 0; k < r.hist.size(); ++k) bins.push_back({{"centre", r.bin_centres[k]}, {"count", r.hist[k]}});
  rep.numbers = {{"n", r.n}, {"p", r.p}, {"seed", r.seed}, {"block_size", r.block_size}, {"scale", r.scale},
                 {"dropped", r.dropped}, {"rate", r.rate}, {"interval_99", {r.lo99, r.hi99}},
                 {"seed_rates", r.seed_rates}, {"seeds_inside", r.seeds_inside}, {"survivors", r.survivors},
                 {"in_spike", r.in_spike}, {"elsewhere", r.elsewhere}, {"within_1ulp", r.within_1ulp},
                 {"bin_width", r.bin_width}, {"histogram", bins}, {"tie_p", r.tie_p}, {"tie_element", r.tie_element},
                 {"fused_ms", r.t_fused_ms}, {"unfused_ms", r.t_unfused_ms}, {"big_n", r.big_n},
                 {"fused_big_ms", r.t_fused_big_ms}, {"unfused_big_ms", r.t_unfused_big_ms},
                 {"launch_bound", r.launch_bound}};
  if (r.edited) rep.numbers["fault"] = r.fault.kind == editable::Fault::None ? 0 : 1;
  return rep;
}

Entry relu_dropout_entry() {
  Entry e;
  e.panel = "relu-dropout";
  e.summary = "the keep mask, the drop rate over 25 seeds against its 99% interval, survivors' out/x, fusion";
  e.params = relu_dropout_params;
  e.run = [](Backend b, const ParamValues& v) {
    Report rep = relu_dropout_report(run_relu_dropout(b, v));
    rep.settings = settings_text(v);
    return rep;
  };
  return e;
}

}  // namespace kl::study
