// `kernel-ladder bench [KERNEL] [--json FILE] [--quick]`: every kernel (or one) against its baseline,
// measured in the same run.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct BenchOptions {
  std::string kernel;  // empty: every kernel with a benchmark
  std::string json;
  bool quick = false;
};

CLI::App* add_bench(CLI::App& app, BenchOptions& o, Common& c);
int run_bench(const BenchOptions& o, const Common& c);

}  // namespace kl::app::cli
