// `kernel-ladder tour --out DIR [--size WxH]`: every panel at its named tour stops, headlessly, one PNG
// per stop and DIR/index.md listing them with their settings. DIR and its missing parents are created.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct TourOptions {
  std::string out;  // directory
};

CLI::App* add_tour(CLI::App& app, TourOptions& o, Common& c);
int run_tour(const TourOptions& o, const Common& c);

}  // namespace kl::app::cli
