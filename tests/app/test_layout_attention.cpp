// The layout audit (viz/layout_audit.h) of the attention panel at each of its tour stops, in the
// window's frame (sidebar, source pane, status bar): `shot attention --stops --chrome --layout-report`
// over the whole matrix (1280x720 to 3840x2160, UI scales 1 and 2, the source pane shown and hidden),
// one process per configuration. Each must report zero findings over the panel's three stops: nothing
// cut horizontally, overlapping, or drawn outside its region (the panel may scroll vertically).
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

class AttentionLayout : public testing::TestWithParam<Look> {};

TEST_P(AttentionLayout, ZeroFindingsAtEveryTourStop) {
  const Look l = GetParam();
  std::string out;
  const int code = test::run_cli(std::string("shot attention --stops --chrome --layout-report --backend cpu --size ") +
                                     l.size + " --ui-scale " + std::to_string(l.scale) + (l.source ? "" : " --no-source"),
                                 &out);
  EXPECT_NE(out.find("layout report: 0 findings over 3 views"), std::string::npos) << out;
  EXPECT_EQ(code, 0) << out;
}

std::vector<Look> matrix() {
  std::vector<Look> m;
  for (const char* size : {"1280x720", "1400x900", "1920x1080", "2560x1440", "3840x2160"})
    for (int scale : {1, 2})
      for (bool source : {true, false}) m.push_back({size, scale, source});
  return m;
}

INSTANTIATE_TEST_SUITE_P(Matrix, AttentionLayout, testing::ValuesIn(matrix()), name_of);

}  // namespace
}  // namespace kl
