// The line every rung's panel shows about its memory accesses (issue 31): sectors per request of its main
// loads and stores (kernels/studies/memory_access.h), and for rungs 5 and 6 that the fast kernels load
// through TMA. Each panel calls draw_memory_access() at one spot; the summary is recomputed only when the
// panel's settings, the backend or the edited kernel change (cached per panel id, on the UI thread). A
// refusal reads as a muted sentence; a failure (a launch that failed) as an error box, counted as the
// panels' failures are (ui::error_text).
#pragma once
#include <string>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/params.h"

namespace kl::app {

void draw_memory_access(Backend b, const std::string& panel, const ParamValues& settings);

}  // namespace kl::app
