// `kernel-ladder tour --out DIR [--size WxH] [--animate]`: every panel at its named tour stops, headlessly,
// one PNG per stop, DIR/index.md listing them with their settings and DIR/index.html (app/tour_web.h);
// with --animate also each panel's animations as GIFs. DIR and its missing parents are created.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct TourOptions {
  std::string out;       // directory
  bool animate = false;  // also each panel's animations() as GIFs
};

CLI::App* add_tour(CLI::App& app, TourOptions& o, Common& c);
int run_tour(const TourOptions& o, const Common& c);

}  // namespace kl::app::cli
