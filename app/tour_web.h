// The tour as a web page, and the tour's animations.
//   `tour` writes index.html beside the images: every image (and, with --animate, every GIF) with its
//   panel, settings and the command line that makes that one file, in ladder order. Readable offline:
//   relative links only, the style inline, no scripts, no external resources, every text escaped.
//   `tour --animate` also writes each panel's animations() (app/panel.h) as GIFs, numbered on after
//   the stills.
#pragma once
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"

namespace kl::viz {
class RenderHost;
}

namespace kl::app {

struct Shell;

struct TourEntry {
  std::string file;         // relative to the tour's directory
  std::string panel_title;  // the panel's title ("3 · Softmax: the truncation bug")
  std::string name;         // the stop's or the animation's name
  std::string settings;     // "n_cols=2000, chunk=256", or "defaults"
  std::string command;      // the command line that makes this file alone
  std::string motion;       // animations: "n_cols=961..1089:16, 9 frames at 2 fps"; empty for stills
};

// The command lines, each word quoted for a POSIX shell where it needs it.
std::string shot_command_line(const std::string& panel, const std::vector<std::string>& sets, int width,
                              int height, Backend b, const std::string& file);
std::string animate_command_line(const std::string& panel, const std::vector<std::string>& sets,
                                 const std::string& vary, int fps, int width, int height, Backend b,
                                 const std::string& file);
std::string join_settings(const std::vector<std::string>& sets);  // "a=1, b=2" or "defaults"

std::string html_escape(const std::string& text);  // & < > " ' as character references
// The page: `about` under the heading, then one section per panel (first appearance order) with its
// entries in the given order.
std::string tour_html(const std::string& about, const std::vector<TourEntry>& entries);
// Writes DIR/index.html; throws RuntimeError naming the file when it cannot.
void write_tour_html(const std::string& dir, const std::string& about, const std::vector<TourEntry>& entries);

// Every panel's animations into DIR as NN-PANEL-NAME.gif, NN counting on from *k; appends their entries.
// `s` has its host fields and backend set; its panels are re-created per frame.
void tour_animations(Shell& s, viz::RenderHost& host, const std::string& dir, std::vector<TourEntry>* entries,
                     int* k);

}  // namespace kl::app
