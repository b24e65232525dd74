#include "app/cli/window.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "app/layout_report.h"
#include "app/settings.h"
#include "kernels/runtime/errors.h"
#include "viz/gl_check.h"
#include "viz/ui_log.h"

namespace kl::app::cli {
namespace {

std::string config_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  std::string base = xdg && *xdg ? xdg : (home && *home ? std::string(home) + "/.config" : "");
  if (base.empty()) return "";
  ::mkdir(base.c_str(), 0755);
  std::string d = base + "/kernel-ladder";
  ::mkdir(d.c_str(), 0755);
  return d;
}

void apply_command_line(Shell& s, const WindowOptions& o, const Common& c) {
  if (!o.panel.empty()) {
    int i = find_panel(s, o.panel);
    if (i < 0) throw InputError("--panel " + o.panel + ": unknown panel; known: " + panel_ids(s));
    s.current = size_t(i);
  }
  for (const std::string& kv : c.sets) s.panels[s.current]->params().set(kv);
}

}  // namespace

void add_window(CLI::App& app, WindowOptions& o, Common& c) {
  add_backend_option(app, c.backend);
  add_size_option(app, c.size, "window size WIDTHxHEIGHT");
  app.add_option("--frames", o.frames, "close the window after N frames (tests)")->check(CLI::NonNegativeNumber);
  app.add_option("--panel", o.panel, "panel to open");
  add_set_option(app, c.sets, "key=value for the opened panel");
  app.add_option("--ui-scale", o.ui_scale, "UI scale in [0.5, 4] (default: the monitor's content scale)");
  app.add_option("--ui-log", o.ui_log, "append one line per UI event (panel, parameter, refusal, hover, screenshot, size)");
}

int run_window(const WindowOptions& o, const Common& c) {
  if (!o.ui_scale.empty()) set_window_scale_override(parse_ui_scale(o.ui_scale));
  if (!o.ui_log.empty() && !viz::ui_log::open(o.ui_log))
    throw InputError("--ui-log " + o.ui_log + ": cannot be opened for writing");
  Shell s = make_shell(c.backend);
  s.idle_waits = o.frames == 0;  // --frames N counts frames: those must come without input
  apply_command_line(s, o, c);  // bad input exits 2 before a window opens
  viz::HostOptions ho;
  const Size size = parse_size(c.size, {0, 0});  // none given: most of the monitor (window_host.cpp)
  ho.width = size.w;
  ho.height = size.h;
  const std::string dir = config_dir();
  if (!dir.empty()) ho.ini_path = dir + "/imgui.ini";
  std::string err;
  auto host = viz::make_window_host(ho, &err);
  PanelsBeforeHost panels_first{s};
  if (!host) {
    std::fprintf(stderr,
                 "kernel-ladder: %s; render panels without a display: `kernel-ladder shot PANEL --out FILE.png` "
                 "or `kernel-ladder tour --out DIR`\n",
                 err.c_str());
    return 1;
  }
  SettingsPersistence settings(s, ho.ini_path);  // the last run's panel and parameters...
  apply_command_line(s, o, c);                    // ...with --panel and --set on top
  window_start(s, *host);                         // scale (monitor, settings, --ui-scale) and geometry
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  std::printf("kernel-ladder: %s; %s; GL_RENDERER %s\n", s.ctx.backend.reason.c_str(), host->kind().c_str(),
              s.gl_renderer.c_str());
  if (!settings.summary().empty()) std::printf("kernel-ladder: %s\n", settings.summary().c_str());
  long n = 0, shots = 0;
  while (host->begin_frame()) {
    settings.snapshot();
    draw_shell(s, float(host->width()), float(host->height()));
    host->end_frame();
    window_after_frame(s, *host, &shots);  // the event log, F12's screenshot, the geometry to remember
    if (o.frames > 0 && ++n >= o.frames) break;
  }
  const int errors = viz::gl_error_count();
  std::printf("kernel-ladder: closed after %ld frames, %d GL errors\n", long(s.ctx.frame), errors);
  if (errors) std::fprintf(stderr, "kernel-ladder: first GL error: %s\n", viz::gl_first_error().c_str());
  return errors ? 1 : 0;
}

}  // namespace kl::app::cli
