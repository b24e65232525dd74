// The help window (F1, or the sidebar's "Help (F1)" entry): what each rung teaches, the keys and the
// mouse, where the window writes its files, and the version. Its sentences hold no measured number.
#pragma once
#include <string>
#include <vector>

namespace kl::app {

struct Shell;

// Draws the help window while s.help_open (its close button and Escape clear it).
void draw_help(Shell& s, float width, float height);

// The help's contents as text, one entry per line: the rung lines ("1 · Vector add: ..."), the keys
// ("F12: ..."), the files ("screenshots: /abs/folder/kernel-ladder-PANEL-N.png ...") and the version
// (tests read them; the window draws the same).
struct HelpText {
  std::vector<std::string> rungs, keys, files;
  std::string version;
};
HelpText help_text(const Shell& s);

}  // namespace kl::app
