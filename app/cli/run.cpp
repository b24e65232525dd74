#include "app/cli/run.h"

#include <sys/stat.h>

#include <cstdio>

#include "app/cli/source.h"
#include "app/run_outputs.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/npy.h"
#include "kernels/runtime/registry.h"

namespace kl::app::cli {
namespace {

const KernelEntry& kernel_or_refuse(const std::string& kernel) {
  const KernelEntry* e = find_kernel(kernel);
  if (e) return *e;
  std::vector<std::string> known;
  for (const KernelEntry& k : kernel_registry()) known.push_back(k.name);
  throw InputError("run " + kernel + ": unknown kernel; known: " + joined(known));
}

std::string variant_or_refuse(const KernelEntry& e, const std::string& asked) {
  const std::string v = asked.empty() ? e.default_variant : asked;
  for (const std::string& known : e.variants)
    if (known == v) return v;
  throw InputError("--variant " + v + ": not a variant of " + e.name + "; one of " + joined(e.variants, "|"));
}

void read_inputs(const KernelEntry& e, const std::vector<std::string>& ins, KernelRunRequest& r) {
  for (const std::string& in : ins) {
    const size_t eq = in.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--in " + in + ": expected NAME=FILE.npy");
    const std::string name = in.substr(0, eq);
    bool known = false;
    for (const std::string& n : e.inputs) known = known || n == name;
    for (const std::string& n : e.optional_inputs) known = known || n == name;
    if (!known) {
      std::vector<std::string> names = e.inputs;
      for (const std::string& n : e.optional_inputs) names.push_back(n + " (optional)");
      throw InputError("--in " + name + ": " + e.name + " takes inputs " + joined(names));
    }
    // Reading holds the file about three times over (stream, copy, array): refuse before, not during.
    const std::string file = in.substr(eq + 1);
    struct stat st{};
    if (::stat(file.c_str(), &st) == 0 && st.st_size > 0) mem::require_host(uint64_t(st.st_size) * 3, "--in " + in);
    r.inputs[name] = npy::read(file);
  }
  for (const std::string& n : e.inputs)
    if (!r.inputs.count(n)) throw InputError("--in " + n + "=FILE.npy: missing input of " + e.name);
}

// Several .npy files: TRACE_m.npy, TRACE_l.npy, ... (prefix without .npy/.npz).
void write_trace(const RunOptions& o, const KernelRunRequest& r, const KernelRunResult& res) {
  std::string prefix = o.trace;
  for (const char* ext : {".npz", ".npy"})
    if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ext) == 0) prefix.resize(prefix.size() - 4);
  int written = 0;
  for (const auto& [name, a] : res.outputs) {
    if (name.rfind("trace_", 0) != 0) continue;
    const std::string f = prefix + "_" + name.substr(6) + ".npy";
    npy::write(f, a);
    std::printf("wrote %s %s\n", f.c_str(), a.shape_text().c_str());
    ++written;
  }
  if (!written) throw InputError("--trace: " + o.kernel + " --variant " + r.variant + " records no trace");
}

}  // namespace

CLI::App* add_run(CLI::App& app, RunOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("run", "run a kernel on .npy inputs");
  cmd->add_option("kernel", o.kernel, "kernel name (see list)")->required();
  cmd->add_option("--in", o.ins, "NAME=FILE.npy (float32, C order; repeatable)");
  cmd->add_option("--out", o.out, "FILE.npy (the first output) or NAME=FILE.npy (repeatable)")->required();
  cmd->add_option("--variant", o.variant, "kernel variant");
  add_set_option(*cmd, c.sets, "key=value (repeatable)");
  add_backend_option(*cmd, c.backend);
  cmd->add_option("--weights", o.weights, "also write the attention weights (.npy)");
  cmd->add_option("--trace", o.trace, "also write the recorded trace (PREFIX_NAME.npy files)");
  cmd->add_option("--source", o.source, "FILE.cu: run this edited copy of `source KERNEL` instead of the shipped kernel");
  return cmd;
}

int run_run(const RunOptions& o, const Common& c) {
  const KernelEntry& e = kernel_or_refuse(o.kernel);
  KernelRunRequest r;
  r.variant = variant_or_refuse(e, o.variant);
  r.params = ParamValues(e.params);
  for (const std::string& kv : c.sets) r.params.set(kv);
  read_inputs(e, o.ins, r);
  const auto outs = parse_outputs(e, o.out);
  r.backend = choose_backend(c.backend).backend;
  editable::Source edited;
  if (!o.source.empty()) {
    edited = read_edited_source(e.name, r.variant, o.source);
    r.source = &edited;
  }
  KernelRunResult res = e.run(r);
  write_outputs(outs, res, "(" + r.variant + ", " + backend_name(r.backend) + " backend)");
  if (!o.weights.empty()) {
    auto it = res.outputs.find("weights");
    if (it == res.outputs.end()) throw InputError("--weights: " + o.kernel + " has no attention weights to write");
    npy::write(o.weights, it->second);
    std::printf("wrote %s %s\n", o.weights.c_str(), it->second.shape_text().c_str());
  }
  if (!o.trace.empty()) write_trace(o, r, res);
  return 0;
}

}  // namespace kl::app::cli
