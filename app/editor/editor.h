// The source pane: the panel's kernel source read-only (today's view: line numbers, the functions the
// view draws highlighted) or, in edit mode, an editor of it: line numbers, the same highlighting and
// syntax colours while typing, undo/redo (Ctrl+Z / Ctrl+Y), find (Ctrl+F; Enter / Shift+Enter next and
// previous, the match scrolled into view), Ctrl+Enter compiles and runs the edited kernel (the views
// redraw from its trace), "Diff against shipped", Reset, "Load bug" (the rung's gallery), compile
// errors marked in the gutter with their message beside the line and listed under the editor, and one
// status line for a run-time fault or a clean run. Edits are kept per rung until Reset
// (app/editor/persist.h). The kernels side is reached through app/editor/hooks.h only.
//
// Shortcuts fire only while the editor or its find box has the keyboard, or while no text field does:
// typing into a panel's input never compiles or opens the find bar.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/editor/diagnostics.h"
#include "app/editor/hooks.h"
#include "app/panel.h"

namespace kl::app {
struct AppContext;
}

namespace kl::app::editor {

struct RungEdit {
  std::string text;     // what the editor shows (the shipped text until edited)
  std::string shipped;  // the shipped text, once asked for
  bool have_shipped = false;
  bool loaded = false;    // text set (from the shipped source or the settings)
  bool edited = false;    // text differs from the shipped source: kept in the settings
  bool restored = false;  // text came from the settings
  uint64_t version = 0;   // a new number on every change of text (unique across rungs)
  std::string bug, bug_sentence;  // the gallery entry loaded last (until the text is reset)
  // The last Ctrl+Enter: its result, the text it compiled, and its diagnostics carried to `text`.
  bool ran = false;
  RunResult result;
  std::string compiled;
  std::vector<Diagnostic> diagnostics;
  uint64_t diagnostics_version = 0;
  std::string status;  // the status line
  bool status_ok = false;
  bool edit_in_views = false;  // the panel's views are drawn from an edited kernel (a run, until Reset)
  // The panel's checks that fail with the shipped kernel (their labels), taken while it is in the
  // views: after an edited run, a check failing that is not among them is the edit's doing, and the
  // status line says so in red rather than "ran" in green.
  std::vector<std::string> shipped_failing;
  std::string verdict_logged;
  int run_frame = 0;  // the frame of the last run (its views were drawn before it)
  // Undo and redo, a word (or a stretch of deleting, or a replacement: a bug, Reset) at a time, not a key.
  struct Snapshot {
    std::string text;
    int cursor = 0;
  };
  std::vector<Snapshot> undo, redo;
  double last_edit_time = -1;
  int last_edit_kind = 0;
  size_t last_edit_at = 0;  // where the last change ended (typing on from there stays in its step)
};

struct Editor {
  bool editing = false;  // edit mode (else the read-only view); remembered
  bool diff = false;     // the diff against shipped instead of the editor
  float frac = 0.55f;    // the source pane's share of the panel in edit mode (the splitter), remembered
  std::map<std::string, RungEdit> rungs;  // by rung ("vector-add")
  // Find.
  bool find_open = false;
  char find[256] = {0};
  int find_current = 0;  // index of the current match
  bool focus_find = false;
  // Requests the next frame carries out.
  bool focus_editor = false;
  int select_from = -1, select_to = -1;  // byte offsets to select once the editor has the keyboard
  int scroll_to_line = 0, scroll_to_col = 0;
  int scroll_frames = 0;  // frames the request is repeated (giving the field the keyboard scrolls it to its top)
  bool run_requested = false;  // Ctrl+Enter, the button, or `shot --editor run`
  // The editor's caret (byte offset) as the text field last reported it.
  int cursor = 0;
  std::string logged;  // the last "editor edited" line logged
};

// The source pane for `panel`, whose source is `file` (a rung's .cu) with `functions` highlighted.
void draw_pane(Editor& e, Panel& panel, const AppContext& ctx, const std::string& file,
               const std::vector<std::string>& functions);

// The source pane for a read-only focus (focus.read_only: a Timeline tab's recorded kernel): the embedded
// kernels/rungs file with the code of focus.stamps highlighted, the first highlighted line brought into view
// whenever the highlight changes.
void draw_kernel_source(const Panel::SourceFocus& focus);

// The rung's state, its text loaded from the shipped source the first time.
RungEdit& rung_state(Editor& e, const std::string& rung);
// Replaces the rung's text (a gallery bug, Reset, `shot --editor-file`); the editor's undo history
// starts again from it.
void set_text(Editor& e, const std::string& rung, const std::string& text);
void reset(Editor& e, Panel& panel, const std::string& rung);
// Ctrl+Z / Ctrl+Y in the editor: the text before (after) the last group of edits. False when none.
bool undo(Editor& e, const std::string& rung);
bool redo(Editor& e, const std::string& rung);
// Why the panel's views do not show the kernel in the editor ("" when they do): its last Ctrl+Enter did
// not compile or was not run, so they still show the last kernel that ran.
std::string stale_reason(const Editor& e, const std::string& rung);
// The status line after a run, held to the panel's checks drawn this frame (ui::frame_verdicts): red,
// naming the check, where one fails that passes with the shipped kernel.
struct RunVerdict {
  std::string text;
  bool ok = true;
};
RunVerdict run_verdict(RungEdit& r);
void compile_and_run(Editor& e, Panel& panel, const AppContext& ctx, const std::string& rung);

}  // namespace kl::app::editor
