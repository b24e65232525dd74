// The frame around the panels: the "Ladder" sidebar (window only), the current panel, and a status
// bar saying which backend runs and why, which GL renderer draws, and the frame time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/editor/editor.h"
#include "app/panel.h"

namespace kl::viz {
class RenderHost;
}

namespace kl::app {

struct Shell {
  std::vector<std::unique_ptr<Panel>> panels;
  size_t current = 0;
  AppContext ctx;
  std::string host_kind, gl_renderer;
  bool sidebar = true;
  bool show_source = true;  // the kernel's source beside the view (below it in narrow windows)
  float source_frac = 0.38f;  // the source pane's share of the panel (the splitter), remembered
  editor::Editor editor;  // the source pane's editor: edit mode, each rung's edit (kept until Reset)
  std::string message;  // last screenshot saved, etc. (shown in the status bar until message_until)
  double message_until = 0;  // ImGui::GetTime() when the message goes
  bool help_open = false;    // the help window (F1, the sidebar's "Help" entry)
  bool idle_waits = true;    // the window sleeps until input when nothing animates (off for --frames N)
  double frame_ms = 0;       // the last frame's time to build and draw (the status bar)
  double frame_start = 0;
  uint64_t frame_hash = 0;   // what the last frame drew (the window draws again until two frames agree)
  long failures = 0;     // exceptions that escaped a panel's draw (each shown in the panel's window)
  bool screenshot_requested = false;
  bool quit_requested = false;  // Ctrl+Q
  // The window's UI scale: 0 follows the monitor (base_scale); Ctrl+= / Ctrl+- / Ctrl+0 change it.
  float ui_scale = 0;
  float base_scale = 1;  // the monitor's content scale, or --ui-scale
  bool scale_fixed = false;  // --ui-scale given: the remembered scale does not override it
  float remembered_scale = 0;  // the remembered scale set aside while --ui-scale rules (kept for the next run)
  int win_x = 0, win_y = 0, win_w = 0, win_h = 0;  // the window's last position and size (0: none)
  // What the last frame showed, for the event log (--ui-log).
  size_t logged_panel = size_t(-1);
  int logged_w = 0, logged_h = 0;
  bool logged_source = true;
  std::string logged_message, logged_audit, logged_tooltip, seen_tooltip;
};

// Draws one frame's UI (between the host's begin_frame and end_frame), filling width x height.
void draw_shell(Shell& s, float width, float height);

// The window around the frame loop: applies the remembered scale and geometry and the monitor's
// content scale once (window_start), then after each frame logs what changed, saves a requested
// screenshot (saying in the status bar where it went) and keeps the geometry for the settings.
void window_start(Shell& s, viz::RenderHost& host);
void window_after_frame(Shell& s, viz::RenderHost& host, long* shots);
// --ui-scale: the window's scale whatever the monitor or the settings say (0: none).
void set_window_scale_override(float scale);

// Shows `text` in the status bar for `seconds` (logged "status TEXT").
void show_message(Shell& s, const std::string& text, double seconds = 10.0);
// The next free screenshot name in the working folder for panel `id`: kernel-ladder-ID-N.png with N past
// every number already there, so that no earlier screenshot is overwritten.
std::string next_screenshot_name(const std::string& id);

// Index of the panel with that id, or -1.
int find_panel(const Shell& s, const std::string& id);
std::string panel_ids(const Shell& s);  // "vector-add, relu-dropout, ..."

}  // namespace kl::app
