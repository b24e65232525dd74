#include "app/cli/bench.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/registry.h"

namespace kl::app::cli {
namespace {

std::vector<const KernelEntry*> kernels_to_bench(const std::string& kernel) {
  std::vector<const KernelEntry*> todo;
  if (kernel.empty()) {
    for (const KernelEntry& e : kernel_registry())
      if (e.bench) todo.push_back(&e);
    return todo;
  }
  const KernelEntry* e = find_kernel(kernel);
  if (!e) throw InputError("bench " + kernel + ": unknown kernel");
  if (!e->bench) throw InputError("bench " + kernel + ": this kernel has no benchmark");
  todo.push_back(e);
  return todo;
}

void write_json(const std::string& path, const BackendChoice& b, bool quick, const std::vector<bench::Row>& rows) {
  nlohmann::json j;
  j["backend"] = backend_name(b.backend);
  j["device"] = b.backend == Backend::Cuda ? device_info(b.backend).name : "CPU";
  j["quick"] = quick;
  for (const bench::Row& r : rows)
    j["rows"].push_back({{"kernel", r.kernel}, {"variant", r.variant}, {"shape", r.shape}, {"ms", r.ms},
                         {"gbs", r.gbs}, {"tflops", r.tflops}, {"ratio", r.ratio}, {"baseline", r.baseline}});
  std::ofstream f(path);
  if (!f) throw InputError("--json " + path + ": cannot write");
  f << j.dump(2) << "\n";
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

CLI::App* add_bench(CLI::App& app, BenchOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("bench", "measure kernels against baselines measured in the same run");
  cmd->add_option("kernel", o.kernel, "kernel (default: all)");
  cmd->add_option("--json", o.json, "write the results as JSON");
  add_backend_option(*cmd, c.backend);
  cmd->add_flag("--quick", o.quick, "small sizes (smoke test)");
  return cmd;
}

int run_bench(const BenchOptions& o, const Common& c) {
  const BackendChoice b = choose_backend(c.backend);
  const std::vector<const KernelEntry*> todo = kernels_to_bench(o.kernel);
  std::printf("%s%s\n", b.reason.c_str(), b.backend == Backend::Cpu ? " -- CPU figures, not GPU ones" : "");
  std::vector<bench::Row> rows;
  for (const KernelEntry* e : todo) {
    std::vector<bench::Row> r = e->bench(b.backend, o.quick);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  std::printf("%s", bench::format_table(rows).c_str());
  if (!o.json.empty()) write_json(o.json, b, o.quick, rows);
  return 0;
}

}  // namespace kl::app::cli
