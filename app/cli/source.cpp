#include "app/cli/source.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/registry.h"

namespace kl::app::cli {
namespace {

// The rung's editable source, refusing rungs without one and variants it does not hold (the registry
// entry's untraced_variants: the `fast` versions, and the other versions that record no trace).
std::string editable_or_refuse(const std::string& rung, const std::string& variant, const std::string& what) {
  const std::string text = editable::shipped_source(rung);
  if (text.empty()) {
    const std::vector<std::string> have = editable::shipped_rungs();
    throw InputError(what + " " + rung + ": no editable kernel; editable: " + (have.empty() ? "none" : joined(have)));
  }
  if (variant.empty()) return text;
  const KernelEntry* e = find_kernel(rung);
  bool known = false;
  if (e)
    for (const std::string& v : e->variants) known = known || v == variant;
  if (!known && e) throw InputError("--variant " + variant + ": not a variant of " + rung + "; one of " + joined(e->variants, "|"));
  const bool fast = variant.rfind("fast", 0) == 0;
  if (!(e ? e->untraced(variant) : fast)) return text;
  if (fast)
    throw InputError("--variant " + variant + ": not editable (the fast versions record no trace); the editable source holds the traced kernels");
  // The other untraced versions: for --source, `run` refuses them with the rung's own message.
  if (what == "source")
    throw InputError("--variant " + variant + ": not editable (it records no trace); the editable source holds the traced kernels");
  return text;
}

}  // namespace

CLI::App* add_source(CLI::App& app, SourceOptions& o) {
  CLI::App* cmd = app.add_subcommand("source", "print a rung's editable kernel source (edit it, run it with --source)");
  cmd->add_option("kernel", o.kernel, "kernel name (see list)")->required();
  cmd->add_option("--variant", o.variant, "kernel variant");
  return cmd;
}

int run_source(const SourceOptions& o) {
  const std::string text = editable_or_refuse(o.kernel, o.variant, "source");
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

editable::Source read_edited_source(const std::string& rung, const std::string& variant, const std::string& path) {
  editable_or_refuse(rung, variant, "--source for");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError("--source " + path + ": cannot read (" + std::strerror(errno) + ")");
  std::stringstream s;
  s << f.rdbuf();
  editable::Source src;
  src.rung = rung;
  src.file = path;
  src.text = s.str();
  if (src.text.size() > (size_t(1) << 20)) throw InputError("--source " + path + ": larger than 1 MiB, not a kernel source");
  return src;
}

}  // namespace kl::app::cli
