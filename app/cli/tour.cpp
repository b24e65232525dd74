#include "app/cli/tour.h"

#include <cstdio>
#include <fstream>

#include "app/cli/cli.h"
#include "app/tour_web.h"
#include "viz/gl_check.h"

namespace kl::app::cli {

CLI::App* add_tour(CLI::App& app, TourOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("tour", "render every panel at named settings, with an index");
  cmd->add_option("--out", o.out, "directory")->required();
  add_size_option(*cmd, c.size, "WIDTHxHEIGHT");
  add_backend_option(*cmd, c.backend);
  cmd->add_flag("--animate", o.animate, "also write each panel's animations as GIFs");
  return cmd;
}

int run_tour(const TourOptions& o, const Common& c) {
  const std::string& dir = o.out;
  Shell s = make_shell(c.backend);
  s.sidebar = false;
  s.show_source = false;
  make_directories(dir, "--out");
  const Size size = parse_size(c.size, {1400, 900});
  auto host = headless(size);
  PanelsBeforeHost panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  std::vector<TourEntry> entries;
  std::string index = "# Kernel Ladder: the tour\n\nRendered headlessly by `kernel-ladder tour` (" + s.ctx.backend.reason +
                      ", " + s.gl_renderer + ").\n\n";
  int k = 0;
  for (size_t i = 0; i < s.panels.size(); ++i) {
    for (const Panel::TourStop& stop : s.panels[i]->tour_stops()) {
      // A fresh panel per stop, so each image shows exactly the named settings on top of the defaults.
      s.panels = make_panels();
      s.current = i;
      std::string settings;
      for (const std::string& kv : stop.settings) {
        s.panels[i]->params().set(kv);
        settings += (settings.empty() ? "" : ", ") + kv;
      }
      char name[256];
      std::snprintf(name, sizeof name, "%02d-%s-%s.png", ++k, s.panels[i]->id().c_str(), stop.name.c_str());
      render_shot(s, *host, dir + "/" + name, 3);
      index += "- [" + s.panels[i]->title() + "](" + name + "): " + (settings.empty() ? "defaults" : settings) + "\n";
      std::printf("wrote %s/%s\n", dir.c_str(), name);
      entries.push_back({name, s.panels[i]->title(), stop.name, join_settings(stop.settings),
                         shot_command_line(s.panels[i]->id(), stop.settings, size.w, size.h, s.ctx.backend.backend, name),
                         ""});
    }
  }
  std::ofstream(dir + "/index.md") << index;
  std::printf("wrote %s/index.md (%d images)\n", dir.c_str(), k);
  if (o.animate) tour_animations(s, *host, dir, &entries, &k);
  write_tour_html(dir, "Rendered headlessly by kernel-ladder tour (" + s.ctx.backend.reason + ", " + s.gl_renderer + ").",
                  entries);
  std::printf("wrote %s/index.html (%zu files)\n", dir.c_str(), entries.size());
  return viz::gl_error_count() ? 1 : 0;
}

}  // namespace kl::app::cli
