// The layout audit (viz/layout_audit.h) over every panel at every tour stop, in the window's frame
// (`shot all --chrome`: sidebar, source pane, status bar), one process per configuration: sizes from
// 1280x720 to 3840x2160, UI scales 1 and 2, the source pane shown and hidden. Each configuration must
// report zero findings (the command exits 1 and prints one line per finding otherwise).
//
// Every panel at every one of its tour stops is audited in each configuration (`shot all`); a finding's
// line names its panel and stop. One panel alone: `shot PANEL --stops --chrome --layout-report ...`.
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
  std::string s = std::string("s") + i.param.size + "_x" + std::to_string(i.param.scale) + (i.param.source ? "_source" : "_nosource");
  return s;
}

class LayoutAudit : public testing::TestWithParam<Look> {};

TEST_P(LayoutAudit, NothingCutOutsideItsRegionOrOverlapping) {
  const Look l = GetParam();
  std::string out;
  const int code = test::run_cli("shot all --chrome --layout-report --backend " + test::window_backend() + " --frames 3 --size " + l.size +
                                     " --ui-scale " + std::to_string(l.scale) + (l.source ? "" : " --no-source"),
                                 &out);
  EXPECT_NE(out.find("layout report: 0 findings over "), std::string::npos) << out;
  EXPECT_EQ(code, 0) << out;
}

// Every configuration of the matrix: 5 sizes x UI scales 1 and 2 x the source pane shown and hidden.
INSTANTIATE_TEST_SUITE_P(Matrix, LayoutAudit,
                         testing::Values(Look{"1280x720", 1, true}, Look{"1280x720", 1, false},
                                         Look{"1280x720", 2, true}, Look{"1280x720", 2, false},
                                         Look{"1400x900", 1, true}, Look{"1400x900", 1, false},
                                         Look{"1400x900", 2, true}, Look{"1400x900", 2, false},
                                         Look{"1920x1080", 1, true}, Look{"1920x1080", 1, false},
                                         Look{"1920x1080", 2, true}, Look{"1920x1080", 2, false},
                                         Look{"2560x1440", 1, true}, Look{"2560x1440", 1, false},
                                         Look{"2560x1440", 2, true}, Look{"2560x1440", 2, false},
                                         Look{"3840x2160", 1, true}, Look{"3840x2160", 1, false},
                                         Look{"3840x2160", 2, true}, Look{"3840x2160", 2, false}),
                         name_of);

// The audit finds what it is for: a panel drawn into a window too small for it is reported, one line
// per finding naming the panel, the widget and the rectangles, and the command exits 1.
TEST(LayoutAuditCommand, ReportsWhatIsCutAndExitsOne) {
  std::string out;
  const int code = test::run_cli("shot flash-attention --chrome --layout-report --backend cpu --size 400x300", &out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("flash-attention 400x300 scale 1 chrome+source: "), std::string::npos) << out;
  EXPECT_NE(out.find(" leaves the visible region ["), std::string::npos) << out;
  EXPECT_EQ(out.find("layout report: 0 findings"), std::string::npos) << out;
}

// --stops audits one panel at each of its tour stops, and only those.
TEST(LayoutAuditCommand, StopsAuditsOnePanelAtEachOfItsTourStops) {
  std::string out;
  EXPECT_EQ(test::run_cli("shot softmax --stops --chrome --layout-report --backend cpu --size 1400x900", &out), 0) << out;
  EXPECT_NE(out.find("layout report: 0 findings over 3 views at 1400x900"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("shot softmax --stops --set n_cols=5 --layout-report --backend cpu", &out), 2) << out;
}

TEST(LayoutAuditCommand, ChromeShotIsWhatTheWindowShows) {
  const std::string png = test::tmp_dir() + "/chrome-softmax.png";
  std::string out;
  EXPECT_EQ(test::run_cli("shot softmax --chrome --backend cpu --size 1920x1080 --out " + png, &out), 0) << out;
  EXPECT_NE(out.find("wrote " + png), std::string::npos) << out;
}

TEST(LayoutAuditCommand, UiScaleOutOfRangeExitsTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("shot softmax --layout-report --ui-scale 9", &out), 2) << out;
  EXPECT_NE(out.find("--ui-scale=9 is out of range"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("--ui-scale abc --frames 1", &out), 2) << out;
  EXPECT_NE(out.find("--ui-scale=abc is out of range"), std::string::npos) << out;
}

}  // namespace
}  // namespace kl
