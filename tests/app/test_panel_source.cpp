// Panel::source_focus: every function a panel highlights in its source view is defined in the embedded
// source it names (assets "source/<file>"), by the rule the source view uses to start a highlight
// (app/shell.cpp: a line with "NAME(" and no ';'), and the highlight closes (a later line "}").
// A renamed kernel would otherwise leave the view highlighting nothing. The Timeline tabs (issue 30) show the
// recorded fast kernel's own source instead, with the code of a phase highlighted (app/editor/stamps.h): every
// phase a recording holds is stamped in the file the tab names.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "app/editor/line_diff.h"
#include "app/editor/stamps.h"
#include "app/panel.h"
#include "assets/embedded.h"
#include "kernels/runtime/registry.h"
#include "kernels/studies/timeline_study.h"

namespace kl {
namespace {

TEST(PanelSource, EveryHighlightedFunctionIsDefinedInTheEmbeddedSource) {
  int checked = 0;
  for (const auto& panel : app::make_panels()) {
    const app::Panel::SourceFocus f = panel->source_focus();
    if (find_kernel(panel->id())) {
      EXPECT_FALSE(f.file.empty()) << panel->id() << ": a rung's panel shows its kernel's source";
      EXPECT_FALSE(f.functions.empty()) << panel->id();
    }
    if (f.file.empty()) continue;
    const std::string_view text = assets::find("source/" + f.file);
    ASSERT_FALSE(text.empty()) << panel->id() << ": no embedded source/" << f.file;
    for (const std::string& fn : f.functions) {
      std::istringstream lines{std::string(text)};
      std::string line;
      bool starts = false, closes = false;
      while (std::getline(lines, line)) {
        if (!starts) starts = line.find(fn + "(") != std::string::npos && line.find(';') == std::string::npos;
        else if (line == "}") closes = true;
        if (closes) break;
      }
      EXPECT_TRUE(starts) << panel->id() << ": " << fn << " is not defined in source/" << f.file;
      EXPECT_TRUE(closes) << panel->id() << ": the highlight of " << fn << " never closes";
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
}

std::vector<std::string_view> lines_of(std::string_view text) { return app::editor::split_lines(text); }

TEST(PanelSource, StampsAreFoundByThePhasesName) {
  using app::editor::stamps_phase;
  EXPECT_TRUE(stamps_phase("    rec.mark(Phase::WaitQ, timeline::kNoStep, tile);", "wait-q"));
  EXPECT_TRUE(stamps_phase("  rec.mark(timeline::Phase::IssueDVDK, m, tile);", "issue-dvdk"));
  EXPECT_TRUE(stamps_phase("rec.mark(kLate ? Phase::Pack : Phase::Rescale, t, tile);", "rescale"));
  EXPECT_TRUE(stamps_phase("rec.mark(kLate ? Phase::Pack : Phase::Rescale, t, tile);", "pack"));
  EXPECT_FALSE(stamps_phase("rec.mark(Phase::WaitQFree, t, tile);", "wait-q")) << "a longer name is another phase";
  EXPECT_FALSE(stamps_phase("// Phase::WaitQ is stamped below", "wait-q")) << "no mark( call";
  const std::vector<std::string_view> lines = lines_of(
      "  for (;;) {\n"               // 0
      "    // wait for K\n"          // 1
      "    rec.mark(Phase::WaitK, t, tile);\n"
      "    mbar_wait(full_k);\n"     // 3
      "    rec.mark(Phase::IssueS, t, tile);\n"
      "#pragma unroll\n"            // 5
      "    issue_s();\n"             // 6
      "  }\n"                       // 7
      "  rec.mark(Phase::WaitK, 0, tile);\n"
      "  mbar_wait(x);\n"           // 9
      "\n"                          // 10
      "  after();\n"                // 11
      "\n"                          // 12
      "}\n");                       // 13
  const std::vector<bool> k = app::editor::stamp_lines(lines, {"wait-k"});
  EXPECT_EQ(k, (std::vector<bool>{false, true, true, true, false, false, false, false, true, true, true, true, false, false}));
  const std::vector<bool> s = app::editor::stamp_lines(lines, {"issue-s"});
  EXPECT_EQ(s, (std::vector<bool>{false, false, false, false, true, true, true, false, false, false, false, false, false, false}));
  const std::vector<bool> all = app::editor::stamp_lines(lines, {});
  EXPECT_EQ(all, (std::vector<bool>{false, false, true, false, true, false, false, false, true, false, false, false, false, false}));
}

// Rungs 5 and 6 on their Timeline tab name the recorded kernel read-only; every phase of every embedded recording
// of that kernel is stamped there, and the `phase` parameter picks what is highlighted.
TEST(PanelSource, TimelineTabsShowTheRecordedKernelsStamps) {
  int checked = 0;
  for (const auto& panel : app::make_panels()) {
    if (panel->id() != "flash-attention" && panel->id() != "backward") continue;
    const std::string kernel = panel->id() == "backward" ? timeline::kBackward : timeline::kForward;
    EXPECT_FALSE(panel->source_focus().read_only) << panel->id() << ": the steps show the editable kernel";
    panel->params().set("view", "inside");
    const app::Panel::SourceFocus f = panel->source_focus();
    EXPECT_TRUE(f.read_only) << panel->id();
    EXPECT_TRUE(f.stamps.empty()) << panel->id() << ": phase=all highlights every stamp";
    const std::string_view text = assets::find("source/" + f.file);
    ASSERT_FALSE(text.empty()) << panel->id() << ": no embedded source/" << f.file;
    const std::vector<std::string_view> lines = lines_of(text);
    std::set<timeline::Phase> phases;
    for (const timeline::Recording& r : timeline_study::embedded().recordings)
      if (r.kernel == kernel)
        for (const timeline::Cta& c : r.ctas)
          for (const timeline::Lane& l : c.lanes)
            for (const timeline::Event& e : l.events) phases.insert(e.phase);
    for (timeline::Phase ph : phases) {
      const std::string name = timeline::phase_info(ph).name;
      const std::vector<bool> lit = app::editor::stamp_lines(lines, {name});
      EXPECT_NE(std::find(lit.begin(), lit.end(), true), lit.end()) << f.file << " stamps no " << name;
      ++checked;
    }
    panel->params().set("phase", "softmax");
    EXPECT_EQ(panel->source_focus().stamps, std::vector<std::string>{"softmax"}) << panel->id();
    EXPECT_NE(panel->source_focus().highlighted.find("softmax"), std::string::npos) << panel->id();
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace kl
