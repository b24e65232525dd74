// `kernel-ladder study PANEL [--set k=v ...] [--json FILE]`: what a panel concludes (its checks with
// their verdicts and sentences, and the numbers they state), computed by the kernels library's study
// (kernels/studies/study.h) with no GL context; printed as text, and as JSON with --json.
#pragma once
#include "app/cli/common.h"

namespace kl::app::cli {

struct StudyOptions {
  std::string panel;
  std::string json;  // also write the report as JSON
};

CLI::App* add_study(CLI::App& app, StudyOptions& o, Common& c);
int run_study(const StudyOptions& o, const Common& c);

}  // namespace kl::app::cli
