#include "app/editor/diagnostics.h"

#include "app/editor/line_diff.h"

namespace kl::app::editor {

std::string Diagnostic::text() const {
  std::string s;
  if (line > 0) s += std::to_string(line) + (col > 0 ? ":" + std::to_string(col) : std::string()) + ": ";
  return s + (warning ? "warning: " : "error: ") + message;
}

namespace {
bool is_edited_file(const Diagnostic& d, const std::string& file) { return d.file.empty() || d.file == file; }
}  // namespace

LineMarks map_diagnostics(const std::vector<Diagnostic>& diags, const std::string& file, int line_count) {
  LineMarks m;
  for (size_t i = 0; i < diags.size(); ++i) {
    const Diagnostic& d = diags[i];
    (d.warning ? m.warnings : m.errors)++;
    if (is_edited_file(d, file) && d.line >= 1 && d.line <= line_count) m.on_line[d.line].push_back(i);
    else m.elsewhere.push_back(i);
  }
  return m;
}

std::vector<Diagnostic> carry_diagnostics(const std::vector<Diagnostic>& diags, const std::string& file,
                                          const std::string& compiled, const std::string& current) {
  if (compiled == current) return diags;
  const std::vector<DiffLine> d = line_diff(compiled, current);
  std::vector<Diagnostic> out = diags;
  for (Diagnostic& x : out)
    if (is_edited_file(x, file) && x.line > 0) {
      bool survived = false;
      for (const DiffLine& l : d) survived = survived || (l.old_line == x.line && l.kind == DiffLine::Same);
      if (!survived) x.col = 0;  // the column belonged to the line as compiled, which is gone
      x.line = map_line(d, x.line);
    }
  return out;
}

}  // namespace kl::app::editor
