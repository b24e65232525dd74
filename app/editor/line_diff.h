// A line diff (longest common subsequence of lines) for the editor's "Diff against shipped" view, its
// gutter's changed-line marks, and for carrying compile errors to where their lines moved after an edit.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kl::app::editor {

// The text's lines without their '\n' (a final '\n' does not start an empty line; "" is no lines; a
// trailing '\r' is kept, so CRLF text diffs against itself as equal).
std::vector<std::string_view> split_lines(std::string_view text);

struct DiffLine {
  enum Kind { Same, Added, Removed } kind = Same;
  int old_line = 0;  // 1-based in the old text (0 for Added)
  int new_line = 0;  // 1-based in the new text (0 for Removed)
  std::string_view text;
};

// The edit script from `old_text` to `new_text`, in order: each line of either text once, Same lines
// in both, Removed lines only in the old one, Added only in the new one (a removal before the
// addition that replaces it). Common head and tail are matched first, so a small edit of a long file
// costs the LCS of the changed middle only.
std::vector<DiffLine> line_diff(std::string_view old_text, std::string_view new_text);

struct DiffSummary {
  int added = 0, removed = 0;
};
DiffSummary summarize(const std::vector<DiffLine>& d);

// Where old line `line` (1-based) is in the new text: its new number where it survived; where it was
// removed, the new line that took its place (the next surviving or added line, else the last line).
// 0 when the new text has no lines.
int map_line(const std::vector<DiffLine>& d, int line);

}  // namespace kl::app::editor
