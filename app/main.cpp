#include "app/cli/cli.h"

int main(int argc, char** argv) { return kl::app::run_cli(argc, argv); }
