// `kernel-ladder shot PANEL --out FILE.png [--size WxH] [--set k=v ...] [--frames N]`: one panel,
// rendered headlessly (no sidebar, no source pane), written as PNG.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct ShotOptions {
  std::string panel, out;
  int frames = 3;  // frames rendered before the capture
};

CLI::App* add_shot(CLI::App& app, ShotOptions& o, Common& c);
int run_shot(const ShotOptions& o, const Common& c);

}  // namespace kl::app::cli
