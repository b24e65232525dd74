// What the editor needs from the kernels side, behind one interface so the window builds and is tested
// without it: the shipped source of a rung, compiling and running an edited one (the panel's views
// redraw from its trace), going back to the shipped kernel, and the rung's gallery of named bugs.
//
// default_hooks() is this build's wiring: the shipped text is the rung's embedded source
// (kernels/rungs/<rung>.cu), there is no gallery, and compile_and_run is empty (the editor says plainly
// that this build cannot compile edited kernels). The editable kernels (kernels/editable/) replace it
// with editable::shipped_source, editable::launch through the panel, and editable::gallery.
// Tests install canned hooks (install_hooks) that compile nothing.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "app/editor/diagnostics.h"

namespace kl::app {
class Panel;
struct AppContext;
}

namespace kl::app::editor {

// What one Ctrl+Enter gave.
struct RunResult {
  enum class Kind {
    Ran,            // compiled and ran cleanly: the panel's views are drawn from the edited kernel
    CompileErrors,  // did not compile: `diagnostics` say where
    Fault,          // compiled, misbehaved at run time: `message` is one line (editable::Fault::text())
    Refused,        // not run: `message` says why (a bad launch shape, no compiler in this build, ...)
  } kind = Kind::Refused;
  std::vector<Diagnostic> diagnostics;  // errors (CompileErrors) and warnings (any kind)
  std::string message;
};

// One named bug of a rung's gallery: its full source, and one sentence on what to look for.
struct GalleryItem {
  std::string name;      // "no mask"
  std::string sentence;  // "the tail program stores past the end: caught, with its program and lane"
  std::string text;      // the whole edited source
};

struct EditorHooks {
  // The rung's shipped editable source (rung: the registry's name, "vector-add"); empty: none.
  std::function<std::string(const std::string& rung)> shipped;
  // Where that text is in the repository ("kernels/rungs/vector_add.cu"), for the pane's caption.
  std::function<std::string(const std::string& rung)> shipped_path;
  // Compiles `text` (named `file` in its diagnostics) for the backend of `ctx` and runs it for `panel`,
  // whose views then draw from the edited kernel. Empty: this build cannot compile edited kernels.
  std::function<RunResult(Panel& panel, const AppContext& ctx, const std::string& rung, const std::string& file,
                          const std::string& text)>
      compile_and_run;
  // The panel's views go back to the shipped kernel (Reset). May be empty.
  std::function<void(Panel& panel, const std::string& rung)> use_shipped;
  // The rung's named bugs. May be empty.
  std::function<std::vector<GalleryItem>(const std::string& rung)> gallery;
};

EditorHooks default_hooks();
void install_hooks(EditorHooks h);  // before the window's first frame
const EditorHooks& hooks();         // the installed ones (default_hooks() until install_hooks)

// The rung a source file is of: "flash_attention_backward.cu" -> "flash-attention-backward".
std::string rung_of_file(const std::string& file);
// The name an edited source has in its diagnostics: "vector_add.cu (edited)".
std::string edited_file_name(const std::string& rung);

}  // namespace kl::app::editor
