// `kernel-ladder source KERNEL [--variant V]`: prints the rung's editable kernel source
// (kernels/editable/sources/<rung>.cu), the file `run KERNEL --source FILE.cu` and `shot PANEL --source
// FILE.cu` take back edited. Also the helper both use to read an edited source.
#pragma once
#include "app/cli/common.h"
#include "kernels/editable/launch.h"

namespace kl::app::cli {

struct SourceOptions {
  std::string kernel, variant;
};

CLI::App* add_source(CLI::App& app, SourceOptions& o);
int run_source(const SourceOptions& o);

// The file at `path` as an edited source of `rung` (its name kept as typed, for the diagnostics). Throws
// InputError when the rung has no editable source, the variant is not editable, or the file cannot be read.
editable::Source read_edited_source(const std::string& rung, const std::string& variant, const std::string& path);

}  // namespace kl::app::cli
