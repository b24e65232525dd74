// Small UI helpers every panel uses, so controls and messages look and behave the same everywhere.
#pragma once
#include <exception>
#include <initializer_list>
#include <string>

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
// Width param_control() takes for `key` with the current item width (label and steppers included).
float param_width(const ParamValues& p, const std::string& key);
// What a panel's result depends on, as one text: the backend, then the values of `keys`
// ("cpu/2000/12/1"). A panel recomputes when it changes.
std::string settings_key(const ParamValues& p, std::initializer_list<const char*> keys, Backend b);
// An edited kernel started or stopped running (the editor's Ctrl+Enter, Reset): every settings_key
// changes from now on ("/src1", ...), so each panel draws its views again from the kernel it now runs.
void source_changed();

void error_box(const std::string& message);          // red, wrapped, one per failure
// Text wrapped at the content region's right edge (long check lines and captions never run off it).
void wrapped(const std::string& text);
void wrapped_colored(unsigned color, const std::string& text);  // IM_COL32

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
