// `tour` renders every panel headlessly in ladder order and writes an index with one line per image;
// every image has the asked size and is not blank.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "kernels/editable/launch.h"
#include "kernels/studies/timeline_study.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

TEST(Tour, EveryImageAskedSizeAndNotBlank) {
  // Two levels that do not exist yet: tour creates missing parents (a fresh clone has no out/).
  test::run_shell("rm -rf " + test::tmp_dir() + "/tour-parents", nullptr);
  const std::string dir = test::tmp_dir() + "/tour-parents/a/tour";
  std::string out;
  ASSERT_EQ(test::run_cli("tour --backend cpu --size 1000x700 --out " + dir, &out), 0) << out;
  std::ifstream idx(dir + "/index.md");
  ASSERT_TRUE(idx) << "no index.md";
  std::string line;
  int images = 0, gallery = 0, inside = 0;
  const timeline::File& recorded = timeline_study::embedded();
  while (std::getline(idx, line)) {
    // "Inside the fast kernel": each recorded timeline's line says it is a recording, with its device and date.
    if (line.find(", inside the fast kernel: ") != std::string::npos) {
      ASSERT_LT(size_t(inside), recorded.recordings.size()) << line;
      const timeline::Recording& r = recorded.recordings[size_t(inside++)];
      EXPECT_NE(line.find(timeline_study::title(r)), std::string::npos) << line;
      EXPECT_NE(line.find("a recording, not a live run: recorded on " + r.device + ", " + r.date), std::string::npos) << line;
    }
    // The gallery's stops: each image's line carries its bug's one sentence (the caption).
    const size_t g = line.find(", gallery: ");
    if (g != std::string::npos) {
      ++gallery;
      bool has_sentence = false;
      for (const char* rung : {"vector-add", "transpose", "relu-dropout", "softmax"})
        for (const editable::GalleryBug& bug : editable::gallery(rung))
          has_sentence = has_sentence || (line.find(bug.sentence) != std::string::npos &&
                                          line.find("gallery: " + bug.name + "]") != std::string::npos);
      EXPECT_TRUE(has_sentence) << line;
    }
    const size_t a = line.find("]("), b = line.find(".png)");
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string file = dir + "/" + line.substr(a + 2, b + 4 - (a + 2));
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    ASSERT_TRUE(viz::read_png(file, rgba, w, h)) << file;
    EXPECT_EQ(w, 1000) << file;
    EXPECT_EQ(h, 700) << file;
    std::set<uint32_t> colours;
    for (size_t i = 0; i + 3 < rgba.size(); i += 16)
      colours.insert(uint32_t(rgba[i]) << 16 | uint32_t(rgba[i + 1]) << 8 | rgba[i + 2]);
    EXPECT_GT(colours.size(), 10u) << file << " looks blank";
    ++images;
  }
  EXPECT_GE(images, 2);
  EXPECT_GE(gallery, 3) << "the tour renders at least three gallery bugs";
  EXPECT_EQ(size_t(inside), recorded.recordings.size()) << "one stop per recorded timeline";
  EXPECT_NE(out.find("index.md"), std::string::npos);
}

}  // namespace
}  // namespace kl
