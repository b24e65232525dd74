// The frame around the panels: the "Ladder" sidebar (window only), the current panel, and a status
// bar saying which backend runs and why, which GL renderer draws, and the frame time.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/panel.h"

namespace kl::app {

struct Shell {
  std::vector<std::unique_ptr<Panel>> panels;
  size_t current = 0;
  AppContext ctx;
  std::string host_kind, gl_renderer;
  bool sidebar = true;
  bool show_source = true;  // the kernel's source beside the view (wide windows only)
  std::string message;  // last screenshot saved, etc.
  long failures = 0;     // exceptions that escaped a panel's draw (each shown in the panel's window)
  bool screenshot_requested = false;
};

// Draws one frame's UI (between the host's begin_frame and end_frame), filling width x height.
void draw_shell(Shell& s, float width, float height);

// Index of the panel with that id, or -1.
int find_panel(const Shell& s, const std::string& id);
std::string panel_ids(const Shell& s);  // "vector-add, relu-dropout, ..."

}  // namespace kl::app
