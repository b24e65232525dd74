#include "app/cli/tour.h"

#include <cstdio>
#include <fstream>

#include "app/cli/cli.h"
#include "app/cli/timeline.h"
#include "app/panels/timeline_view.h"
#include "app/tour_web.h"
#include "kernels/editable/launch.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/timeline_study.h"
#include "viz/gl_check.h"
#include "viz/png.h"

namespace kl::app::cli {
namespace {

// The gallery bugs the tour renders (kernels/editable/gallery/<rung>/<file>): each loaded as the rung's
// edited source for one image of its panel, at the settings where its symptom shows, its sentence the caption.
struct GalleryStop {
  const char* panel;  // the panel's id, which is also the rung's name
  const char* file;   // the gallery file
  std::vector<std::string> settings;
};
const std::vector<GalleryStop>& gallery_stops() {
  static const std::vector<GalleryStop> stops = {
      {"vector-add", "no_mask.cu", {}},
      {"transpose", "strided_read.cu", {"variant=naive"}},
      {"transpose", "tile_without_padding.cu", {"variant=padded"}},
      {"transpose", "transposed_index_in_tile.cu", {"variant=tiled"}},
      {"relu-dropout", "scale_by_p.cu", {}},
      {"softmax", "hard_coded_block_size.cu", {"n_cols=2000"}},
      {"softmax", "no_max_subtraction.cu", {"n_cols=2000", "x_scale=100"}},
      {"softmax", "missing_syncthreads.cu", {"n_cols=2000"}},
  };
  return stops;
}

editable::GalleryBug gallery_bug(const std::string& rung, const std::string& file) {
  for (const editable::GalleryBug& g : editable::gallery(rung))
    if (g.file == file) return g;
  throw RuntimeError("tour: no gallery bug " + file + " for " + rung);
}

// "Inside the fast kernel" (issue 30): every timeline of the embedded recording (docs/perf/timeline-h200.json,
// made on the GPU machine), drawn as the view draws it, each labelled in the index as a recording with its
// device and date.
void tour_timelines(Shell& s, viz::RenderHost& host, const std::string& dir, const Size& size, std::string* index,
                    std::vector<TourEntry>* entries, int* k) {
  namespace ts = timeline_study;
  const timeline::File& f = ts::embedded();
  *index += std::string("\n## Inside the fast kernel: timelines recorded on the GPU machine\n\nDrawn from ") +
            ts::kSourcePath + " (embedded at build time), not run here: each line says where and when it was "
            "recorded.\n\n";
  for (size_t i = 0; i < f.recordings.size(); ++i) {
    const timeline::Recording& r = f.recordings[i];
    const bool fwd = r.kernel == timeline::kForward;
    const int p = find_panel(s, fwd ? "flash-attention" : "backward");
    const std::string panel_title = p >= 0 ? s.panels[size_t(p)]->title() : r.kernel;
    char name[256];
    std::snprintf(name, sizeof name, "%02d-inside-%s-%s.png", ++*k, fwd ? "forward" : "backward", ts::short_name(r).c_str());
    TimelineView view("");
    view.use_file(f, ts::kSourcePath);
    view.select(int(i));
    draw_timeline_frames(view, host, s.ctx, 3, "tour");
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    if (!host.read_pixels(rgba, w, h)) throw RuntimeError("could not read the rendered frame back");
    viz::write_png(dir + "/" + name, rgba, w, h);
    const std::string about = "a recording, not a live run: " + ts::provenance(r);
    *index += "- [" + panel_title + ", inside the fast kernel: " + ts::title(r) + "](" + name + "): " + about + "\n";
    std::printf("wrote %s/%s\n", dir.c_str(), name);
    const std::string command = "kernel-ladder timeline --from " + std::string(ts::kSourcePath) + " --recording " +
                                std::to_string(i) + " --size " + std::to_string(size.w) + "x" + std::to_string(size.h) +
                                " --out " + name;
    entries->push_back({name, panel_title, "inside the fast kernel: " + ts::short_name(r), about, command, ""});
  }
}

}  // namespace

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
  index += "\n## Gallery: classic kernel bugs, each loaded as the edited kernel\n\n";
  for (const GalleryStop& g : gallery_stops()) {
    size_t i = 0;
    while (i < s.panels.size() && s.panels[i]->id() != g.panel) ++i;
    if (i == s.panels.size()) throw RuntimeError(std::string("tour: no panel ") + g.panel);
    const editable::GalleryBug bug = gallery_bug(g.panel, g.file);
    editable::set_edited({g.panel, bug.file, bug.text});
    s.panels = make_panels();
    s.current = i;
    for (const std::string& kv : g.settings) s.panels[i]->params().set(kv);
    std::string stem = bug.file.substr(0, bug.file.size() - 3);
    char name[256];
    std::snprintf(name, sizeof name, "%02d-%s-gallery-%s.png", ++k, g.panel, stem.c_str());
    try {
      render_shot(s, *host, dir + "/" + name, 3);
    } catch (...) {
      editable::reset_edited(g.panel);
      throw;
    }
    editable::reset_edited(g.panel);
    const std::string settings = join_settings(g.settings);
    index += "- [" + s.panels[i]->title() + ", gallery: " + bug.name + "](" + name + "): " + bug.sentence +
             " (" + bug.file + (g.settings.empty() ? "" : ", " + settings) + ")\n";
    std::printf("wrote %s/%s\n", dir.c_str(), name);
    entries.push_back({name, s.panels[i]->title(), "gallery: " + bug.name,
                       bug.sentence + " (" + settings + ")",
                       shot_command_line(g.panel, g.settings, size.w, size.h, s.ctx.backend.backend, name) +
                           " --source " + bug.file + "  # kernel-ladder's gallery file " + std::string(g.panel) + "/" +
                           bug.file,
                       ""});
  }
  tour_timelines(s, *host, dir, size, &index, &entries, &k);
  std::ofstream(dir + "/index.md") << index;
  std::printf("wrote %s/index.md (%d images)\n", dir.c_str(), k);
  if (o.animate) tour_animations(s, *host, dir, &entries, &k);
  write_tour_html(dir, "Rendered headlessly by kernel-ladder tour (" + s.ctx.backend.reason + ", " + s.gl_renderer + ").",
                  entries);
  std::printf("wrote %s/index.html (%zu files)\n", dir.c_str(), entries.size());
  return viz::gl_error_count() ? 1 : 0;
}

}  // namespace kl::app::cli
