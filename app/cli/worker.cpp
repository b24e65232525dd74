#include "app/cli/worker.h"

#include "kernels/editable/worker.h"

namespace kl::app::cli {

CLI::App* add_worker(CLI::App& app) {
  return app.add_subcommand("worker", "runs edited kernels for the app, which starts it (not for typing by hand)");
}

int run_worker() { return editable::worker::serve(3); }

}  // namespace kl::app::cli
