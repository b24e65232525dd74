// kernels/runtime/cell_state.*: the one list of heatmap cell states, and the #defines the heatmap
// shader is compiled with, generated from it (so the shader and the kernels cannot disagree).
#include <gtest/gtest.h>

#include <string>

#include "kernels/runtime/cell_state.h"

namespace kl {
namespace {

TEST(CellState, GlslDefinesCarryEveryStateWithItsValue) {
  const std::string d = cell_state_glsl_defines();
  int states = 0;
#define KL_CELL_CHECK(name, value, what) ++states;
  KL_CELL_STATES(KL_CELL_CHECK)
#undef KL_CELL_CHECK
  EXPECT_EQ(states, 5);
  const std::pair<const char*, CellState> expected[] = {{"CELL_NORMAL", kCellNormal},       {"CELL_MASKED", kCellMasked},
                                                        {"CELL_UNWRITTEN", kCellUnwritten}, {"CELL_HIGHLIGHT", kCellHighlight},
                                                        {"CELL_OUTSIDE", kCellOutside}};
  for (const auto& [name, state] : expected)
    EXPECT_NE(d.find(std::string("#define ") + name + " " + std::to_string(int(state)) + "\n"), std::string::npos)
        << name << " in:\n" << d;
  int lines = 0;
  for (char c : d) lines += c == '\n';
  EXPECT_EQ(lines, states) << d;
}

TEST(CellState, StatesAreDistinctAndStoredExactlyAsFloats) {
  const CellState all[] = {kCellNormal, kCellMasked, kCellUnwritten, kCellHighlight, kCellOutside};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(int(cell_value(all[i]) + 0.5f), int(all[i]));  // the shader reads int(g + 0.5)
    for (size_t j = i + 1; j < 5; ++j) EXPECT_NE(int(all[i]), int(all[j]));
  }
}

}  // namespace
}  // namespace kl
