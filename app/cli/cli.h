// The command line: `kernel-ladder [window options] | shot | run | list | study | bench | tour | measure
// | bench-frame | soak`, one file per subcommand in app/cli/. Returns the process exit code: 0 success,
// 2 bad input (one line naming the parameter, the value and the allowed range), 1 a runtime failure
// below us (CUDA, GL, I/O).
#pragma once
#include <string>

namespace kl::app {

int run_cli(int argc, char** argv);

// Creates `dir` and every missing parent (as `mkdir -p`). A part that cannot be created is refused as
// InputError naming `option`, the path, the part and the OS's reason:
// "--out a/f/x: cannot create a/f (Not a directory)".
void make_directories(const std::string& dir, const std::string& option);

}  // namespace kl::app
