// Syntax colours for the editor: CUDA C++ cut into spans per line (comments, strings and characters,
// numbers, preprocessor lines, keywords, CUDA's qualifiers and built-ins), carried across lines for
// block comments. No ImGui here: the editor maps each kind to a colour.
#pragma once
#include <string_view>
#include <vector>

namespace kl::app::editor {

enum class Token { Plain, Comment, String, Number, Preprocessor, Keyword, Type, Cuda };

struct Span {
  int begin = 0, end = 0;  // byte offsets in the line
  Token kind = Token::Plain;
};

// Spans of each line of `lines`, covering each line from its start to its end, in order.
std::vector<std::vector<Span>> highlight(const std::vector<std::string_view>& lines);

}  // namespace kl::app::editor
