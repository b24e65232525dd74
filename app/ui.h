// Small UI helpers every panel uses, so controls and messages look and behave the same everywhere.
#pragma once
#include <exception>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/params.h"

namespace kl::app::ui {

// A control for one parameter of `p` (slider, power-of-two stepper, checkbox or combo by its kind).
// A value the user types that the spec refuses is not applied: the refusal is shown under the control.
// Returns true when the value changed.
bool param_control(ParamValues& p, const std::string& key, std::string* error);
// Controls for `keys` side by side, `gap` pixels apart (-1: ImGui's item spacing), wrapping onto the
// next line where the next control would leave the window's content region; the caller sets the item
// width (in pixels at UI scale 1: it is scaled with the UI).
void param_row(ParamValues& p, std::initializer_list<const char*> keys, std::string* error, float gap = -1.0f);
// Around controls that do not apply to what is shown (off: nothing happens): drawn disabled, in one group whose
// hover shows `why`.
void begin_not_here(bool off);
void end_not_here(bool off, const char* why);
// Width param_control() takes for `key` with the current item width (label and steppers included).
float param_width(const ParamValues& p, const std::string& key);
// What a panel's result depends on, as one text: the backend, then the values of `keys`
// ("cpu/2000/12/1"). A panel recomputes when it changes.
std::string settings_key(const ParamValues& p, std::initializer_list<const char*> keys, Backend b);
// An edited kernel started or stopped running (the editor's Ctrl+Enter, Reset): every settings_key
// changes from now on ("/src1", ...), so each panel draws its views again from the kernel it now runs.
void source_changed();

void error_box(const std::string& message);          // red, wrapped, one per failure
// A message for under a control, in the window's words: "--set n=0: must be [1, 100]" (the command
// line's wording, which ParamValues throws) becomes "n = 0 is not allowed: must be [1, 100]".
std::string ui_wording(const std::string& message);
// Text wrapped at the content region's right edge (long check lines and captions never run off it),
// between words only: a number ("0.5050", "5.29x") is never broken across lines, as Dear ImGui's own
// wrapping would after a '.' or ','.
void wrapped(const std::string& text);
// `text` broken into lines no wider than `width` in the current font: at spaces (and at its own line
// breaks); a word wider than a line alone is split where it must.
std::vector<std::string> wrap_lines(const std::string& text, float width);
void wrapped_colored(unsigned color, const std::string& text);  // IM_COL32
void wrapped_dim(const std::string& text);  // in the style's disabled-text colour (captions, provenance)
void wrapped_at(const std::string& text, float width);  // wrapped at `width` pixels from the cursor
// A sentence a panel shows for what just happened or what to beware of (an export's path, a warning),
// wrapped in `color`, and logged as "note PANEL TEXT" the first time it shows (tests of the window read it).
void note(unsigned color, const std::string& text);

// Side-by-side views that stack when the panel is narrow: as many of `n` views of at least
// `min_width` pixels (at UI scale 1) per row as fit, each `width` wide.
struct ColumnsLayout {
  int per_row = 1;
  float width = 0;
};
ColumnsLayout columns_or_stack(int n, float min_width);
void column_begin(const ColumnsLayout& c, int i);  // view i: on the same row as i-1 unless a row starts
void column_end();
// Instead of ImGui::TableHeadersRow(): each header wraps inside its column instead of being truncated.
void table_headers_wrapped();
// The panel whose controls are drawn now, as the event log names it (the shell sets it).
void set_log_panel(const std::string& id);

// Parameter changes made in the window (a control, a reset), newest last, for undo (Ctrl+Z). Each is
// one step: a reset of a panel's parameters is one step however many values it changed.
struct ParamStep {
  ParamValues* params = nullptr;
  std::string owner;  // the panel's id
  std::vector<std::pair<std::string, std::string>> before;  // key, value before the change
  std::string what;   // "n_cols 2000 -> 1500", "reset 3 values"
};
const std::vector<ParamStep>& param_history();
// Undoes the newest step: its values go back (logged "undo PANEL WHAT"). False when there is none.
bool undo_param_step(std::string* owner);
// Every parameter of `p` to its default, as one step (logged "reset PANEL: N values"); returns how many
// values changed.
int reset_params(ParamValues& p, const std::string& owner);

// Something on screen changes without input (a background measurement, a playing animation, a
// message that expires): the window draws its next frame within `seconds` (0: at once) instead of
// waiting for input. Asked again every frame for as long as it lasts.
void keep_drawing(double seconds = 0);
double next_frame_within();  // the soonest asked for since the last call (< 0: none); resets it

// What the panel's checks (status_line) said in this frame: each label and verdict, in order. The
// editor compares them with the shipped kernel's after running an edit (the panel's verdict, not the
// compile, says whether the edited kernel is right).
struct Verdict {
  std::string label, text;
  bool ok = true;
};
const std::vector<Verdict>& frame_verdicts();
void begin_frame_verdicts();  // the shell clears them before a panel draws
// A size at UI scale 1 in pixels, at the current scale.
float px(float pixels_at_scale_1);
void status_line(const char* label, const std::string& text, bool ok);  // "matches reference: yes"
void explain(const char* text_asset);                 // wrapped text from assets/text/NAME.md
void section(const char* title);                      // a heading with a separator

// The text a panel shows for a failure it caught: e.what(), except std::bad_alloc, which becomes the
// host-memory refusal naming the memory available. Every failure but an InputError (a refusal of the
// user's settings) is counted: the soak checks that none was shown.
std::string error_text(const std::exception& e);
long failures_shown();
std::string first_failure_shown();  // its text; empty while there was none

}  // namespace kl::app::ui
