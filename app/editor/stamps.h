// Where a fast kernel stamps the phases its recorded timeline draws (issue 30, "Inside the fast kernel"): the
// source pane beside rung 5's and 6's Timeline tab shows the recorded kernel's own source, read-only, with the
// code of a phase highlighted. Pure text logic, no ImGui: tests/app/test_panel_source.cpp checks it against
// the embedded kernels.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kl::app::editor {

// Whether `line` stamps the phase a recording names `phase` ("wait-q", "issue-dvdk", "ds"): it calls mark( and
// names Phase::X, where X is the phase's name in letters and digits, case aside (WaitQ, IssueDVDK, DS).
bool stamps_phase(std::string_view line, std::string_view phase);
// Whether `line` stamps any phase (calls mark( and names a Phase::).
bool stamps_any(std::string_view line);

// The lines highlighted for `phases`: each line that stamps one of them, with the comment right above it (as
// indented) and the code after it up to the next stamp or the end of its block (a line indented less than the
// stamp, preprocessor lines aside), blank lines at its end left out; for no phases, every line that stamps one,
// alone.
std::vector<bool> stamp_lines(const std::vector<std::string_view>& lines, const std::vector<std::string>& phases);

}  // namespace kl::app::editor
