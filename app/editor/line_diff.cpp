#include "app/editor/line_diff.h"

#include <algorithm>
#include <cstdint>

namespace kl::app::editor {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> v;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    v.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return v;
}

std::vector<DiffLine> line_diff(std::string_view old_text, std::string_view new_text) {
  const std::vector<std::string_view> a = split_lines(old_text), b = split_lines(new_text);
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) ++tail;
  const size_t n = a.size() - head - tail, m = b.size() - head - tail;
  // lcs[i][j]: the LCS length of a[head+i..] and b[head+j..] (the changed middle only).
  std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      at(i, j) = a[head + i] == b[head + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  std::vector<DiffLine> d;
  d.reserve(a.size() + b.size());
  for (size_t k = 0; k < head; ++k) d.push_back({DiffLine::Same, int(k + 1), int(k + 1), b[k]});
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[head + i] == b[head + j]) {
      d.push_back({DiffLine::Same, int(head + i + 1), int(head + j + 1), b[head + j]});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      d.push_back({DiffLine::Removed, int(head + i + 1), 0, a[head + i]});
      ++i;
    } else {
      d.push_back({DiffLine::Added, 0, int(head + j + 1), b[head + j]});
      ++j;
    }
  }
  for (size_t k = 0; k < tail; ++k)
    d.push_back({DiffLine::Same, int(head + n + k + 1), int(head + m + k + 1), b[head + m + k]});
  return d;
}

DiffSummary summarize(const std::vector<DiffLine>& d) {
  DiffSummary s;
  for (const DiffLine& l : d) s.added += l.kind == DiffLine::Added, s.removed += l.kind == DiffLine::Removed;
  return s;
}

int map_line(const std::vector<DiffLine>& d, int line) {
  int last_new = 0;
  for (size_t k = 0; k < d.size(); ++k) {
    if (d[k].new_line) last_new = d[k].new_line;
    if (d[k].old_line != line) continue;
    if (d[k].kind == DiffLine::Same) return d[k].new_line;
    for (size_t q = k + 1; q < d.size(); ++q)
      if (d[q].new_line) return d[q].new_line;
    return last_new;
  }
  for (const DiffLine& l : d) last_new = std::max(last_new, l.new_line);
  return last_new;  // past the old text's end: the new text's last line
}

}  // namespace kl::app::editor
