// `kernel-ladder shot PANEL --out FILE.png [--size WxH] [--set k=v ...] [--frames N]`: one panel,
// rendered headlessly (no sidebar, no source pane), written as PNG. With --chrome, --no-source,
// --layout-report, --ui-scale or PANEL `all`, app/layout_report.h renders it as the window shows it
// and audits the layout.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct ShotOptions {
  std::string panel, out;  // `shot all`: every panel at every tour stop; out is then a directory
  int frames = 3;          // frames rendered before the capture
  bool chrome = false;     // the window's sidebar, source pane and status bar around the panel
  bool source = true;      // with chrome: the source pane shown
  bool layout_report = false;
  bool stops = false;      // one panel at each of its tour stops (the audit's per-panel matrix)
  std::string ui_scale;    // as typed; empty: 1
  std::string edited;      // --source FILE.cu: the panel's kernel replaced by this edited copy
  std::string editor, editor_file;  // with --chrome: the source pane in the editor (edit, diff, run), its text from a file
};

CLI::App* add_shot(CLI::App& app, ShotOptions& o, Common& c);
int run_shot(const ShotOptions& o, const Common& c);

}  // namespace kl::app::cli
