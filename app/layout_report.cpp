#include "app/layout_report.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "app/cli/common.h"  // make_shell, headless
#include "app/shell.h"
#include "kernels/runtime/errors.h"
#include "viz/gl_check.h"
#include "viz/layout_audit.h"
#include "viz/png.h"
#include "viz/render_host.h"

namespace kl::app {

float parse_ui_scale(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end != '\0' || !(v >= viz::kMinUiScale && v <= viz::kMaxUiScale))
    throw InputError(out_of_range_message("--ui-scale", text, "[0.5, 4]"));
  return float(v);
}

namespace {

struct View {
  size_t panel = 0;
  std::string stop;  // empty: the panel's current settings
  std::vector<std::string> settings;
};

// Renders the shell `frames` times; the audit sees the last frame.
std::vector<std::string> render(Shell& s, viz::RenderHost& host, int frames, const std::string& context) {
  for (int i = 0; i < frames; ++i) {
    if (!host.begin_frame()) throw RuntimeError("headless host stopped");
    viz::audit::clear();
    draw_shell(s, float(host.width()), float(host.height()));
    host.end_frame();
  }
  return viz::audit::collect(context);
}

void write_png(viz::RenderHost& host, const std::string& file) {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  if (!host.read_pixels(rgba, w, h)) throw RuntimeError("could not read the rendered frame back");
  viz::write_png(file, rgba, w, h);
  std::printf("wrote %s\n", file.c_str());
}

// The source pane in the editor, as the window shows it after "Edit" (and a diff or one Ctrl+Enter).
void open_editor(Shell& s, const std::string& mode, const std::string& text) {
  const Panel::SourceFocus f = s.panels[s.current]->source_focus();
  s.editor.editing = true;
  s.editor.diff = mode == "diff";
  if (f.file.empty()) return;
  const std::string rung = editor::rung_of_file(f.file);
  if (!text.empty()) editor::set_text(s.editor, rung, text);
  if (mode == "run") editor::compile_and_run(s.editor, *s.panels[s.current], s.ctx, rung);
}

}  // namespace

int look_command(const LookOptions& o) {
  Shell s = cli::make_shell(o.backend);
  s.ctx.headless = true;
  s.sidebar = o.chrome;
  s.show_source = o.chrome && o.source;
  std::vector<View> views;
  const bool one = o.panel != "all";
  const int only = one ? find_panel(s, o.panel) : -1;
  if (one && only < 0) throw InputError("shot " + o.panel + ": unknown panel; known: " + panel_ids(s) + ", all");
  const bool all = !one || o.stops;  // views at tour stops: every panel's, or with --stops one panel's
  if (all) {
    if (!o.sets.empty()) throw InputError("--set: not with `shot all` or --stops (each stop has its own settings)");
    for (size_t i = 0; i < s.panels.size(); ++i)
      if (!one || int(i) == only)
        for (const Panel::TourStop& t : s.panels[i]->tour_stops()) views.push_back({i, t.name, t.settings});
    if (!o.out.empty()) {
      ::mkdir(o.out.c_str(), 0755);
      struct stat st{};
      if (::stat(o.out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw InputError("--out " + o.out + ": `shot all` writes into a directory, and this is none");
    }
  } else {
    for (const std::string& kv : o.sets) s.panels[size_t(only)]->params().set(kv);
    views.push_back({size_t(only), "", {}});
  }
  std::string editor_text;
  if (!o.editor_file.empty()) {
    if (!one || o.stops) throw InputError("--editor-file: one panel only (each panel has its own source)");
    std::ifstream f(o.editor_file, std::ios::binary);
    if (!f) throw InputError("--editor-file " + o.editor_file + ": cannot be read");
    editor_text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  viz::set_ui_scale(o.ui_scale);
  viz::audit::set_enabled(o.report);
  auto host = cli::headless(cli::Size{o.width, o.height});
  struct PanelsFirst {  // panels own GL objects: they go before the host
    Shell& s;
    ~PanelsFirst() { s.panels.clear(); }
  } panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  char look[96];
  std::snprintf(look, sizeof look, "%dx%d scale %g%s", o.width, o.height, double(o.ui_scale),
                !o.chrome ? "" : o.source ? " chrome+source" : " chrome");
  long findings = 0;
  int k = 0;
  for (const View& v : views) {
    if (all) {
      s.panels = make_panels();  // each stop exactly its settings on top of the defaults
      for (const std::string& kv : v.settings) s.panels[v.panel]->params().set(kv);
    }
    s.current = v.panel;
    if (!o.editor.empty()) open_editor(s, o.editor, editor_text);
    const std::string name = s.panels[v.panel]->id() + (v.stop.empty() ? "" : "/" + v.stop);
    for (const std::string& line : render(s, *host, o.frames, name + " " + look)) {
      std::printf("%s\n", line.c_str());
      ++findings;
    }
    ++k;
    if (o.out.empty()) continue;
    if (!all) {
      write_png(*host, o.out);
      continue;
    }
    char file[256];
    std::snprintf(file, sizeof file, "%s/%02d-%s-%s.png", o.out.c_str(), k, s.panels[v.panel]->id().c_str(),
                  v.stop.c_str());
    write_png(*host, file);
  }
  if (o.report)
    std::printf("layout report: %ld finding%s over %d view%s at %s\n", findings, findings == 1 ? "" : "s", k,
                k == 1 ? "" : "s", look);
  if (viz::gl_error_count()) {
    std::fprintf(stderr, "kernel-ladder: GL errors: %d (first: %s)\n", viz::gl_error_count(),
                 viz::gl_first_error().c_str());
    return 1;
  }
  return findings ? 1 : 0;
}

}  // namespace kl::app
