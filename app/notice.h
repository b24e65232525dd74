// The line every panel opens with: "Notice: " and what to see in this view, computed by the panel's study
// (kernels/studies/*: each study's notice), so a projected screen states its takeaway within ten seconds,
// above any collapsible explanation. And the checks in one line where they all pass: on a 1280x720
// projector six green lines would push the views below the fold; a failing check is shown in full.
#pragma once
#include <string>
#include <vector>

#include "kernels/studies/study.h"

namespace kl::app {

// "Notice: <text>" on a tinted band across the content region, wrapped.
void notice(const std::string& text);
// Every check that fails, in full (red); where all pass, one green line "all N checks pass: <first>; ..."
// clipped to one line, its tooltip the whole list.
void checks_summary(const std::vector<study::Check>& checks);

}  // namespace kl::app
