// The kernels the command line can run (`run KERNEL`, `list`): name, variants, inputs, parameters.
// Each rung's file provides its entry; registry.cpp lists them in ladder order.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/runtime/array.h"
#include "kernels/runtime/backend.h"
#include "kernels/measure/bench.h"
#include "kernels/runtime/params.h"

namespace kl {

namespace editable {
struct Source;
}

struct KernelRunRequest {
  Backend backend = Backend::Cpu;
  std::string variant;
  ParamValues params;
  std::map<std::string, Array> inputs;
  // `run --source FILE.cu`: an edited copy of the rung's editable source, run instead of the shipped one
  // (kernels/editable/launch.h); a misbehaving kernel throws editable::FaultError.
  const editable::Source* source = nullptr;
};

struct KernelRunResult {
  // "out" is the main output. Others are extra outputs the command line can ask for by name
  // ("weights" for --weights; names starting with "trace_" for --trace).
  std::map<std::string, Array> outputs;
};

struct KernelEntry {
  std::string name;     // "vector-add"
  std::string summary;  // one line for `list`
  std::vector<std::string> variants;
  // The variants the rung's editable source does not hold (they record no trace): `source --variant`
  // refuses them. The others are the traced kernels the editable source is a copy of.
  std::vector<std::string> untraced_variants;
  std::string default_variant;
  std::vector<std::string> inputs;  // required --in names, in order
  std::vector<std::string> optional_inputs;  // --in names that may be left out
  std::vector<std::string> outputs;  // --out NAME=FILE names, in order (the first is --out FILE's); empty: {"out"}
  std::vector<ParamSpec> params;
  std::function<KernelRunResult(const KernelRunRequest&)> run;  // throws InputError / RuntimeError
  // `bench KERNEL`: rows measured on the backend, each with its ratio to a baseline measured in the
  // same run (copy bandwidth, the unfused pair, ...). `quick` uses small sizes (tests, the CPU backend).
  std::function<std::vector<bench::Row>(Backend, bool quick)> bench;

  bool untraced(const std::string& variant) const;  // listed in untraced_variants
};

const std::vector<KernelEntry>& kernel_registry();
const KernelEntry* find_kernel(const std::string& name);

}  // namespace kl
