// `kernel-ladder animate PANEL --vary KEY=FROM..TO[:STEP] [--set k=v ...] [--size WxH] [--fps N] [--chrome]
// --out FILE.gif`: one headless frame per value into an animated GIF (app/animate.h holds the options and the run).
#pragma once
#include "app/animate.h"
#include "app/cli/common.h"

namespace kl::app::cli {

struct AnimateCliOptions {
  AnimateOptions animate;
  std::string size;  // WIDTHxHEIGHT; default 1000x700
};

CLI::App* add_animate(CLI::App& app, AnimateCliOptions& o, Common& c);
int run_animate(AnimateCliOptions o, const Common& c);

}  // namespace kl::app::cli
