#include "kernels/studies/study.h"

#include <sstream>

namespace kl::study {

std::string to_text(const Report& r) {
  std::ostringstream o;
  o << r.panel;
  if (!r.settings.empty()) o << " (" << r.settings << ")";
  o << "\n";
  if (!r.notice.empty()) o << "  Notice: " << r.notice << "\n";
  for (const Check& c : r.checks) o << "  [" << (c.pass ? "pass" : "FAIL") << "] " << c.sentence << "\n";
  for (const std::string& l : r.lines) o << "  " << l << "\n";
  return o.str();
}

std::string settings_text(const ParamValues& v) {
  std::string s;
  for (const ParamSpec& p : v.specs()) s += (s.empty() ? "" : ", ") + p.name + "=" + v.get_text(p.name);
  return s;
}

nlohmann::json to_json(const Report& r) {
  nlohmann::json j;
  j["panel"] = r.panel;
  j["settings"] = r.settings;
  j["notice"] = r.notice;
  j["checks"] = nlohmann::json::array();
  for (const Check& c : r.checks) j["checks"].push_back({{"name", c.name}, {"pass", c.pass}, {"sentence", c.sentence}});
  j["lines"] = r.lines;
  j["numbers"] = r.numbers;
  return j;
}

}  // namespace kl::study
