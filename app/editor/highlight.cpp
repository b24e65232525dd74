#include "app/editor/highlight.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_set>

namespace kl::app::editor {
namespace {

bool in(const std::unordered_set<std::string_view>& set, std::string_view w) { return set.count(w) != 0; }

const std::unordered_set<std::string_view>& keywords() {
  static const std::unordered_set<std::string_view> k = {
      "if", "else", "for", "while", "do", "return", "break", "continue", "switch", "case", "default", "const",
      "constexpr", "static", "inline", "template", "typename", "struct", "class", "namespace", "using", "extern",
      "sizeof", "true", "false", "nullptr", "auto", "volatile", "goto", "enum", "union", "static_cast",
      "reinterpret_cast", "operator", "public", "private", "this", "typedef", "static_assert"};
  return k;
}
const std::unordered_set<std::string_view>& types() {
  static const std::unordered_set<std::string_view> k = {
      "void", "bool", "char", "short", "int", "long", "float", "double", "unsigned", "signed", "int8_t", "int16_t",
      "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "float2", "float4", "half",
      "dim3", "Tensor"};
  return k;
}
const std::unordered_set<std::string_view>& cuda() {
  static const std::unordered_set<std::string_view> k = {
      "__global__", "__device__", "__host__", "__shared__", "__forceinline__", "__restrict__", "__syncthreads",
      "__syncwarp", "__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync", "threadIdx", "blockIdx",
      "blockDim", "gridDim", "warpSize", "atomicAdd", "atomicMax", "atomicMin", "atomicCAS", "atomicExch",
      "__launch_bounds__", "kl", "program_id", "lane"};
  return k;
}

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::vector<std::vector<Span>> highlight(const std::vector<std::string_view>& lines) {
  std::vector<std::vector<Span>> out(lines.size());
  bool block = false;  // inside /* ... */ from an earlier line
  for (size_t li = 0; li < lines.size(); ++li) {
    const std::string_view l = lines[li];
    std::vector<Span>& v = out[li];
    auto add = [&](int b, int e, Token k) {
      if (e <= b) return;
      if (!v.empty() && v.back().kind == k && v.back().end == b) v.back().end = e;
      else v.push_back({b, e, k});
    };
    const int n = int(l.size());
    int i = 0;
    size_t first = l.find_first_not_of(" \t");
    if (!block && first != std::string_view::npos && l[first] == '#') {
      // A preprocessor line, up to a comment on it.
      const size_t c = l.find("//");
      const int e = c == std::string_view::npos ? n : int(c);
      add(0, e, Token::Preprocessor);
      add(e, n, Token::Comment);
      continue;
    }
    while (i < n) {
      if (block) {
        const size_t e = l.find("*/", size_t(i));
        const int end = e == std::string_view::npos ? n : int(e) + 2;
        add(i, end, Token::Comment);
        block = e == std::string_view::npos;
        i = end;
        continue;
      }
      const char c = l[size_t(i)];
      if (c == '/' && i + 1 < n && l[size_t(i) + 1] == '/') {
        add(i, n, Token::Comment);
        break;
      }
      if (c == '/' && i + 1 < n && l[size_t(i) + 1] == '*') {
        block = true;
        add(i, i + 2, Token::Comment);
        i += 2;
        continue;
      }
      if (c == '"' || c == '\'') {
        int j = i + 1;
        while (j < n && l[size_t(j)] != c) j += l[size_t(j)] == '\\' ? 2 : 1;
        j = std::min(j + 1, n);
        add(i, j, Token::String);
        i = j;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(l[size_t(i) + 1])))) {
        int j = i + 1;
        while (j < n && (ident_char(l[size_t(j)]) || l[size_t(j)] == '.' ||
                         ((l[size_t(j)] == '+' || l[size_t(j)] == '-') && (l[size_t(j) - 1] == 'e' || l[size_t(j) - 1] == 'E'))))
          ++j;
        add(i, j, Token::Number);
        i = j;
        continue;
      }
      if (ident_start(c)) {
        int j = i + 1;
        while (j < n && ident_char(l[size_t(j)])) ++j;
        const std::string_view w = l.substr(size_t(i), size_t(j - i));
        add(i, j, in(cuda(), w) ? Token::Cuda : in(types(), w) ? Token::Type : in(keywords(), w) ? Token::Keyword : Token::Plain);
        i = j;
        continue;
      }
      add(i, i + 1, Token::Plain);
      ++i;
    }
  }
  return out;
}

}  // namespace kl::app::editor
