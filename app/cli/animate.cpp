#include "app/cli/animate.h"

namespace kl::app::cli {

CLI::App* add_animate(CLI::App& app, AnimateCliOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("animate", "render one frame per value of a parameter headlessly into an "
                                                "animated GIF");
  AnimateOptions& ao = o.animate;
  cmd->add_option("panel", ao.panel, "panel id (see list)")->required();
  cmd->add_option("--vary", ao.vary, "KEY=FROM..TO[:STEP]: the parameter walked, one frame per value")->required();
  add_set_option(*cmd, ao.sets, "key=value (repeatable)");
  add_size_option(*cmd, o.size, "WIDTHxHEIGHT (default 1000x700)");
  cmd->add_option("--fps", ao.fps, "frames per second (default 4)");
  cmd->add_flag("--chrome", ao.chrome, "the window's sidebar, source pane and status bar around the panel");
  add_backend_option(*cmd, c.backend);
  cmd->add_option("--out", ao.out, "GIF file")->required();
  return cmd;
}

int run_animate(AnimateCliOptions o, const Common& c) {
  const Size sz = parse_size(o.size, {1000, 700});
  o.animate.width = sz.w;
  o.animate.height = sz.h;
  o.animate.backend = c.backend;
  return animate_command(o.animate);
}

}  // namespace kl::app::cli
