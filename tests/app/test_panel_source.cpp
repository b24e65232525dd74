// Panel::source_focus: every function a panel highlights in its source view is defined in the embedded
// source it names (assets "source/<file>"), by the rule the source view uses to start a highlight
// (app/shell.cpp: a line with "NAME(" and no ';'), and the highlight closes (a later line "}").
// A renamed kernel would otherwise leave the view highlighting nothing.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "app/panel.h"
#include "assets/embedded.h"
#include "kernels/runtime/registry.h"

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

}  // namespace
}  // namespace kl
