// The line every panel opens with: "Notice: " and what to see in this view, computed by the panel's study
// (kernels/studies/*: each study's notice), so a projected screen states its takeaway within ten seconds,
// above any collapsible explanation. And the checks in one line where they all pass: on a 1280x720
// projector six green lines would push the views below the fold; a failing check is shown in full.
#pragma once
#include <string>
#include <vector>

#include "kernels/runtime/params.h"
#include "kernels/studies/study.h"

namespace kl::app {

// "Notice: <text>" on a tinted band across the content region, wrapped.
void notice(const std::string& text);
// Every check that fails, in full (red); where all pass, one green line "all N checks pass: <first>; ..."
// clipped to one line, its tooltip the whole list.
void checks_summary(const std::vector<study::Check>& checks);

// A tab bar whose selection follows a choice parameter (so tour stops and `--set view=...` open a tab) and
// whose clicks set it. Adding a view is one block:
//   ViewTabs tabs("backward-views", params_, "view", view_forced_);
//   if (tabs.item("Errors", "errors")) { draw_errors(); tabs.end_item(); }
//   ...
//   tabs.end();
// A tab with no value of the parameter (value nullptr) works too: it is chosen by clicking only.
class ViewTabs {
 public:
  ViewTabs(const char* id, ParamValues& p, const char* param, std::string& forced);
  bool item(const char* label, const char* value);  // true: draw the tab's view, then end_item()
  void end_item();
  void end();  // after the last item (only when the bar opened; safe to call regardless)

 private:
  ParamValues& p_;
  const char* param_;
  const char* id_;
  std::string& forced_;
  std::string want_;
  bool open_ = false, force_ = false;
};

}  // namespace kl::app
