// app/tour_web.*: the tour's index.html (escaped, offline: relative links, no scripts or external
// resources), the command lines it prints, and `tour --animate`: every file the page names exists, each
// GIF decodes at the tour's size with the frames its entry claims, and the stills keep index.md.
#include "app/tour_web.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "app/gif_frames.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

TEST(TourWeb, EscapesEveryTextAndLinksRelatively) {
  EXPECT_EQ(app::html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  app::TourEntry e{"01-x.png", "1 · <Vector> & add", "n<5", "n=1, s='x'", "kernel-ladder shot x --set 'a<b'", ""};
  app::TourEntry g{"02-x.gif", "1 · <Vector> & add", "sweep", "defaults", "kernel-ladder animate x", "n=1..5, 5 frames"};
  const std::string h = app::tour_html("made by <test> & co", {e, g});
  EXPECT_EQ(h.find("<Vector>"), std::string::npos);
  EXPECT_EQ(h.find("<test>"), std::string::npos);
  EXPECT_NE(h.find("1 · &lt;Vector&gt; &amp; add"), std::string::npos);
  EXPECT_NE(h.find("made by &lt;test&gt; &amp; co"), std::string::npos);
  EXPECT_NE(h.find("--set &#39;a&lt;b&#39;"), std::string::npos);
  EXPECT_NE(h.find("<img src=\"01-x.png\""), std::string::npos);
  EXPECT_NE(h.find("<img src=\"02-x.gif\""), std::string::npos);
  EXPECT_NE(h.find("n=1..5, 5 frames"), std::string::npos);
  EXPECT_EQ(h.find("http"), std::string::npos);
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("url("), std::string::npos);
  EXPECT_EQ(h.find("<h2"), h.rfind("<h2")) << "one section for the one panel";
  EXPECT_EQ(h.rfind("</html>\n"), h.size() - 8);
}

TEST(TourWeb, CommandLinesQuoteWhatTheShellWouldSplit) {
  EXPECT_EQ(app::shot_command_line("softmax", {"n_cols=2000", "view=online"}, 1400, 900, Backend::Cpu, "03-a.png"),
            "kernel-ladder shot softmax --set n_cols=2000 --set view=online --size 1400x900 --backend cpu --out 03-a.png");
  EXPECT_EQ(app::animate_command_line("relu-dropout", {}, "p=0..0.9:0.1", 3, 640, 480, Backend::Cuda, "x y.gif"),
            "kernel-ladder animate relu-dropout --vary p=0..0.9:0.1 --fps 3 --size 640x480 --backend cuda "
            "--out 'x y.gif'");
  EXPECT_EQ(app::shot_command_line("a", {"k=it's"}, 320, 240, Backend::Cpu, "f.png"),
            "kernel-ladder shot a --set 'k=it'\\''s' --size 320x240 --backend cpu --out f.png");
  EXPECT_EQ(app::join_settings({}), "defaults");
  EXPECT_EQ(app::join_settings({"a=1", "b=2"}), "a=1, b=2");
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(TourWeb, AnimatedTourWritesEveryFileThePageNames) {
  const std::string dir = test::tmp_dir() + "/tour-animate";
  std::string out;
  ASSERT_EQ(test::run_cli("tour --animate --backend cpu --size 480x320 --out " + dir, &out), 0) << out;
  const std::string html = slurp(dir + "/index.html");
  ASSERT_FALSE(html.empty()) << "no index.html";
  const std::regex img("<img src=\"([^\"]+)\"");
  std::set<std::string> files;
  int gifs = 0, pngs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), img); it != std::sregex_iterator(); ++it) {
    const std::string file = (*it)[1];
    EXPECT_EQ(file.find('/'), std::string::npos) << file << ": not beside index.html";
    files.insert(file);
    if (file.size() > 4 && file.compare(file.size() - 4, 4, ".gif") == 0) {
      ++gifs;
      const test::GifFrames g = test::read_gif(dir + "/" + file);
      ASSERT_TRUE(g.error.empty()) << file << ": " << g.error;
      EXPECT_EQ(g.width, 480) << file;
      EXPECT_EQ(g.height, 320) << file;
      EXPECT_GE(g.rgba.size(), 2u) << file;
      const std::string claim = ", " + std::to_string(g.rgba.size()) + " frames at ";
      const size_t at = html.find("<figure id=\"" + file + "\"");
      ASSERT_NE(at, std::string::npos) << file;
      EXPECT_NE(html.find(claim, at), std::string::npos) << file << ": the page does not say " << claim;
      EXPECT_NE(html.find("kernel-ladder animate ", at), std::string::npos) << file;
    } else {
      ++pngs;
      std::vector<uint8_t> rgba;
      int w = 0, h = 0;
      EXPECT_TRUE(viz::read_png(dir + "/" + file, rgba, w, h)) << file;
    }
  }
  EXPECT_EQ(files.size(), size_t(gifs + pngs)) << "a file named twice";
  EXPECT_GE(gifs, 6) << "every rung names an animation; flash-attention two";
  // Every still of index.md is on the page too.
  const std::string md = slurp(dir + "/index.md");
  const std::regex link("\\]\\(([^)]+\\.png)\\)");
  int stills = 0;
  for (auto it = std::sregex_iterator(md.begin(), md.end(), link); it != std::sregex_iterator(); ++it, ++stills)
    EXPECT_TRUE(files.count((*it)[1])) << (*it)[1] << " is in index.md, not in index.html";
  EXPECT_EQ(stills, pngs);
  EXPECT_NE(out.find("index.html"), std::string::npos);
}

}  // namespace
}  // namespace kl
