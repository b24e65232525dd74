#include "app/editor/stamps.h"

#include <cctype>

namespace kl::app::editor {
namespace {

constexpr std::string_view kPhase = "Phase::";

bool calls_mark(std::string_view line) { return line.find("mark(") != std::string_view::npos; }

// The phase's letters and digits, lower case: "wait-q" and "WaitQ" both give "waitq".
std::string folded(std::string_view s) {
  std::string f;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) f += char(std::tolower(static_cast<unsigned char>(c)));
  return f;
}

size_t indent(std::string_view line) {
  const size_t i = line.find_first_not_of(' ');
  return i == std::string_view::npos ? line.size() : i;
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

// A preprocessor line (#pragma unroll at column 0 inside a loop) belongs to the code around it.
bool directive(std::string_view line) { return indent(line) < line.size() && line[indent(line)] == '#'; }

bool comment_at(std::string_view line, size_t depth) {
  return indent(line) == depth && line.substr(depth).substr(0, 2) == "//";
}

}  // namespace

bool stamps_phase(std::string_view line, std::string_view phase) {
  if (!calls_mark(line)) return false;
  const std::string want = folded(phase);
  for (size_t at = line.find(kPhase); at != std::string_view::npos; at = line.find(kPhase, at + 1)) {
    size_t end = at + kPhase.size();
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
    if (folded(line.substr(at + kPhase.size(), end - at - kPhase.size())) == want) return true;
  }
  return false;
}

bool stamps_any(std::string_view line) { return calls_mark(line) && line.find(kPhase) != std::string_view::npos; }

std::vector<bool> stamp_lines(const std::vector<std::string_view>& lines, const std::vector<std::string>& phases) {
  std::vector<bool> v(lines.size(), false);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (phases.empty()) {
      v[i] = stamps_any(lines[i]);
      continue;
    }
    bool hit = false;
    for (const std::string& p : phases) hit = hit || stamps_phase(lines[i], p);
    if (!hit) continue;
    v[i] = true;
    const size_t depth = indent(lines[i]);
    for (size_t j = i; j > 0 && comment_at(lines[j - 1], depth); --j) v[j - 1] = true;  // the comment above it
    size_t end = i + 1;  // past the phase's last line
    for (size_t j = i + 1; j < lines.size(); ++j) {
      const std::string_view l = lines[j];
      if (calls_mark(l) || (!blank(l) && indent(l) < depth && !directive(l))) break;
      if (!blank(l)) end = j + 1;
    }
    for (size_t j = i + 1; j < end; ++j) v[j] = true;
  }
  return v;
}

}  // namespace kl::app::editor
