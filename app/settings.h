// What the window remembers between runs, kept in Dear ImGui's ini file (HostOptions::ini_path: the
// command line passes $XDG_CONFIG_HOME/kernel-ladder/imgui.ini, else ~/.config/...): the open panel,
// the "Kernel source" box, the source pane's share (the splitter), the UI scale chosen with Ctrl+=/-
// (absent: follow the monitor), the window's position and size, and every panel's parameters, as one [KernelLadder][Settings] section of
// key=value lines. The shell's windows are fixed (NoSavedSettings), so without this section the file
// would hold nothing of the app. Values a panel refuses on reading (a range changed, a GPU-only size
// restored on the CPU backend) are skipped, never fatal. The measure panel's `run` is a one-shot
// request (shots, the tour), not a setting: it is not kept.
#pragma once
#include <string>

#include "app/shell.h"

namespace kl::app {

class SettingsPersistence {
 public:
  // Registers the ini handler on the current ImGui context, reads `ini_path` now (before the first
  // frame, so the caller can apply the command line on top) and applies it to `s`. Empty path: off.
  SettingsPersistence(Shell& s, const std::string& ini_path);
  ~SettingsPersistence();  // takes a last snapshot and lets go of the shell (ImGui writes the file later)
  SettingsPersistence(const SettingsPersistence&) = delete;
  SettingsPersistence& operator=(const SettingsPersistence&) = delete;

  // Takes the shell's state for the next save; call once a frame. ImGui writes the file when its
  // context is destroyed and, after a change, within io.IniSavingRate seconds.
  void snapshot();
  // "restored panel softmax and 7 values from PATH" (empty when nothing was restored).
  const std::string& summary() const { return summary_; }

 private:
  Shell* shell_ = nullptr;
  std::string summary_;
};

}  // namespace kl::app
