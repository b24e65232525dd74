#include "app/help.h"

#include <imgui.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "app/shell.h"
#include "app/ui.h"
#include "app/version.h"
#include "assets/embedded.h"
#include "viz/ui_log.h"

namespace kl::app {
namespace {

// What each rung is there to teach, in a sentence. A panel not named here (a rung added later) is
// described by the heading of its text asset (assets/text/ID.md, '-' as '_').
const std::map<std::string, std::string>& teaches() {
  static const std::map<std::string, std::string> m = {
      {"vector-add",
       "the execution model: a launch is a grid of programs, each handling BLOCK_SIZE elements, and a mask "
       "switches off the offsets past the end of the arrays."},
      {"transpose",
       "the warp's view of memory: a warp's 32 lanes load and store together, and a request costs the 32-byte "
       "sectors it touches; three transposes (naive, a shared-memory tile, the tile padded) against its sectors "
       "and its shared-memory banks."},
      {"relu-dropout",
       "fusion: ReLU and dropout in one pass over memory instead of two, with a counter-based random number per "
       "element, so that the mask is made again rather than stored."},
      {"softmax",
       "one program per row: the write-up's BLOCK_SIZE = 1024 bug (the columns past it are never written) beside "
       "its fix, and the online softmax that walks a row of any width with a running max and sum."},
      {"attention",
       "attention with all of K and V staged on chip for each block of queries, and the wall where they no "
       "longer fit in shared memory."},
      {"flash-attention",
       "FlashAttention's forward: K and V in tiles with an online softmax, so that any length fits, and the "
       "output built up tile by tile."},
      {"backward",
       "the backward pass: what training keeps from the forward (one number per query row instead of the whole "
       "attention matrix) and the gradients computed again tile by tile."},
      {"measure",
       "the rungs' kernels timed against ceilings measured in the same run: a copy for the memory-bound "
       "kernels, a matrix multiply for FlashAttention."},
  };
  return m;
}

std::string asset_heading(const std::string& id) {
  std::string name = id;
  std::replace(name.begin(), name.end(), '-', '_');
  std::string_view t = assets::find("text/" + name + ".md");
  if (t.rfind("# ", 0) != 0) return "";
  const size_t eol = t.find('\n');
  return std::string(t.substr(2, eol == std::string_view::npos ? std::string_view::npos : eol - 2));
}

std::string working_folder() {
  char b[4096];
  return ::getcwd(b, sizeof b) ? std::string(b) : std::string(".");
}

}  // namespace

HelpText help_text(const Shell& s) {
  HelpText h;
  for (const auto& p : s.panels) {
    const auto it = teaches().find(p->id());
    std::string what = it != teaches().end() ? it->second : asset_heading(p->id());
    h.rungs.push_back(p->title() + (what.empty() ? "" : ": " + what));
  }
  h.keys = {
      "F1: this help",
      "F12: a screenshot of the window (the status bar says where it went)",
      "Ctrl+= / Ctrl+- / Ctrl+0: the UI larger / smaller / back to the monitor's scale",
      "Ctrl+Z: undo the last parameter change (in the editor: the last edit, a word at a time); "
      "Reset parameters (sidebar): the panel's defaults, undone by Ctrl+Z too",
      "Ctrl+Q: quit",
      "Up / Down, then Enter or Space: open a sidebar entry",
      "For a projector: F2 shows or hides the source pane, Ctrl+B the sidebar; Ctrl+PageDown / Ctrl+PageUp: the "
      "next / previous rung",
      "A typed value applies on Enter, Tab or a click elsewhere; Escape puts the old one back",
      "Mouse wheel: scroll the panel; Ctrl+wheel over a heatmap: zoom it; drag: move a zoomed heatmap; "
      "double-click: the whole heatmap again",
      "In the editor: Ctrl+Enter compiles and runs the edit, Ctrl+F finds, Ctrl+Z / Ctrl+Y undo and redo",
  };
  const std::string cwd = working_folder();
  const char* ini = ImGui::GetCurrentContext() ? ImGui::GetIO().IniFilename : nullptr;
  h.files = {
      "Screenshots (F12): " + cwd + "/kernel-ladder-PANEL-N.png, numbered past those already there",
      "Measure's exports: " + cwd + "/kernel-ladder-measure.json and .csv (the name is editable)",
      std::string("Settings, the open panel, every parameter and your edited kernels: ") +
          (ini && *ini ? ini : "not kept (no settings folder)"),
      "Command line: kernel-ladder --help; the manual: README.md and docs/ in the source tree",
  };
  h.version = version_text();
  return h;
}

void draw_help(Shell& s, float width, float height) {
  static bool shown = false;
  if (s.help_open != shown) {
    viz::ui_log::event(s.help_open ? "help open" : "help closed");
    shown = s.help_open;
    if (s.help_open && viz::ui_log::is_open()) {  // what it says, for a test that reads the log
      const HelpText h = help_text(s);
      viz::ui_log::event("help version " + h.version);
      for (const auto* part : {&h.rungs, &h.keys, &h.files})
        for (const std::string& l : *part) viz::ui_log::event("help " + l);
    }
  }
  // A modal window over the panels: F1, its close button or Escape closes it.
  if (s.help_open && !ImGui::IsPopupOpen("Help")) ImGui::OpenPopup("Help");
  const float em = ImGui::GetFontSize();
  const ImVec2 size(std::min(width * 0.9f, em * 52), std::min(height * 0.85f, em * 40));
  ImGui::SetNextWindowPos(ImVec2(width * 0.5f, height * 0.5f), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(size, ImGuiCond_Appearing);
  bool open = true;
  if (ImGui::BeginPopupModal("Help", &open, ImGuiWindowFlags_NoSavedSettings)) {
    const HelpText h = help_text(s);
    ImGui::TextUnformatted(h.version.c_str());
    ui::wrapped("A desktop explorer of GPU kernels: each rung launches a real kernel and draws what it did from a "
                "trace it recorded.");
    ui::section("What each rung teaches");
    for (const std::string& l : h.rungs) ui::wrapped(l);
    ui::section("Keys and mouse");
    for (const std::string& l : h.keys) ui::wrapped(l);
    ui::section("Where files go");
    for (const std::string& l : h.files) ui::wrapped(l);
    viz::ui_log::place("window", "help", ImGui::GetWindowPos().x, ImGui::GetWindowPos().y,
                       ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y);
    if (ImGui::IsKeyPressed(ImGui::GetIO().KeyMap[ImGuiKey_Escape], false)) open = false;
    if (!open || !s.help_open) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  if (!open) s.help_open = false;
}

}  // namespace kl::app
