#include "app/run_outputs.h"

#include <cstdio>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/npy.h"

namespace kl::app {

std::vector<std::string> output_names(const KernelEntry& e) {
  return e.outputs.empty() ? std::vector<std::string>{"out"} : e.outputs;
}

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// "NAME=FILE" when the text before the first '=' looks like a name (letters, digits, '_'), else a FILE.
bool split_named(const std::string& item, std::string* name, std::string* file) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  for (size_t i = 0; i < eq; ++i) {
    const char c = item[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  *name = item.substr(0, eq);
  *file = item.substr(eq + 1);
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_outputs(const KernelEntry& e,
                                                               const std::vector<std::string>& items) {
  const std::vector<std::string> names = output_names(e);
  const std::string allowed = e.name + " writes " + joined(names) + " (--out FILE alone: " + names[0] + ")";
  if (items.empty()) throw InputError("--out: missing; " + allowed);
  std::vector<std::pair<std::string, std::string>> outs;
  for (const std::string& item : items) {
    std::string name, file;
    if (!split_named(item, &name, &file)) {
      name = names[0];
      file = item;
    } else {
      bool known = false;
      for (const std::string& n : names) known = known || n == name;
      if (!known) throw InputError("--out " + item + ": " + name + " is not an output; " + allowed);
    }
    if (file.empty()) throw InputError("--out " + item + ": expected NAME=FILE.npy or FILE.npy; " + allowed);
    for (const auto& [n, f] : outs)
      if (n == name) throw InputError("--out " + item + ": " + name + " is already written to " + f);
    outs.emplace_back(name, file);
  }
  return outs;
}

void write_outputs(const std::vector<std::pair<std::string, std::string>>& outs, const KernelRunResult& res,
                   const std::string& what) {
  bool first = true;
  for (const auto& [name, file] : outs) {
    auto it = res.outputs.find(name);
    if (it == res.outputs.end()) throw RuntimeError("the kernel produced no output " + name);
    npy::write(file, it->second);
    std::printf("wrote %s %s%s%s\n", file.c_str(), it->second.shape_text().c_str(), first ? " " : "",
                first ? what.c_str() : "");
    first = false;
  }
}

}  // namespace kl::app
