#include "kernels/editable/gallery_edit.h"

#include <algorithm>
#include <vector>

#include "kernels/runtime/errors.h"

namespace kl::editable {
namespace {

const char* const kHeader = "// Gallery: ";

struct Block {
  int line = 0;  // of its "@@ replace", 1-based
  std::string old_text, new_text;
  size_t at = 0;  // where old_text starts in the shipped source
};

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> v;
  size_t b = 0;
  while (b < s.size()) {
    const size_t e = s.find('\n', b);
    if (e == std::string::npos) {
      v.push_back(s.substr(b));
      break;
    }
    v.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return v;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

int line_of(const std::string& s, size_t pos) { return 1 + int(std::count(s.begin(), s.begin() + pos, '\n')); }

// Every start of `what` in `s` at the start of a line.
std::vector<size_t> occurrences(const std::string& s, const std::string& what) {
  std::vector<size_t> v;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    if (p == 0 || s[p - 1] == '\n') v.push_back(p);
  return v;
}

std::vector<Block> parse(const std::string& edit, const std::string& where) {
  const std::vector<std::string> lines = split_lines(edit);
  std::vector<Block> blocks;
  enum { kBetween, kOld, kNew } state = kBetween;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const std::string at = where + ":" + std::to_string(i + 1) + ": ";
    if (state == kBetween) {
      if (l == "@@ replace") {
        blocks.push_back({});
        blocks.back().line = int(i + 1);
        state = kOld;
      } else if (l.find_first_not_of(" \t\r") != std::string::npos) {
        throw RuntimeError(at + "expected '@@ replace' or a blank line between blocks, found '" + l + "'");
      }
    } else if (l == "@@ with") {
      if (state != kOld) throw RuntimeError(at + "a second '@@ with' in block " + std::to_string(blocks.size()));
      if (blocks.back().old_text.empty())
        throw RuntimeError(at + "block " + std::to_string(blocks.size()) + " has no old text to replace");
      state = kNew;
    } else if (l == "@@ end") {
      if (state != kNew) throw RuntimeError(at + "'@@ end' before '@@ with' in block " + std::to_string(blocks.size()));
      state = kBetween;
    } else if (l.rfind("@@ ", 0) == 0) {
      throw RuntimeError(at + "unknown marker '" + l + "' (one of '@@ replace', '@@ with', '@@ end')");
    } else {
      (state == kOld ? blocks.back().old_text : blocks.back().new_text) += l + "\n";
    }
  }
  if (state != kBetween)
    throw RuntimeError(where + ": block " + std::to_string(blocks.size()) + " (line " +
                       std::to_string(blocks.back().line) + ") has no '@@ end'");
  if (blocks.empty()) throw RuntimeError(where + ": no '@@ replace' block: the bug would be the shipped source");
  return blocks;
}

}  // namespace

std::string apply_gallery_edit(const std::string& shipped, const std::string& shipped_name,
                               const std::string& edit, const std::string& edit_name) {
  const std::string header = first_line(edit);
  if (header.rfind(kHeader, 0) != 0 || header.size() == std::string(kHeader).size())
    throw RuntimeError(edit_name + ":1: the first line must be '" + kHeader + "<one sentence>', found '" + header + "'");
  std::vector<Block> blocks = parse(edit, edit_name);
  for (size_t k = 0; k < blocks.size(); ++k) {
    Block& b = blocks[k];
    const std::string name = edit_name + ": block " + std::to_string(k + 1) + " (line " + std::to_string(b.line) + ")";
    const std::vector<size_t> at = occurrences(shipped, b.old_text);
    if (at.empty())
      throw RuntimeError(name + ": old text not found in " + shipped_name + ": '" + first_line(b.old_text) + "'" +
                         (b.old_text.find('\n') + 1 < b.old_text.size() ? " (and the lines after it)" : ""));
    if (at.size() > 1) {
      std::string lines;
      for (size_t p : at) lines += (lines.empty() ? "" : ", ") + std::to_string(line_of(shipped, p));
      throw RuntimeError(name + ": old text occurs " + std::to_string(at.size()) + " times in " + shipped_name +
                         " (lines " + lines + "), it must occur once: '" + first_line(b.old_text) + "'");
    }
    b.at = at[0];
  }
  std::vector<const Block*> order;
  for (const Block& b : blocks) order.push_back(&b);
  std::sort(order.begin(), order.end(), [](const Block* x, const Block* y) { return x->at < y->at; });
  std::string out = header + "\n";
  size_t pos = 0;
  for (const Block* b : order) {
    if (b->at < pos)
      throw RuntimeError(edit_name + ": block at line " + std::to_string(b->line) + " overlaps another block in " +
                         shipped_name + " (line " + std::to_string(line_of(shipped, b->at)) + ")");
    out += shipped.substr(pos, b->at - pos) + b->new_text;
    pos = b->at + b->old_text.size();
  }
  return out + shipped.substr(pos);
}

}  // namespace kl::editable
