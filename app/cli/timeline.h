// `kernel-ladder timeline flash-attention|flash-attention-backward [--set L=.. d=.. causal=.. B=.. H=..
//  deterministic=..] [--path P] [--ctas LIST|all] [--iterations N] --json FILE [--append]`: records the
// instrumented Hopper kernels' timeline (issue 30, kernels/measure/timeline.h) headlessly on the GPU and writes
// it as JSON, with a summary on stdout. Bad input exits 2 with one line; so does a machine that cannot run the
// instrumented kernels (no CUDA, no H100/H200).
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct TimelineOptions {
  std::string kernel, path = "auto", ctas, json;
  int iterations = 20;
  bool append = false;
};

CLI::App* add_timeline(CLI::App& app, TimelineOptions& o, Common& c);
int run_timeline(const TimelineOptions& o, const Common& c);

}  // namespace kl::app::cli
