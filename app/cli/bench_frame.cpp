#include "app/cli/bench_frame.h"

namespace kl::app::cli {

CLI::App* add_bench_frame(CLI::App& app, BenchFrameOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand(
      "bench-frame", "frame time of a recomputed attention-weight heatmap: CUDA-GL interop vs copy + upload");
  // Its --size is the heatmap's side L, not a window size: an option of its own.
  cmd->add_option("--size", o.size, "L (default 4096 on CUDA, 512 on the CPU)");
  cmd->add_option("--frames", o.frames, "timed frames per path");
  cmd->add_option("--json", o.json, "write the results as JSON");
  cmd->add_option("--png", o.png, "write the last frame as PNG");
  add_backend_option(*cmd, c.backend);
  return cmd;
}

int run_bench_frame(BenchFrameOptions o, const Common& c) {
  o.backend = c.backend;
  return bench_frame(o);
}

}  // namespace kl::app::cli
