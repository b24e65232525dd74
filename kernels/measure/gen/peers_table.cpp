// kl_peers_table: the recorded peers (docs/perf/h200.json, kernels/measure/peers.h) checked, and the README's
// peers table generated from them.
//   kl_peers_table FILE.json --check-file           parse the file (the build runs this: a bad file fails it)
//   kl_peers_table FILE.json --print                print the README's block
//   kl_peers_table FILE.json --check README.md      exit 1 when the README's block differs from the file's
//   kl_peers_table FILE.json --write README.md      replace the README's block with the file's
// Exit codes: 0 done, 1 the README's block differs (--check), 2 a bad file or argument (one line).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/measure/peers.h"
#include "kernels/runtime/errors.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw kl::InputError(path + ": cannot open");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int run(int argc, char** argv) {
  const std::string usage = "usage: kl_peers_table FILE.json --check-file | --print | --check README.md | --write README.md";
  if (argc < 3) throw kl::InputError(usage);
  const std::string json = argv[1], mode = argv[2];
  const kl::peers::Recorded r = kl::peers::parse(read_file(json), json);
  if (mode == "--check-file" && argc == 3) {
    std::size_t rows = 0;
    for (const auto& s : r.sections) rows += s.rows.size();
    std::printf("%s: %zu sections, %zu rows: %s\n", json.c_str(), r.sections.size(), rows, kl::peers::caption(r).c_str());
    return 0;
  }
  const std::string block = kl::peers::markdown(r);
  if (mode == "--print" && argc == 3) {
    std::fputs(block.c_str(), stdout);
    return 0;
  }
  if ((mode == "--check" || mode == "--write") && argc == 4) {
    const std::string readme_path = argv[3], readme = read_file(readme_path);
    const std::string updated = kl::peers::replace_readme_block(readme, block);
    if (mode == "--check") {
      if (updated == readme) return 0;
      std::fprintf(stderr, "%s: the peers table differs from %s; regenerate it: kl_peers_table %s --write %s\n",
                   readme_path.c_str(), json.c_str(), json.c_str(), readme_path.c_str());
      return 1;
    }
    std::ofstream(readme_path, std::ios::binary) << updated;
    std::printf("%s: peers table %s from %s\n", readme_path.c_str(), updated == readme ? "unchanged" : "rewritten", json.c_str());
    return 0;
  }
  throw kl::InputError(usage);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kl_peers_table: %s\n", e.what());
    return 2;
  }
}
