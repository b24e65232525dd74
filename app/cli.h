// The command line: `kernel-ladder [window options] | shot | run | list | bench | tour`.
// Returns the process exit code: 0 success, 2 bad input (one line naming the parameter, the value and
// the allowed range), 1 a runtime failure below us (CUDA, GL, I/O).
#pragma once

namespace kl::app {
int run_cli(int argc, char** argv);
}  // namespace kl::app
