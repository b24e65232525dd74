// `kernel-ladder soak [--frames N] [--size WxH] [--every N] [--max-growth-mib M]`: many headless frames
// over every panel and parameter extreme (app/soak.h holds the options and the run).
#pragma once
#include "app/cli/common.h"
#include "app/soak.h"

namespace kl::app::cli {

struct SoakCliOptions {
  SoakOptions soak;
  std::string size;  // WIDTHxHEIGHT; default 1280x800
};

CLI::App* add_soak(CLI::App& app, SoakCliOptions& o, Common& c);
int run_soak(SoakCliOptions o, const Common& c);

}  // namespace kl::app::cli
