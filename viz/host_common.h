// Internal to viz/: what the two render hosts share (ImGui context, style, fonts). Not for panels.
#pragma once
#include <string>

namespace kl::viz::detail {

// Creates the ImGui context with the project's dark style and the embedded DejaVu fonts.
// `ini_path` empty: no layout file. Throws RuntimeError when a font is missing.
void create_imgui_context(const std::string& ini_path);
// Destroys it again (after the backends have been shut down).
void destroy_imgui_context();

}  // namespace kl::viz::detail
