#include "app/cli/study.h"

#include <cstdio>
#include <fstream>

#include "kernels/runtime/errors.h"
#include "kernels/studies/study.h"

namespace kl::app::cli {
namespace {

const study::Entry& study_or_refuse(const std::string& panel) {
  if (const study::Entry* e = study::find(panel)) return *e;
  std::vector<std::string> known;
  for (const study::Entry& e : study::registry()) known.push_back(e.panel);
  throw InputError("study " + panel + ": unknown panel; known: " + (known.empty() ? "none yet" : joined(known)));
}

}  // namespace

CLI::App* add_study(CLI::App& app, StudyOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand("study", "what a panel concludes (checks, verdicts, numbers), no window, no GL");
  cmd->add_option("panel", o.panel, "panel id (see list)")->required();
  add_set_option(*cmd, c.sets, "key=value (repeatable)");
  add_backend_option(*cmd, c.backend);
  cmd->add_option("--json", o.json, "also write the report as JSON");
  return cmd;
}

int run_study(const StudyOptions& o, const Common& c) {
  const study::Entry& e = study_or_refuse(o.panel);
  ParamValues values(e.params());
  for (const std::string& kv : c.sets) values.set(kv);
  const study::Report r = e.run(choose_backend(c.backend).backend, values);
  std::printf("%s", study::to_text(r).c_str());
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    if (!f) throw InputError("--json " + o.json + ": cannot write");
    f << study::to_json(r).dump(2) << "\n";
    std::printf("wrote %s\n", o.json.c_str());
  }
  return 0;
}

}  // namespace kl::app::cli
