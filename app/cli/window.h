// `kernel-ladder [--backend B] [--size WxH] [--panel ID] [--set k=v ...] [--frames N] [--ui-scale X]
// [--ui-log FILE]`: the desktop window (no subcommand). Its options are the top level's.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct WindowOptions {
  std::string panel;  // panel to open
  int frames = 0;     // close after N frames (tests); 0: until closed
  std::string ui_scale;  // --ui-scale as typed; empty: the monitor's content scale (or the remembered one)
  std::string ui_log;    // --ui-log FILE: one line per UI event
};

void add_window(CLI::App& app, WindowOptions& o, Common& c);
int run_window(const WindowOptions& o, const Common& c);

}  // namespace kl::app::cli
