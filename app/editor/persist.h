// The editor's part of the window's settings (app/settings.*, one [KernelLadder][Settings] section of
// key=value lines): whether the source pane is in edit mode, and each rung's edited text until Reset,
//   editor=1
//   editor_frac=0.550   (the source pane's share in edit mode, the splitter)
//   edit.vector-add=// the whole text, escaped onto one line: \n newline, \r carriage return, \\ backslash
// A rung whose text equals its shipped source has no line (Reset removes it).
#pragma once
#include <string>
#include <vector>

namespace kl::app::editor {

struct Editor;

std::string escape_line(const std::string& text);
// The inverse of escape_line; an unknown escape or a lone trailing backslash is kept as written.
std::string unescape_line(const std::string& line);

std::vector<std::string> settings_lines(const Editor& e);
// Applies one key=value of the settings file; false when the key is not the editor's.
bool apply_setting(Editor& e, const std::string& key, const std::string& value);

}  // namespace kl::app::editor
