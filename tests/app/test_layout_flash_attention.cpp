// The layout audit (viz/layout_audit.h) of the FlashAttention panel at each of its tour stops, in the
// window's frame (sidebar, source pane, status bar), over the whole matrix: sizes 1280x720 to 3840x2160,
// UI scales 1 and 2, the source pane shown and hidden. One process per configuration; each must report
// zero findings (the command prints one line per finding and exits 1 otherwise).
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

class FlashAttentionLayout : public testing::TestWithParam<Look> {};

TEST_P(FlashAttentionLayout, ZeroFindingsAtEveryTourStop) {
  const Look l = GetParam();
  std::string out;
  const int code = test::run_cli(std::string("shot flash-attention --stops --chrome --layout-report --backend cpu --size ") +
                                     l.size + " --ui-scale " + std::to_string(l.scale) + (l.source ? "" : " --no-source"),
                                 &out);
  EXPECT_NE(out.find("layout report: 0 findings over"), std::string::npos) << out;
  EXPECT_EQ(code, 0) << out;
}

std::vector<Look> matrix() {
  std::vector<Look> v;
  for (const char* s : {"1280x720", "1400x900", "1920x1080", "2560x1440", "3840x2160"})
    for (int scale : {1, 2})
      for (bool source : {true, false}) v.push_back({s, scale, source});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FlashAttentionLayout, testing::ValuesIn(matrix()), name_of);

}  // namespace
}  // namespace kl
