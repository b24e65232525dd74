// Timing for the `bench` command: CUDA events on the CUDA backend (median of many runs after warm-up),
// steady_clock on the CPU backend, and the baseline every ratio is measured against in the same run:
// a device-to-device copy (bytes read + bytes written over time).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"

namespace kl::bench {

struct Timing {
  double median_ms = 0, min_ms = 0;
  int iterations = 0;
};

// Runs fn `warmup` times, then `iterations` times each timed on its own; fn launches work on the
// default stream (CUDA) or runs it (CPU). On CUDA the timed loop is queued behind a 10 ms spin kernel
// (detail::enqueue_spin), so the host's launch overhead is not timed, only the GPU's work.
// On CUDA, with KL_BENCH_WARMUP_MS set (warmup_ms_from_env), fn also runs until that many milliseconds have
// passed before the timed loop, so the row is timed under load rather than after idle: the fast attention
// kernels drive an H100 into its power cap (1.4-1.74 GHz against 1.98 GHz for a short row after idle), and one
// row read 590.9 TFLOP/s without a warm-up, 513.0 after 200 ms (docs/perf-log.md, 2026-12-06). Off by default;
// bench/peers_common.py reads the same variable for the peers.
Timing time(Backend b, const std::function<void()>& fn, int warmup = 5, int iterations = 30);
// KL_BENCH_WARMUP_MS: unset or empty 0 (the warm-up is `warmup` runs alone); a number of milliseconds in
// [0, 10000], else an InputError naming the variable, its value and the range.
double warmup_ms_from_env();

// How many (input, output) sets a timed loop rotates through so that no launch finds the data of the one
// before it in the L2 cache: enough sets to span 4x the L2, 1 when one set already does. Without it, a
// problem that fits the L2 (softmax 4096 x 1024 fp32 moves 32 MiB; the H200's L2 holds 60) is timed
// partly from the cache, and a kernel's cache hints decide its ratio. The CPU backend times what it
// finds: 1.
int cold_sets(Backend b, size_t bytes_per_set);
// The arithmetic behind it: the fewest sets of `bytes_per_set` that together span 4 * l2_bytes (at least 1).
int sets_to_span(int64_t l2_bytes, size_t bytes_per_set);

// Copy bandwidth in GB/s (1e9 bytes/s) counting bytes read plus bytes written, for a copy of `bytes`
// bytes (device-to-device on CUDA, memcpy on the CPU), rotating through `sets` source/destination pairs.
double copy_bandwidth_gbs(Backend b, size_t bytes, int sets = 1);
// The timing behind it: one copy of `bytes` per call, rotating through `sets` pairs.
Timing copy_timing(Backend b, size_t bytes, int sets = 1);

struct Row {
  std::string kernel, variant, shape;
  double ms = 0;
  double gbs = 0;        // achieved bandwidth (bytes the kernel must move / time); 0 if not meaningful
  double tflops = 0;     // achieved FLOP/s in TFLOP/s; 0 if not meaningful
  double ratio = 0;      // against `baseline`
  std::string baseline;  // "copy 4.31 TB/s", "unfused", "torch"
};
// TFLOP/s of `flops` done in `ms` milliseconds, as Row::tflops holds it; 0 where no time was measured.
inline double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0; }

std::string format_table(const std::vector<Row>& rows);

namespace detail {
// CUDA builds (kernels/measure/bench.cu): keeps the GPU busy for `ms` milliseconds, (0, 1000].
void enqueue_spin(double ms);
}  // namespace detail

}  // namespace kl::bench
