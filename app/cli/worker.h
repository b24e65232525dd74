// `kernel-ladder worker`: the process the app starts to run edited kernels (kernels/editable/worker.h);
// it serves launches on file descriptor 3 until the app closes it. Not for typing by hand.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

CLI::App* add_worker(CLI::App& app);
int run_worker();

}  // namespace kl::app::cli
