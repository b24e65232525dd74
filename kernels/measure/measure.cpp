// The Measure view's plan: which sizes, which kernels, in which order, each measurement one step.
//   [SECTION] inputs and helpers
//   [SECTION] the plan: bandwidth, the GEMM ceiling, compute
//   [SECTION] running it, and the worker thread
#include "kernels/measure/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>

#include "kernels/measure/bench.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/measure/gemm_ceiling.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/rungs/softmax.h"
#include "kernels/rungs/vector_add.h"

namespace kl::measure {
namespace {

// [SECTION] inputs and helpers --------------------------------------------------------------------------
constexpr int64_t kSoftmaxCols = 4096;
constexpr int kReluBlock = 4096;  // the block size `bench relu-dropout` times
constexpr int64_t kFlashTokens = 16384, kFlashWidth = 2048;  // B * L and H * d, as `bench flash-attention`

// Uniform values in [-1, 1) from a cheap hash (inputs only need to be non-trivial, not statistically good).
float hash_uniform(uint64_t i, uint32_t seed) {
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ uint64_t(seed) * 0xD1B54A32D192ED03ull;
  h ^= h >> 31, h *= 0x7FB5D329728EA185ull, h ^= h >> 27;
  return float(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

std::string pow2_text(int64_t n) {
  int e = 0;
  while ((int64_t(1) << e) < n) ++e;
  return (int64_t(1) << e) == n ? "2^" + std::to_string(e) : std::to_string(n);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
    }
  return "CPU";
}

// Buffers shared by the steps of one size (reallocated and refilled when the size or the set count
// changes): `sets` buffer sets of N floats each, set k at offset k * N of every buffer, so the timed loop
// can rotate through them (cold timing: see bandwidth_sets).
struct Workspace {
  Backend b = Backend::Cpu;
  int64_t n = 0;
  int sets = 1;
  Buffer<float> x, y, out, tmp, scratch;
  void ensure(int64_t size, int nsets) {
    if (size == n && nsets == sets) return;
    n = size, sets = nsets;
    const size_t total = size_t(n) * size_t(sets);
    std::vector<float> h(total);
    for (size_t i = 0; i < total; ++i) h[i] = hash_uniform(uint64_t(i), 1);
    x.resize(b, total);
    x.upload(h);
    for (size_t i = 0; i < total; ++i) h[i] = hash_uniform(uint64_t(i), 2);
    y.resize(b, total);
    y.upload(h);
    out.resize(b, total);
    tmp.resize(b, total);
    scratch.resize(b, size_t(2 * std::max<int64_t>(1, n / kSoftmaxCols)));
  }
  float* at(Buffer<float>& buf, int k) { return buf.data() + int64_t(k) * n; }
};

// Rotates through set 0, 1, ..., sets - 1, 0, ...: each call of a timed loop takes the next.
struct Rotation {
  int sets = 1, k = 0;
  int next() {
    const int cur = k;
    k = (k + 1) % sets;
    return cur;
  }
};

struct FlashWorkspace {
  Buffer<uint16_t> q, k, v, o;  // bf16 bits on the device
  void ensure() {
    if (q.size()) return;
    const size_t n = size_t(kFlashTokens * kFlashWidth);
    std::vector<uint16_t> h(n);
    Buffer<uint16_t>* bufs[3] = {&q, &k, &v};
    for (uint32_t s = 0; s < 3; ++s) {
      for (size_t i = 0; i < n; ++i) h[i] = to_bf16(hash_uniform(i, 10 + s));
      bufs[s]->resize(Backend::Cuda, n);
      bufs[s]->upload(h);
    }
    o.resize(Backend::Cuda, n);
  }
};

Point bandwidth_point(const std::string& kernel, const std::string& variant, int64_t n, const std::string& shape,
                      double bytes_per_elem, const bench::Timing& t, const Results& r) {
  Point p;
  p.section = "bandwidth";
  p.kernel = kernel;
  p.variant = variant;
  p.shape = shape;
  p.size = double(n);
  p.bytes = bytes_per_elem * double(n);
  p.ms = t.median_ms;
  p.gbs = p.bytes / (t.median_ms * 1e-3) / 1e9;
  const Point* copy = r.find("copy", r.machine.cpu_figures ? "memcpy" : "d2d", double(n));
  p.ratio = copy && copy->gbs > 0 ? p.gbs / copy->gbs : 0;
  p.launch_bound = copy && copy->launch_bound;
  p.sets = bandwidth_sets(r.machine.l2_bytes, n);
  return p;
}

}  // namespace

const Point* Results::find(const std::string& kernel, const std::string& variant, double size) const {
  for (const Point& p : points)
    if (p.kernel == kernel && p.variant == variant && p.size == size) return &p;
  return nullptr;
}

double Results::largest_size(const std::string& section) const {
  double s = 0;
  for (const Point& p : points)
    if (p.section == section) s = std::max(s, p.size);
  return s;
}

std::vector<int64_t> sizes(const Options& o) {
  std::vector<int> exps;
  if (o.backend == Backend::Cuda) exps = o.quick ? std::vector<int>{16, 18, 20} : std::vector<int>{16, 18, 20, 22, 24, 26};
  else exps = o.quick ? std::vector<int>{12, 14, 16} : std::vector<int>{12, 14, 16, 18, 20, 22};
  std::vector<int64_t> s;
  for (int e : exps) s.push_back(int64_t(1) << e);
  return s;
}

int bandwidth_sets(int64_t l2_bytes, int64_t n) {
  return l2_bytes <= 0 ? 1 : bench::sets_to_span(l2_bytes, size_t(8 * n));
}

Verdict verdict(const Point& p) {
  if (p.ratio > 1.0) return Verdict::AboveCeiling;
  if (p.launch_bound) return Verdict::LaunchBound;
  return p.ratio >= 0.8 ? Verdict::AtCeiling : p.ratio >= 0.5 ? Verdict::Fair : Verdict::Low;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::AtCeiling: return "at the ceiling";
    case Verdict::Fair: return "fair";
    case Verdict::Low: return "low";
    case Verdict::AboveCeiling: return "above the ceiling";
    case Verdict::LaunchBound: return "launch-bound";
  }
  return "";
}

ParamSpec param::quick() {
  return bool_param("quick", false, "fewer, smaller sizes (a first look; the tour uses them)");
}
ParamSpec param::run() {
  return bool_param("run", false, "measure synchronously before drawing (shots and the tour); in the window, press Run");
}
std::vector<ParamSpec> params() { return {param::quick(), param::run()}; }

double launch_bound_up_to(const Results& r) {
  double n = 0;
  for (const Point& p : r.points)
    if (p.section == "bandwidth" && p.kernel == "copy" && p.launch_bound) n = std::max(n, p.size);
  return n;
}

namespace {
std::string num(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
}  // namespace

std::string pow2_name(double n) { return pow2_text(int64_t(std::llround(n))); }

std::string ceilings_sentence(const Results& r) {
  const Machine& m = r.machine;
  std::string s;
  if (m.copy_gbs > 0) s += "copy " + num("%.0f GB/s", m.copy_gbs) + " at " + pow2_text(m.copy_elements) + " floats";
  if (m.gemm_tflops > 0)
    s += std::string(s.empty() ? "" : " | ") + "GEMM ceiling " +
         (m.cpu_figures ? num("%.2f GFLOP/s", m.gemm_tflops * 1e3) : num("%.0f TFLOP/s", m.gemm_tflops)) + " (" +
         m.gemm_what + ")";
  return s;
}

std::string cold_sentence(const Results& r) {
  if (r.machine.l2_bytes <= 0)
    return "timed warm, one buffer set per size (the CPU backend times what it finds in its caches): CPU figures";
  std::string sets;
  for (const Point& p : r.points)
    if (p.section == "bandwidth" && p.kernel == "copy")
      sets += std::string(sets.empty() ? "" : ", ") + std::to_string(p.sets) + " at " +
              pow2_text(int64_t(p.size));
  return "timed cold, the copy and the kernels alike: each call takes the next of S buffer sets that together "
         "span 4x the " + num("%.0f MiB", double(r.machine.l2_bytes) / (1024.0 * 1024.0)) +
         " L2, so none finds its data in the cache (S = " + sets + " floats)";
}

std::string launch_sentence(const Results& r) {
  const double call_us = r.machine.call_us;
  if (call_us <= 0) return "";
  const double upto = launch_bound_up_to(r);
  const std::string cost = "a call costs at least " + num("%.1f us", call_us) + " here (a 4-byte copy)";
  if (upto <= 0)
    return cost + "; the copy takes more than " + num("%.0fx", kLaunchBoundFactor) + " that at every size";
  return cost + "; up to N = " + pow2_text(int64_t(upto)) + " the copy takes less than " +
         num("%.0fx", kLaunchBoundFactor) +
         " that, so those sizes are launch-bound: the launch, the grid ramping up and the last wave draining "
         "cost the same whatever the bytes, and a ratio there compares fixed costs, not bandwidth";
}

// [SECTION] the plan: bandwidth, the GEMM ceiling, compute ---------------------------------------------
namespace {
// The timed loops' warm-up runs and timed runs on backend b.
struct Repeats {
  int warm, iters;
};
Repeats repeats(const Options& o) {
  const bool cpu = o.backend == Backend::Cpu;
  return Repeats{cpu ? 1 : 3, cpu ? 3 : (o.quick ? 10 : 20)};
}

// The bandwidth steps: the fixed cost of a call, then at every size the copy and the memory-bound rungs against
// it; the last step releases their buffers.
void plan_bandwidth(const Options& o, std::vector<Step>& steps) {
  const Backend b = o.backend;
  const bool cpu = b == Backend::Cpu;
  const int warm = repeats(o).warm, iters = repeats(o).iters;
  auto ws = std::make_shared<Workspace>();
  ws->b = b;
  const std::vector<int64_t> ns = sizes(o);
  // The workspace at N floats with the set count the copy at N used; returns the count.
  auto ws_sets = [ws](const Results& r, int64_t n) {
    const int sets = bandwidth_sets(r.machine.l2_bytes, n);
    ws->ensure(n, sets);
    return sets;
  };

  if (!cpu)
    steps.push_back({"the fixed cost of one call (a 4-byte device-to-device copy)", [=](Results& r) {
                       r.machine.call_us = bench::copy_timing(b, 4).median_ms * 1e3;
                     }});
  for (int64_t n : ns) {
    const std::string at = ", N = " + pow2_text(n);
    const std::string nshape = "n=" + std::to_string(n);
    const int64_t rows = n / kSoftmaxCols;
    const std::string sshape = std::to_string(rows) + "x" + std::to_string(kSoftmaxCols) + " fp32";
    steps.push_back({std::string(cpu ? "memcpy" : "device-to-device copy") + at, [=](Results& r) {
                       const int sets = bandwidth_sets(r.machine.l2_bytes, n);
                       const bench::Timing t = bench::copy_timing(b, size_t(n) * sizeof(float), sets);
                       const double gbs = 8.0 * double(n) / (t.median_ms * 1e-3) / 1e9;
                       Point p;
                       p.section = "bandwidth";
                       p.kernel = "copy";
                       p.variant = cpu ? "memcpy" : "d2d";
                       p.shape = nshape;
                       p.size = double(n);
                       p.bytes = 8.0 * double(n);
                       p.gbs = gbs;
                       p.ms = p.bytes / (gbs * 1e9) * 1e3;
                       p.ratio = 1;
                       p.sets = sets;
                       p.launch_bound = r.machine.call_us > 0 && p.ms * 1e3 < kLaunchBoundFactor * r.machine.call_us;
                       r.points.push_back(p);
                       if (double(n) >= double(r.machine.copy_elements))
                         r.machine.copy_gbs = gbs, r.machine.copy_elements = n;
                     }});
    steps.push_back({"vector-add fast" + at, [=](Results& r) {
                       Rotation rot{ws_sets(r, n)};
                       const bench::Timing t = bench::time(
                           b,
                           [&] {
                             const int k = rot.next();
                             vector_add::run_fast(b, ws->at(ws->x, k), ws->at(ws->y, k), ws->at(ws->out, k), n);
                           },
                           warm, iters);
                       r.points.push_back(bandwidth_point("vector-add", "fast", n, nshape, 12.0, t, r));
                     }});
    steps.push_back({"relu-dropout fused" + at, [=](Results& r) {
                       Rotation rot{ws_sets(r, n)};
                       const bench::Timing t = bench::time(
                           b,
                           [&] {
                             const int k = rot.next();
                             relu_dropout::run_fused(b, ws->at(ws->x, k), ws->at(ws->out, k), n, 0.5, 1234, kReluBlock);
                           },
                           warm, iters);
                       r.points.push_back(bandwidth_point("relu-dropout", "fused", n, nshape + " p=0.5", 8.0, t, r));
                     }});
    steps.push_back({"relu-dropout unfused" + at, [=](Results& r) {
                       Rotation rot{ws_sets(r, n)};
                       const bench::Timing t = bench::time(
                           b,
                           [&] {
                             const int k = rot.next();
                             relu_dropout::run_unfused(b, ws->at(ws->x, k), ws->at(ws->tmp, k), ws->at(ws->out, k), n,
                                                       0.5, 1234, kReluBlock);
                           },
                           warm, iters);
                       r.points.push_back(bandwidth_point("relu-dropout", "unfused", n, nshape + " p=0.5", 16.0, t, r));
                     }});
    for (softmax::Variant v : {softmax::Variant::Fixed, softmax::Variant::ThreePass}) {
      const std::string name = softmax::variant_name(v);
      const double bpe = v == softmax::Variant::Fixed ? 8.0 : 20.0;
      steps.push_back({"softmax " + name + at, [=](Results& r) {
                         Rotation rot{ws_sets(r, n)};
                         const bench::Timing t = bench::time(
                             b,
                             [&] {
                               const int k = rot.next();
                               softmax::run(b, v, ws->at(ws->x, k), ws->at(ws->out, k), rows, kSoftmaxCols, nullptr,
                                            softmax::kDefaultChunk, ws->scratch.data());
                             },
                             warm, iters);
                         r.points.push_back(bandwidth_point("softmax", name, n, sshape, bpe, t, r));
                       }});
    }
  }
  steps.push_back({"release the bandwidth buffers", [=](Results&) {
                     ws->x.release(), ws->y.release(), ws->out.release(), ws->tmp.release(), ws->scratch.release();
                     ws->n = 0, ws->sets = 1;
                   }});
}

// The GEMM ceiling the compute points are read against (cuBLAS bf16, or the CPU's).
void plan_gemm_ceiling(const Options& o, std::vector<Step>& steps) {
  const Backend b = o.backend;
  const bool cpu = b == Backend::Cpu;
  const int gemm_n = cpu ? (o.quick ? 256 : gemm::kDefaultCpuN) : gemm::kDefaultCudaN;
  steps.push_back({cpu ? "CPU GEMM ceiling, " + std::to_string(gemm_n) + "^3"
                       : "cuBLAS bf16 GEMM ceiling, " + std::to_string(gemm_n) + "^3",
                   [=](Results& r) {
                     const gemm::Ceiling c = gemm::measure_ceiling(b, gemm_n, cpu ? 3 : (o.quick ? 10 : 20));
                     if (!(c.max_rel_err < 1e-2))
                       throw RuntimeError("the GEMM ceiling's product is wrong (relative error " +
                                          std::to_string(c.max_rel_err) + "): not timing it");
                     r.machine.gemm_tflops = c.tflops;
                     r.machine.gemm_what = c.what;
                     r.machine.gemm_max_rel_err = c.max_rel_err;
                   }});
}

// The compute steps: flash-attention against the ceiling (the teaching kernel on the CPU, the fast kernels on a GPU).
void plan_compute(const Options& o, std::vector<Step>& steps) {
  const Backend b = o.backend;
  const bool cpu = b == Backend::Cpu;
  auto compute_point = [](Results& r, const std::string& variant, int L, const std::string& shape, double flops,
                          const bench::Timing& t) {
    Point p;
    p.section = "compute";
    p.kernel = "flash-attention";
    p.variant = variant;
    p.shape = shape;
    p.size = L;
    p.flops = flops;
    p.ms = t.median_ms;
    p.tflops = flops / (t.median_ms * 1e-3) / 1e12;
    p.ratio = r.machine.gemm_tflops > 0 ? p.tflops / r.machine.gemm_tflops : 0;
    r.points.push_back(p);
  };
  if (cpu) {
    const std::vector<int> lengths = o.quick ? std::vector<int>{64, 128, 256} : std::vector<int>{128, 256, 512, 1024};
    for (int L : lengths)
      steps.push_back({"flash-attention teaching (CPU), L = " + std::to_string(L), [=](Results& r) {
                         attention::Shape s;
                         s.lq = s.lk = L;
                         s.d = 64;
                         const size_t n = size_t(L) * 64;
                         std::vector<float> h(n);
                         Buffer<float> q(b, n), k(b, n), v(b, n), out(b, n);
                         Buffer<float>* in[3] = {&q, &k, &v};
                         for (uint32_t j = 0; j < 3; ++j) {
                           for (size_t i = 0; i < n; ++i) h[i] = hash_uniform(i, 20 + j);
                           in[j]->upload(h);
                         }
                         const bench::Timing t = bench::time(
                             b,
                             [&] {
                               flash_attention::run_teaching(b, q.data(), k.data(), v.data(), out.data(), s,
                                                             attention::Options{}, flash_attention::kDefaultBlockM,
                                                             flash_attention::kDefaultBlockN);
                             },
                             1, 3);
                         compute_point(r, "teaching d=64", L, s.text() + " fp32", 4.0 * L * double(L) * 64, t);
                       }});
    return;
  }
#ifdef KL_HAS_CUDA
  const int warm = repeats(o).warm, iters = repeats(o).iters;
  auto fws = std::make_shared<FlashWorkspace>();
  const std::vector<int> lengths =
      o.quick ? std::vector<int>{512, 1024, 2048} : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
  for (bool causal : o.quick ? std::vector<bool>{false} : std::vector<bool>{false, true})
    for (int d : {64, 128})
      for (int L : lengths) {
        const std::string variant = "fast d=" + std::to_string(d) + (causal ? " causal" : "");
        steps.push_back({"flash-attention " + variant + ", L = " + std::to_string(L), [=](Results& r) {
                           fws->ensure();
                           flash_attention::FastParams p;
                           p.B = int(kFlashTokens / L), p.H = int(kFlashWidth / d), p.Lq = p.Lk = L, p.d = d;
                           p.scale = 1.0f / std::sqrt(float(d));
                           p.causal = causal;
                           p.dtype = flash_attention::FastDtype::Bf16;
                           p.q = fws->q.data(), p.k = fws->k.data(), p.v = fws->v.data(), p.o = fws->o.data();
                           flash_attention::set_contiguous_strides(p);
                           const bench::Timing t = bench::time(b, [&] { flash_attention::run_fast(p); }, warm, iters);
                           const double flops = 4.0 * p.B * p.H * double(L) * L * d * (causal ? 0.5 : 1.0);
                           const std::string shape = "B=" + std::to_string(p.B) + " H=" + std::to_string(p.H) +
                                                     " L=" + std::to_string(L) + " d=" + std::to_string(d) +
                                                     (causal ? " causal" : "") + " bf16";
                           compute_point(r, variant, L, shape, flops, t);
                         }});
      }
#endif
}

}  // namespace

// What `measure` runs, in order: bandwidth, the GEMM ceiling, compute.
std::vector<Step> plan(const Options& o) {
  std::vector<Step> steps;
  plan_bandwidth(o, steps);
  plan_gemm_ceiling(o, steps);
  plan_compute(o, steps);
  return steps;
}

// [SECTION] running it, and the worker thread --------------------------------------------------------
Results run(const Options& o, const std::atomic<bool>* cancel,
            const std::function<void(const Results&, const std::string&)>& progress) {
  Results r;
  r.machine.backend = backend_name(o.backend);
  r.machine.cpu_figures = o.backend == Backend::Cpu;
  r.machine.quick = o.quick;
  r.machine.date = utc_now();
  try {
    r.machine.device = o.backend == Backend::Cuda ? device_info(o.backend).name : cpu_model() + " (CPU backend)";
    r.machine.l2_bytes = o.backend == Backend::Cuda ? device_info(o.backend).l2_bytes : 0;
    std::vector<Step> steps = plan(o);
    r.steps_total = int(steps.size());
    for (const Step& s : steps) {
      if (cancel && cancel->load()) {
        r.cancelled = true;
        break;
      }
      if (progress) progress(r, s.label);
      s.run(r);
      ++r.steps_done;
    }
    r.finished = !r.cancelled;
    if (o.backend == Backend::Cuda) mem::synchronize(o.backend);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  if (progress) progress(r, "");
  return r;
}

Worker::~Worker() {
  cancel();
  wait();
}

void Worker::start(const Options& o) {
  cancel();
  wait();
  cancel_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    results_ = Results{};
    current_ = "starting";
  }
  running_ = true;
  thread_ = std::thread([this, o] {
    Results r = run(o, &cancel_, [this](const Results& so_far, const std::string& label) {
      std::lock_guard<std::mutex> lock(mu_);
      results_ = so_far;
      current_ = label;
    });
    {
      std::lock_guard<std::mutex> lock(mu_);
      results_ = std::move(r);
      current_.clear();
    }
    running_ = false;
  });
}

void Worker::cancel() { cancel_ = true; }

void Worker::wait() {
  if (thread_.joinable()) thread_.join();
}

Results Worker::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return results_;
}

std::string Worker::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

}  // namespace kl::measure
