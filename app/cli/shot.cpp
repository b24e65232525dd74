#include "app/cli/shot.h"

#include <cstdio>

#include "app/cli/source.h"
#include "app/layout_report.h"
#include "kernels/studies/study.h"
#include "kernels/runtime/errors.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"

namespace kl::app::cli {

CLI::App* add_shot(CLI::App& app, ShotOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("shot", "render one panel headlessly to PNG");
  cmd->add_option("panel", o.panel, "panel id (see list)")->required();
  cmd->add_option("--out", o.out, "PNG file (shot all: a directory)");
  cmd->add_flag("--chrome", o.chrome, "the window's sidebar, source pane and status bar around the panel");
  cmd->add_flag("--no-source", [&o](int64_t) { o.source = false; }, "with --chrome: the source pane hidden");
  cmd->add_flag("--layout-report", o.layout_report, "list what is cut, outside its region or overlapping; exit 1 if any");
  cmd->add_option("--ui-scale", o.ui_scale, "UI scale in [0.5, 4] (default 1)");
  cmd->add_option("--editor", o.editor, "with --chrome: the source pane in the editor: edit, diff (against shipped) or run (Ctrl+Enter once)")
      ->check(CLI::IsMember({"edit", "diff", "run"}));
  cmd->add_option("--editor-file", o.editor_file, "with --editor: the editor's text, from this file (one panel)");
  cmd->add_flag("--stops", o.stops, "one panel at each of its tour stops (out: a directory), as `shot all` does");
  add_size_option(*cmd, c.size, "WIDTHxHEIGHT (default 1400x900)");
  add_backend_option(*cmd, c.backend);
  add_set_option(*cmd, c.sets, "key=value (repeatable)");
  cmd->add_option("--frames", o.frames, "frames rendered before the capture")->check(CLI::Range(1, 1000));
  cmd->add_option("--source", o.edited, "FILE.cu: the panel's views drawn from this edited copy of `source PANEL`");
  return cmd;
}

namespace {

int run_look(const ShotOptions& o, const Common& c) {
  LookOptions look;
  look.panel = o.panel, look.out = o.out, look.backend = c.backend, look.sets = c.sets;
  look.frames = o.frames;
  look.editor = o.editor, look.editor_file = o.editor_file;
  look.chrome = o.chrome, look.source = o.source, look.report = o.layout_report, look.stops = o.stops;
  const Size sz = parse_size(c.size, {1400, 900});
  look.width = sz.w, look.height = sz.h;
  if (!o.ui_scale.empty()) look.ui_scale = parse_ui_scale(o.ui_scale);
  if (look.out.empty() && !look.report) throw InputError("--out: required (a PNG file; for `shot all` a directory)");
  return look_command(look);
}

// The rung whose editable source a panel draws: the shipped source its source pane shows (the panel
// "backward" draws flash_attention_backward.cu, rung flash-attention-backward); else the panel's id.
std::string rung_of_panel(const std::string& panel, const Common& c) {
  Shell s = make_shell(c.backend);
  const int i = find_panel(s, panel);
  if (i < 0) return panel;
  const std::string file = s.panels[size_t(i)]->source_focus().file;
  for (const std::string& rung : editable::shipped_rungs())
    if (editable::shipped_file(rung) == file) return rung;
  return panel;
}

// --source: the edited kernel held for the panel's rung, run once through the panel's study first so a
// compile error exits 2 before anything renders. Returns the kernel's fault line ("" when it ran cleanly).
std::string use_edited_source(const ShotOptions& o, const Common& c) {
  if (o.panel == "all" || o.stops) throw InputError("--source: one panel at a time (not with `shot all` or --stops)");
  editable::set_edited(read_edited_source(rung_of_panel(o.panel, c), "", o.edited));
  const study::Entry* e = study::find(o.panel);
  if (!e) throw InputError("--source: panel " + o.panel + " has no study to run the edited kernel");
  ParamValues values(e->params());
  for (const std::string& kv : c.sets) values.set(kv);
  const study::Report r = e->run(choose_backend(c.backend).backend, values);
  for (const std::string& line : r.lines)
    if (line.rfind("edited kernel: ", 0) == 0) return line.substr(15);
  return "";
}

int shot_panel(const ShotOptions& o, const Common& c) {
  if (!o.editor.empty() && !o.chrome) throw InputError("--editor " + o.editor + ": only with --chrome (the editor is the source pane)");
  if (!o.editor_file.empty() && o.editor.empty()) throw InputError("--editor-file " + o.editor_file + ": only with --editor");
  if (o.chrome || o.layout_report || o.stops || !o.ui_scale.empty() || o.panel == "all") return run_look(o, c);
  if (o.out.empty()) throw InputError("--out: required (a PNG file)");
  Shell s = make_shell(c.backend);
  s.sidebar = false;
  s.show_source = false;  // shots show the view alone
  const int i = find_panel(s, o.panel);
  if (i < 0) throw InputError("shot " + o.panel + ": unknown panel; known: " + panel_ids(s));
  s.current = size_t(i);
  for (const std::string& kv : c.sets) s.panels[s.current]->params().set(kv);
  auto host = headless(parse_size(c.size, {1400, 900}));
  PanelsBeforeHost panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  render_shot(s, *host, o.out, o.frames);
  std::printf("wrote %s (%dx%d, %s, GL_RENDERER %s; %s)\n", o.out.c_str(), host->width(), host->height(),
              s.ctx.backend.reason.c_str(), s.gl_renderer.c_str(), viz::DataTexture::last_interop_status().c_str());
  return viz::gl_error_count() ? 1 : 0;
}

}  // namespace

int run_shot(const ShotOptions& o, const Common& c) {
  if (o.edited.empty()) return shot_panel(o, c);
  const std::string fault = use_edited_source(o, c);
  const int rc = shot_panel(o, c);
  if (fault.empty() || rc != 0) return rc;
  std::fprintf(stderr, "kernel-ladder: %s\n", fault.c_str());
  return 3;
}

}  // namespace kl::app::cli
