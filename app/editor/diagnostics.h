// Compile errors as the editor shows them: each diagnostic of the edited file on its line (marked in
// the gutter, its message beside the line and in the list under the editor), carried along when the
// text is edited after the compile, and the ones that name no line of the edited file listed apart.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace kl::app::editor {

// One message of the compiler, as kernels/editable's CompileError carries it (FILE:LINE:COL: message).
struct Diagnostic {
  std::string file;  // the file the compiler named ("vector_add.cu (edited)", "kl.cuh", ...)
  int line = 0;      // 1-based; 0: none
  int col = 0;       // 1-based; 0: none
  std::string message;
  bool warning = false;
  std::string text() const;  // "LINE:COL: error: message" (the editor's list)
};

// The diagnostics laid on the edited text's lines: `on_line[L]` are the indices (into `diags`) of those
// on line L (1-based, within [1, line_count]); `elsewhere` are the ones of another file, without a
// line, or past the text's end (shown in the list only, never dropped). `file` is the edited file's
// name as the compile was given it; an empty diagnostic file counts as the edited one.
struct LineMarks {
  std::map<int, std::vector<size_t>> on_line;
  std::vector<size_t> elsewhere;
  int errors = 0, warnings = 0;
};
LineMarks map_diagnostics(const std::vector<Diagnostic>& diags, const std::string& file, int line_count);

// The diagnostics of a compile of `compiled` moved to the lines they are on in `current` (the user edited
// after compiling): a diagnostic on a removed line goes to the line that took its place.
std::vector<Diagnostic> carry_diagnostics(const std::vector<Diagnostic>& diags, const std::string& file,
                                          const std::string& compiled, const std::string& current);

}  // namespace kl::app::editor
