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
// Controls for `keys` side by side on one line, `gap` pixels apart (-1: ImGui's item spacing); the
// caller sets the item width.
void param_row(ParamValues& p, std::initializer_list<const char*> keys, std::string* error, float gap = -1.0f);
// What a panel's result depends on, as one text: the backend, then the values of `keys`
// ("cpu/2000/12/1"). A panel recomputes when it changes.
std::string settings_key(const ParamValues& p, std::initializer_list<const char*> keys, Backend b);

void error_box(const std::string& message);          // red, wrapped, one per failure
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
