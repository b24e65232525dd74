#include "app/cli/list.h"

#include <cstdio>

#include "kernels/runtime/registry.h"
#include "kernels/studies/study.h"

namespace kl::app::cli {
namespace {

void print_spec(const ParamSpec& sp) {
  std::printf("      %-14s default %-10s %s  -- %s\n", sp.name.c_str(), sp.def.c_str(), sp.range_text().c_str(),
              sp.help.c_str());
}

// A panel's declared departure from the kernels library's spec (panel_override): both, and why.
void print_override(const ParamSpec& sp) {
  if (!sp.is_override()) return;
  std::printf("      %-14s the kernel's: default %-10s %s  -- the panel's differs: %s\n", "", sp.kernel_def.c_str(),
              sp.kernel_range.c_str(), sp.override_reason.c_str());
}

void print_panels() {
  std::printf("Panels (shot PANEL, --set key=value):\n");
  for (const auto& p : make_panels()) {
    std::printf("  %-18s %s\n", p->id().c_str(), p->title().c_str());
    for (const ParamSpec& sp : p->params().specs()) print_spec(sp), print_override(sp);
  }
}

void print_kernels() {
  std::printf("\nKernels (run KERNEL --in NAME=FILE.npy ... --out FILE.npy):\n");
  for (const KernelEntry& e : kernel_registry()) {
    std::printf("  %-18s %s\n      inputs: %s;  variants: %s (default %s)\n", e.name.c_str(), e.summary.c_str(),
                joined(e.inputs).c_str(), joined(e.variants, "|").c_str(), e.default_variant.c_str());
    for (const ParamSpec& sp : e.params) print_spec(sp);
  }
}

void print_studies() {
  std::printf("\nStudies (study PANEL [--set key=value] [--json FILE]: what the panel concludes, no GL):\n");
  if (study::registry().empty()) std::printf("  none yet\n");
  for (const study::Entry& e : study::registry()) std::printf("  %-18s %s\n", e.panel.c_str(), e.summary.c_str());
}

}  // namespace

CLI::App* add_list(CLI::App& app) {
  return app.add_subcommand("list", "panels, kernels, variants and parameters with their ranges");
}

int run_list() {
  print_panels();
  print_kernels();
  print_studies();
  std::string why;
  const int n = cuda_device_count(&why);
  std::printf("\nBackends: cpu (always)%s\n", n > 0 ? ", cuda" : (", cuda unavailable: " + why).c_str());
  return 0;
}

}  // namespace kl::app::cli
