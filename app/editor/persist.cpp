#include "app/editor/persist.h"

#include <cstdio>
#include <cstdlib>

#include "app/editor/editor.h"

namespace kl::app::editor {

std::string escape_line(const std::string& text) {
  std::string s;
  s.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    if (c == '\\') s += "\\\\";
    else if (c == '\n') s += "\\n";
    else if (c == '\r') s += "\\r";
    else s += c;
  }
  return s;
}

std::string unescape_line(const std::string& line) {
  std::string s;
  s.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\' || i + 1 == line.size()) {
      s += line[i];
      continue;
    }
    const char n = line[++i];
    if (n == 'n') s += '\n';
    else if (n == 'r') s += '\r';
    else if (n == '\\') s += '\\';
    else s += '\\', s += n;
  }
  return s;
}

std::vector<std::string> settings_lines(const Editor& e) {
  std::vector<std::string> v;
  if (e.editing) v.push_back("editor=1");
  char b[48];
  std::snprintf(b, sizeof b, "editor_frac=%.3f", double(e.frac));
  v.push_back(b);
  for (const auto& [rung, r] : e.rungs)
    if (r.edited) v.push_back("edit." + rung + "=" + escape_line(r.text));
  return v;
}

bool apply_setting(Editor& e, const std::string& key, const std::string& value) {
  if (key == "editor") {
    e.editing = value == "1";
    return true;
  }
  if (key == "editor_frac") {
    const double f = std::atof(value.c_str());
    if (f >= 0.1 && f <= 0.9) e.frac = float(f);
    return true;
  }
  if (key.rfind("edit.", 0) != 0 || key.size() == 5) return false;
  RungEdit& r = e.rungs[key.substr(5)];
  r.text = unescape_line(value);
  r.loaded = true;
  r.edited = true;  // until the shipped text is known and found equal
  r.restored = true;
  return true;
}

}  // namespace kl::app::editor
