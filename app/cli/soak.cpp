#include "app/cli/soak.h"

namespace kl::app::cli {

CLI::App* add_soak(CLI::App& app, SoakCliOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("soak", "render many headless frames over every panel and parameter extreme; "
                                             "report memory growth, GL and CUDA errors");
  SoakOptions& so = o.soak;
  cmd->add_option("--frames", so.frames, "frames to render (default 10000)")->check(CLI::Range(1L, 1000000000L));
  add_size_option(*cmd, o.size, "WIDTHxHEIGHT (default 1280x800)");
  add_backend_option(*cmd, c.backend);
  cmd->add_option("--every", so.every, "frames between parameter changes (default 4)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--max-growth-mib", so.max_growth_mib,
                  "allowed growth of host RSS and device memory after the first 100 frames (default 64)")
      ->check(CLI::NonNegativeNumber);
  return cmd;
}

int run_soak(SoakCliOptions o, const Common& c) {
  const Size sz = parse_size(o.size, {1280, 800});
  o.soak.width = sz.w;
  o.soak.height = sz.h;
  o.soak.backend = c.backend;
  return soak_command(o.soak);
}

}  // namespace kl::app::cli
