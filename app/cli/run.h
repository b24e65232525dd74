// `kernel-ladder run KERNEL --in NAME=FILE.npy ... --out FILE.npy [--variant V] [--set k=v ...]
//  [--weights FILE.npy] [--trace PREFIX]`: one kernel of the registry on float32 .npy inputs.
#pragma once
#include <vector>

#include "app/cli/common.h"

namespace kl::app::cli {

struct RunOptions {
  std::string kernel, variant, weights, trace;
  std::string source;            // --source FILE.cu: an edited copy of the rung's editable kernel
  std::vector<std::string> out;  // FILE.npy (the first output) or NAME=FILE.npy, repeatable
  std::vector<std::string> ins;  // NAME=FILE.npy
};

CLI::App* add_run(CLI::App& app, RunOptions& o, Common& c);
int run_run(const RunOptions& o, const Common& c);

}  // namespace kl::app::cli
