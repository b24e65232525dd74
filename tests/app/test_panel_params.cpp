// One spec per parameter: a panel's parameter that a kernel of its rung also takes is that kernel's
// spec (kernels/rungs/X.h, namespace param), or a declared panel_override with its reason; `list`
// shows both where they differ.
#include <gtest/gtest.h>

#include <string>

#include "app/panel.h"
#include "kernels/runtime/registry.h"
#include "test_util.h"

namespace kl {
namespace {

void expect_same(const ParamSpec& a, const ParamSpec& b, const std::string& where) {
  EXPECT_EQ(int(a.kind), int(b.kind)) << where;
  EXPECT_EQ(a.min, b.min) << where;
  EXPECT_EQ(a.max, b.max) << where;
  EXPECT_EQ(a.max_exclusive, b.max_exclusive) << where;
  EXPECT_EQ(a.def, b.def) << where;
  EXPECT_EQ(a.choices, b.choices) << where;
  EXPECT_EQ(a.help, b.help) << where;
}

TEST(PanelParams, EqualTheKernelSpecOrAreDeclaredOverrides) {
  int shared = 0, overrides = 0;
  for (const auto& panel : app::make_panels()) {
    const KernelEntry* k = find_kernel(panel->id());
    if (!k) continue;  // a panel with no kernel of its name (measure)
    for (const ParamSpec& p : panel->params().specs()) {
      const ParamSpec* ks = nullptr;
      for (const ParamSpec& s : k->params) ks = s.name == p.name ? &s : ks;
      const std::string where = panel->id() + " " + p.name;
      if (!ks) {
        EXPECT_FALSE(p.is_override()) << where << ": an override of no kernel parameter";
        continue;
      }
      ++shared;
      if (!p.is_override()) {
        expect_same(p, *ks, where);
        continue;
      }
      ++overrides;
      // Only the range (inside the kernel's) and the default may differ, and the record says from what.
      EXPECT_EQ(p.kernel_def, ks->def) << where;
      EXPECT_EQ(p.kernel_range, ks->range_text()) << where;
      EXPECT_GE(p.min, ks->min) << where;
      EXPECT_LE(p.max, ks->max) << where;
      ParamSpec same = p;
      same.min = ks->min, same.max = ks->max, same.def = ks->def;
      expect_same(same, *ks, where);
      EXPECT_TRUE(p.def != ks->def || p.min != ks->min || p.max != ks->max) << where << ": overrides nothing";
    }
  }
  EXPECT_GE(shared, 10);  // block_size, p, seed, chunk, causal, scale, block_m, block_n ...
  EXPECT_GE(overrides, 1);
}

TEST(PanelParams, OverrideRefusesARangeOutsideTheKernelsAndNeedsAReason) {
  const ParamSpec k = pow2_param("block", 16, 128, 64, "BLOCK");
  EXPECT_THROW(panel_override(k, 16, 256, "64", "wider"), std::logic_error);
  EXPECT_THROW(panel_override(k, "32", ""), std::logic_error);
  EXPECT_THROW(panel_override(k, 16, 32, "64", "default outside"), std::logic_error);
  const ParamSpec o = panel_override(k, 16, 32, "32", "a small picture");
  EXPECT_EQ(o.kernel_def, "64");
  EXPECT_EQ(o.kernel_range, "powers of two in [16, 128]");
  EXPECT_EQ(o.range_text(), "powers of two in [16, 32]");
}

TEST(PanelParams, ListShowsBothWhereThePanelDiffers) {
  std::string out;
  ASSERT_EQ(test::run_cli("list", &out), 0) << out;
  for (const auto& panel : app::make_panels())
    for (const ParamSpec& p : panel->params().specs())
      if (p.is_override())
        EXPECT_NE(out.find("the kernel's: default " + p.kernel_def), std::string::npos) << panel->id() << " " << p.name;
  EXPECT_NE(out.find("the panel's differs: "), std::string::npos) << out;
}

}  // namespace
}  // namespace kl
