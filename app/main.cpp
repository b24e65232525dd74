#include "app/cli/cli.h"
#include "kernels/runtime/startup_trace.h"

int main(int argc, char** argv) {
  kl::startup::mark("main reached: the binary and its libraries loaded, static initialisers run");
  return kl::app::run_cli(argc, argv);
}
