// GL error reporting: every GL error seen is counted and its first message kept, so tests and the
// long-run check can assert none happened, and the UI can show the first one.
#pragma once
#include <string>

namespace kl::viz {
// Drains glGetError(); returns true if there was none. `where` names the call site in the message.
bool gl_check(const char* where);
int gl_error_count();
std::string gl_first_error();
}  // namespace kl::viz
