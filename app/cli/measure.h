// `kernel-ladder measure [--json FILE] [--csv FILE] [--quick]`: the Measure view's numbers with no
// window and no GL (app/measure_export.h writes them).
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct MeasureOptions {
  std::string json, csv;
  bool quick = false;
};

CLI::App* add_measure(CLI::App& app, MeasureOptions& o, Common& c);
int run_measure(const MeasureOptions& o, const Common& c);

}  // namespace kl::app::cli
