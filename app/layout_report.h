// `shot PANEL --chrome` (exactly what the window shows: sidebar, source pane, status bar) and
// `shot PANEL|all --layout-report` (the layout audit, viz/layout_audit.h, over one panel or over every
// panel at every tour stop, in one process): one line per finding, exit 1 when there is any.
#pragma once
#include <string>
#include <vector>

namespace kl::app {

struct LookOptions {
  std::string panel;  // a panel id, or "all": every panel at each of its tour stops
  std::string out;    // one panel: the PNG file; "all": a directory for NN-PANEL-STOP.png; empty: none
  int width = 1400, height = 900;
  std::string backend = "auto";
  std::vector<std::string> sets;  // one panel only
  int frames = 3;
  bool chrome = false;  // sidebar, source pane and status bar as in the window
  bool source = true;   // with chrome: the source pane shown (it is, by default, in the window)
  bool report = false;  // run the layout audit
  bool stops = false;   // one panel: at each of its tour stops (as `all` does for every panel)
  float ui_scale = 1.0f;
  std::string editor;       // with chrome: "edit", "diff" or "run" (Ctrl+Enter once, before the capture); empty: the read-only source
  std::string editor_file;  // with editor, one panel: the editor's text from this file
};

int look_command(const LookOptions& o);

// "--ui-scale X": a number in [0.5, 4]; else InputError in the shared wording (exit 2).
float parse_ui_scale(const std::string& text);

}  // namespace kl::app
