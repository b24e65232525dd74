#include "app/cli/measure.h"

#include "app/measure_export.h"
#include "kernels/measure/measure.h"

namespace kl::app::cli {

CLI::App* add_measure(CLI::App& app, MeasureOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("measure", "the Measure view's measurements, no window: bandwidth, fusion, "
                                                "FlashAttention against a GEMM ceiling");
  cmd->add_option("--json", o.json, "write the numbers and the machine as JSON");
  cmd->add_option("--csv", o.csv, "write the numbers and the machine as CSV");
  add_backend_option(*cmd, c.backend);
  cmd->add_flag("--quick", o.quick, measure::param::quick().help);
  return cmd;
}

int run_measure(const MeasureOptions& o, const Common& c) { return measure_command(c.backend, o.quick, o.json, o.csv); }

}  // namespace kl::app::cli
