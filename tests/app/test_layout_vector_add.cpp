// The layout audit (viz/layout_audit.h) of the vector-add panel at each of its tour stops in the window's
// frame (`shot vector-add --stops --chrome --layout-report`: sidebar, source pane, status bar), one process per
// configuration over the whole matrix: sizes from 1280x720 to 3840x2160, UI scales 1 and 2, the source
// pane shown and hidden. Each must report zero findings over all 2 stops (the command exits 1 and
// prints one line per finding otherwise).
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace kl {
namespace {

struct Look {
  const char* size;
  int scale;
  bool source;
};

std::string name_of(const testing::TestParamInfo<Look>& i) {
  return std::string("s") + i.param.size + "_x" + std::to_string(i.param.scale) + (i.param.source ? "_source" : "_nosource");
}

class VectorAddLayout : public testing::TestWithParam<Look> {};

TEST_P(VectorAddLayout, NothingCutOutsideItsRegionOrOverlappingAtAnyStop) {
  const Look l = GetParam();
  std::string out;
  const int code = test::run_cli(std::string("shot vector-add --stops --chrome --layout-report --backend cpu --size ") + l.size +
                                     " --ui-scale " + std::to_string(l.scale) + (l.source ? "" : " --no-source"),
                                 &out);
  EXPECT_NE(out.find("layout report: 0 findings over 2 views"), std::string::npos) << out;
  EXPECT_EQ(code, 0) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, VectorAddLayout,
    testing::Values(Look{"1280x720", 1, true}, Look{"1280x720", 1, false}, Look{"1280x720", 2, true},
                    Look{"1280x720", 2, false}, Look{"1400x900", 1, true}, Look{"1400x900", 1, false},
                    Look{"1400x900", 2, true}, Look{"1400x900", 2, false}, Look{"1920x1080", 1, true},
                    Look{"1920x1080", 1, false}, Look{"1920x1080", 2, true}, Look{"1920x1080", 2, false},
                    Look{"2560x1440", 1, true}, Look{"2560x1440", 1, false}, Look{"2560x1440", 2, true},
                    Look{"2560x1440", 2, false}, Look{"3840x2160", 1, true}, Look{"3840x2160", 1, false},
                    Look{"3840x2160", 2, true}, Look{"3840x2160", 2, false}),
    name_of);

}  // namespace
}  // namespace kl
