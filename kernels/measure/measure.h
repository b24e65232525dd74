// The Measure view's measurements, with no GL and no ImGui: app/panels/measure_panel.cpp runs them on a
// background thread (progress, cancel between measurements) and `kernel-ladder measure` runs them in
// the foreground; both export what this returns (app/measure_export.h). Every number is measured in the
// same run as the ceiling it is compared with, through the rungs' own functions and kernels/measure/bench.h:
//   bandwidth  achieved GB/s (bytes each version actually moves / median time) against size N (fp32
//              elements) for vector-add fast (12 B/elem), relu-dropout fused (8) and unfused (16),
//              softmax fixed (8) and three_pass (20; rows of 4096 columns); the ceiling is a
//              device-to-device copy of N floats (8 B/elem), measured at every size. Every size is timed
//              cold, the kernels and the copy alike: the timed loop rotates through buffer sets that
//              together span 4x the L2 (bandwidth_sets), so no call finds its data in the cache (at
//              2^16..2^20 floats one set fits the H200's 60 MiB L2 many times over, and a warm loop would
//              time the L2, not the memory, and show kernels "above" the copy). Small sizes are still
//              launch-bound: a call has a fixed cost (launch, grid ramp-up, the last wave's tail), measured
//              here as the time of a 4-byte copy (Machine::call_us); where the copy of N floats takes less
//              than kLaunchBoundFactor times that, the ratio compares fixed costs, not bandwidth, and the
//              view says so (Point::launch_bound, verdict()).
//   fusion     fused against unfused at the largest size: the same points, read as time.
//   compute    FlashAttention `fast` (bf16, B*L = 16384 tokens, H*d = 2048) TFLOP/s against a large bf16
//              cuBLAS GEMM (kernels/measure/gemm_ceiling.h). The CPU backend has no fast variant: there the
//              teaching kernel (B = H = 1) is held against a plain CPU GEMM, and every figure is a CPU one.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/params.h"

namespace kl::measure {

struct Options {
  Backend backend = Backend::Cpu;
  bool quick = false;  // param::quick(): fewer, smaller sizes (tests, tours, a first look)
};

// The Measure view's parameters, one spec each, declared only here: the panel builds its ParamValues
// from params(), and `kernel-ladder measure --quick` takes its help from param::quick().
namespace param {
ParamSpec quick();  // Options::quick
ParamSpec run();    // the view's own: measure synchronously before the first frame (shots, the tour)
}  // namespace param
std::vector<ParamSpec> params();  // {quick, run}

// Where the numbers came from.
struct Machine {
  std::string device;    // "NVIDIA H200" / the CPU's model name
  std::string backend;   // "cuda" / "cpu"
  std::string date;      // UTC, ISO 8601: "2026-11-30T13:05:12Z"
  bool cpu_figures = false;
  bool quick = false;
  double copy_gbs = 0;   // copy bandwidth at the largest size (the ceiling in the text)
  int64_t copy_elements = 0;
  double gemm_tflops = 0;
  std::string gemm_what;  // "cuBLAS bf16 GEMM 8192^3, fp32 accumulate"
  double gemm_max_rel_err = 0;
  int64_t l2_bytes = 0;  // the device's L2 (0 on the CPU backend, which times what it finds)
  double call_us = 0;    // the fixed cost of one call: median time of a 4-byte copy (CUDA), 0 on the CPU
};

// A size is launch-bound when the copy of its N floats takes less than this many times Machine::call_us.
constexpr double kLaunchBoundFactor = 10.0;

struct Point {
  std::string section;  // "bandwidth" | "compute"
  std::string kernel;   // "copy", "vector-add", "relu-dropout", "softmax", "flash-attention"
  std::string variant;  // "d2d" / "memcpy", "fast", "fused", "unfused", "fixed", "three_pass", "fast d=64"
  std::string shape;    // "n=1048576", "256x4096 fp32", "B=32 H=32 L=512 d=64 bf16"
  double size = 0;      // x of the plot: elements N (bandwidth) or sequence length L (compute)
  double bytes = 0;     // bytes the version actually moves (bandwidth)
  double flops = 0;     // FLOP per call (compute)
  double ms = 0;        // median time per call
  double gbs = 0;       // bytes / time
  double tflops = 0;    // flops / time
  double ratio = 0;     // gbs / copy at the same size, or tflops / GEMM ceiling
  int sets = 1;         // buffer sets the timed loop rotated through (bandwidth; bandwidth_sets)
  bool launch_bound = false;  // bandwidth: the copy at this size took < kLaunchBoundFactor x call_us
  std::string series() const { return kernel + " " + variant; }
};

struct Results {
  Machine machine;
  std::vector<Point> points;
  int steps_done = 0, steps_total = 0;
  bool finished = false;   // every step ran
  bool cancelled = false;  // stopped between steps on request
  std::string error;       // a step failed (the message); the points before it stand
  // The point of `kernel variant` at `size` (nullptr when not measured).
  const Point* find(const std::string& kernel, const std::string& variant, double size) const;
  double largest_size(const std::string& section) const;
};

// One measurement, run in order; later steps may read earlier points (copy before the kernels).
struct Step {
  std::string label;  // "softmax three_pass N=2^20"
  std::function<void(Results&)> run;
};
std::vector<Step> plan(const Options& o);
// The sizes the bandwidth steps sweep.
std::vector<int64_t> sizes(const Options& o);

// How many buffer sets the bandwidth steps rotate through at N floats, for an L2 of `l2_bytes`: enough
// that the smallest footprint of a timed call (8 B per element: the copy, fused ReLU + dropout, one-pass
// softmax) times the set count spans 4x the L2 (bench::sets_to_span); 1 where l2_bytes is 0 (CPU).
int bandwidth_sets(int64_t l2_bytes, int64_t n);

// How a ratio is to be read (the table's colour): AboveCeiling for any ratio > 1 (a measurement the
// ceiling does not bound: never success), LaunchBound where the size is launch-bound, otherwise by the
// ratio: AtCeiling >= 0.8, Fair >= 0.5, Low below.
enum class Verdict { AtCeiling, Fair, Low, AboveCeiling, LaunchBound };
Verdict verdict(const Point& p);
const char* verdict_name(Verdict v);  // "at the ceiling", "fair", "low", "above the ceiling", "launch-bound"

// The largest measured size that is launch-bound (0 when none is).
double launch_bound_up_to(const Results& r);

// The view's sentences that carry numbers, made from the results so that text and numbers agree:
//   ceilings_sentence  "copy 3712 GB/s at 2^26 floats | GEMM ceiling 712 TFLOP/s (cuBLAS ...)"
//   cold_sentence      "timed cold: each size rotates through buffer sets spanning 4x the 60 MiB L2
//                       (480 sets at 2^16 floats, ...)", or the CPU's "timed warm" line
//   launch_sentence    "a call costs at least 2.1 us (a 4-byte copy): up to N = 2^20 the copy takes less
//                       than 10x that, so ratios there compare fixed costs, not bandwidth", or "" where no
//                       size is launch-bound
std::string ceilings_sentence(const Results& r);
// "2^20" for a power of two, else the integer ("1000").
std::string pow2_name(double n);
std::string cold_sentence(const Results& r);
std::string launch_sentence(const Results& r);

// Runs every step; `cancel` (may be null) is read between steps; `progress` (may be empty) is called
// before each step with the results so far and the step's label, and once at the end with "".
// Failures are caught into Results::error. Fills Machine first (device, date, backend).
Results run(const Options& o, const std::atomic<bool>* cancel = nullptr,
            const std::function<void(const Results&, const std::string&)>& progress = {});

// run() on a background thread: start, poll snapshot() each frame, cancel() between measurements.
// CUDA calls from the worker go to the same device and primary context as the UI's.
class Worker {
 public:
  Worker() = default;
  ~Worker();  // cancels and joins
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void start(const Options& o);  // a run in progress is cancelled and joined first
  void cancel();                 // the measurement in progress finishes, no new one starts
  void wait();                   // joins the thread (returns at once when none runs)
  bool running() const { return running_.load(); }
  Results snapshot() const;      // a copy of the results so far
  std::string current() const;   // label of the step in progress ("" when none)

 private:
  mutable std::mutex mu_;
  Results results_;
  std::string current_;
  std::atomic<bool> cancel_{false}, running_{false};
  std::thread thread_;
};

}  // namespace kl::measure
