// Canned editor hooks for tests only (they compile nothing): the window's editor driven end to end
// before the editable kernels (kernels/editable/) are in this build. The shipped text is the real one
// (default_hooks); "compiling" reports one error per line that differs from the shipped source, at its
// first non-blank column; a text containing KL_CANNED_FAULT "runs" into the fault line the tracing API
// gives for an out-of-bounds store; the shipped text itself "runs" cleanly. The gallery has one entry.
#pragma once
#include <string>
#include <vector>

#include "app/editor/hooks.h"
#include "app/editor/line_diff.h"

namespace kl::test {

inline app::editor::EditorHooks canned_editor_hooks() {
  using namespace app::editor;
  EditorHooks h = default_hooks();
  const auto shipped = h.shipped;
  h.compile_and_run = [shipped](app::Panel&, const app::AppContext&, const std::string& rung, const std::string& file, const std::string& text) {
    RunResult r;
    if (text.find("KL_CANNED_FAULT") != std::string::npos) {
      r.kind = RunResult::Kind::Fault;
      r.message = "out-of-bounds store to out[1000] (size 1000) by program 0, lane 1000";
      return r;
    }
    for (const DiffLine& l : line_diff(shipped(rung), text))
      if (l.kind == DiffLine::Added) {
        const size_t col = l.text.find_first_not_of(" \t");
        r.diagnostics.push_back({file, l.new_line, int(col == std::string::npos ? 1 : col + 1),
                                 "canned diagnostic (this test build compiles nothing): the line differs from the shipped source",
                                 false});
      }
    r.kind = r.diagnostics.empty() ? RunResult::Kind::Ran : RunResult::Kind::CompileErrors;
    return r;
  };
  h.gallery = [shipped](const std::string& rung) {
    return std::vector<GalleryItem>{{"first line gone", "a canned entry: the shipped source without its first line",
                                     shipped(rung).substr(shipped(rung).find('\n') + 1)}};
  };
  return h;
}

}  // namespace kl::test
