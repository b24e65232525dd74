// `kernel-ladder list`: panels with their parameters, kernels with inputs, variants and parameters,
// the studies, and the backends this machine has.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

CLI::App* add_list(CLI::App& app);
int run_list();

}  // namespace kl::app::cli
