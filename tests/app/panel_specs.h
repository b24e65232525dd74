// Shared by the panel tests: a panel's parameter list is its study's params() (one spec per parameter,
// so `study PANEL`, `shot PANEL` and the window take the same names, ranges, defaults and help).
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "app/panel.h"
#include "kernels/studies/study.h"

namespace kl::test {

inline void expect_same_spec(const ParamSpec& a, const ParamSpec& b, const std::string& where) {
  EXPECT_EQ(a.name, b.name) << where;
  EXPECT_EQ(int(a.kind), int(b.kind)) << where;
  EXPECT_EQ(a.min, b.min) << where;
  EXPECT_EQ(a.max, b.max) << where;
  EXPECT_EQ(a.max_exclusive, b.max_exclusive) << where;
  EXPECT_EQ(a.def, b.def) << where;
  EXPECT_EQ(a.choices, b.choices) << where;
  EXPECT_EQ(a.help, b.help) << where;
  EXPECT_EQ(a.override_reason, b.override_reason) << where;
  EXPECT_EQ(a.kernel_def, b.kernel_def) << where;
  EXPECT_EQ(a.kernel_range, b.kernel_range) << where;
}

inline void expect_panel_params_are_the_studys(const std::string& id) {
  std::unique_ptr<app::Panel> panel;
  for (auto& p : app::make_panels())
    if (p->id() == id) panel = std::move(p);
  ASSERT_TRUE(panel) << id;
  const study::Entry* e = study::find(id);
  ASSERT_NE(e, nullptr) << id;
  const std::vector<ParamSpec> want = e->params();
  const std::vector<ParamSpec>& got = panel->params().specs();
  ASSERT_EQ(got.size(), want.size()) << id;
  for (size_t i = 0; i < got.size(); ++i) expect_same_spec(got[i], want[i], id + " " + want[i].name);
}

}  // namespace kl::test
