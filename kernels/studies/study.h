// A study: what a panel concludes, computed with no GL and no ImGui (Tracy's Worker to the panels'
// View). Settings in, a plain result out: the check lines with their verdicts and sentences, and every
// number a sentence states, so the panel, `kernel-ladder study PANEL` and the tests read the same values.
// Each rung's study lives beside this file (vector_add_study.h, ...) with its own result struct for the
// panel (traces, arrays to draw); report() turns that into this common form for the command line.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/params.h"

namespace kl::study {

// One verdict a panel shows: "buggy matches reference: no, 11712 of 24000 never written".
struct Check {
  std::string name;      // stable key: "buggy_matches_reference"
  bool pass = false;     // the verdict the panel colours green/red
  std::string sentence;  // exactly the text the panel shows
};

struct Report {
  std::string panel;                // "softmax"
  std::string settings;             // "n_cols=2000, rows=12, ..." as applied
  std::string notice;               // the panel's opening line: what to notice in this view, with its numbers
  std::vector<Check> checks;        // in the order the panel shows them
  std::vector<std::string> lines;   // other statements the panel shows, in order
  nlohmann::json numbers = nlohmann::json::object();  // every number the sentences state, by name
};

// Human-readable form (what `study` prints) and JSON form (`study --json`).
std::string to_text(const Report& r);
nlohmann::json to_json(const Report& r);
// The settings as applied, in the specs' order: "n=1000, block_size=256, seed=1" (Report::settings).
std::string settings_text(const ParamValues& v);

struct Entry {
  std::string panel;    // as typed after `study` and `shot`: "softmax"
  std::string summary;  // one line for `list`
  std::function<std::vector<ParamSpec>()> params;                      // the panel's parameters
  std::function<Report(Backend, const ParamValues&)> run;              // throws InputError/RuntimeError
};

// In ladder order (study_registry.cpp): one line per rung's study.
const std::vector<Entry>& registry();
const Entry* find(const std::string& panel);

}  // namespace kl::study
