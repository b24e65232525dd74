// `run KERNEL --out ...`: which output goes to which file. A kernel with several outputs (its entry's
// `outputs`, in order) takes `--out NAME=FILE` for each one wanted; `--out FILE` alone means the first
// output (what it has always meant). Checked before the kernel runs; bad input throws InputError.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kernels/runtime/registry.h"

namespace kl::app {

// The output names of entry e, in order ({"out"} when the entry names none).
std::vector<std::string> output_names(const KernelEntry& e);

// (output name, file) pairs, in the order given. Each item is NAME=FILE (NAME one of e's outputs) or
// FILE (the first output; at most one such item). No item, an unknown NAME, an empty FILE or an output
// named twice: InputError naming the item and the outputs allowed.
std::vector<std::pair<std::string, std::string>> parse_outputs(const KernelEntry& e,
                                                               const std::vector<std::string>& items);

// Writes each named output of `res` as .npy and prints "wrote FILE SHAPE ..." per file; `what` is the
// "(variant, backend)" text printed after the first.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& outs, const KernelRunResult& res,
                   const std::string& what);

}  // namespace kl::app
