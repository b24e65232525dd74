// `kernel-ladder bench-frame [--size L] [--frames N] [--json FILE] [--png FILE]`: frame time of a
// recomputed attention-weight heatmap, CUDA-GL interop against copy + glTexSubImage2D
// (app/bench_frame.h holds the options and the measurement).
#pragma once
#include "app/bench_frame.h"
#include "app/cli/common.h"

namespace kl::app::cli {

CLI::App* add_bench_frame(CLI::App& app, BenchFrameOptions& o, Common& c);
int run_bench_frame(BenchFrameOptions o, const Common& c);

}  // namespace kl::app::cli
