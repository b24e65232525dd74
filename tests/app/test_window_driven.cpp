// The real window under Xvfb, driven by X input events (xdotool, through XTEST) as a user would drive
// it: every sidebar entry clicked, a slider dragged, a value typed into an input and Enter pressed, an
// out-of-range value typed and its refusal seen under the control, a heatmap cell hovered, F12 pressed
// (the status bar says where the PNG went), the window resized to 1280x720 and back, and closed with
// Ctrl+Q. The app's state is read from the line log the window writes (--ui-log), which also carries
// the window's own layout audit; after each step the screen is read from Xvfb's framebuffer file
// (-fbdir, XWD format) and kept as a PNG under the test's scratch directory (window-driven/NN-STEP.png).
// Skips only where Xvfb or xdotool is not installed (./ladder.sh installs both).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

bool have(const char* tool) { return test::run_shell(std::string("command -v ") + tool, nullptr) == 0; }
bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}
void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint32_t be32(const std::string& b, size_t at) {
  return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) | (uint32_t(uint8_t(b[at + 2])) << 8) |
         uint32_t(uint8_t(b[at + 3]));
}

// Xvfb's screen as XWD: a big-endian header (its size at 0, width and height at 16 and 20, bytes per
// line at 48, colour count at 76), the window name, 12 bytes per colour, then BGRX pixels.
bool framebuffer_png(const std::string& xwd, const std::string& png, std::string* why) {
  const std::string b = read_file(xwd);
  if (b.size() < 100) return *why = "framebuffer file too short: " + xwd, false;
  const uint32_t header = be32(b, 0), w = be32(b, 16), h = be32(b, 20), bpl = be32(b, 48), ncolors = be32(b, 76);
  const size_t start = size_t(header) + size_t(ncolors) * 12;
  if (w == 0 || h == 0 || bpl < w * 4 || b.size() < start + size_t(bpl) * h) return *why = "unexpected XWD layout", false;
  std::vector<uint8_t> rgba(size_t(w) * h * 4);
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) {
      const uint8_t* p = reinterpret_cast<const uint8_t*>(b.data()) + start + size_t(y) * bpl + size_t(x) * 4;
      uint8_t* q = &rgba[(size_t(y) * w + x) * 4];
      q[0] = p[2], q[1] = p[1], q[2] = p[0], q[3] = 255;
    }
  viz::write_png(png, rgba, int(w), int(h));
  return true;
}

struct Rect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int cx() const { return (x0 + x1) / 2; }
  int cy() const { return (y0 + y1) / 2; }
};

class Driven : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have("Xvfb")) GTEST_SKIP() << "Xvfb is not installed (./ladder.sh installs it)";
    if (!have("xdotool")) GTEST_SKIP() << "xdotool is not installed (./ladder.sh installs it)";
    // One test of this file at a time (ctest runs them in parallel processes): they pick displays from
    // the same range. Each has its own directory (the editor's: window-driven-editor/).
    lock_ = ::open((test::tmp_dir() + "/window-driven.lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock_ >= 0) ::flock(lock_, LOCK_EX);
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = test::tmp_dir() + "/window-driven" + (name.rfind("Editor", 0) == 0 ? "-editor" : "");
    test::run_shell("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "/fb' '" + dir_ + "/config'", nullptr);
    // This suite's display numbers: the first of :45..:49 with no server.
    for (int n = 45; n <= 49 && display_.empty(); ++n)
      if (!exists("/tmp/.X11-unix/X" + std::to_string(n)) && !exists("/tmp/.X" + std::to_string(n) + "-lock"))
        display_ = ":" + std::to_string(n);
    ASSERT_FALSE(display_.empty()) << "displays :45 to :49 are all taken";
    xvfb_ = spawn("exec Xvfb " + display_ + " -screen 0 1920x1080x24 -fbdir '" + dir_ + "/fb' -nolisten tcp");
    const std::string sock = "/tmp/.X11-unix/X" + display_.substr(1);
    for (int i = 0; i < 100 && !exists(sock); ++i) sleep_ms(100);
    ASSERT_TRUE(exists(sock)) << "Xvfb did not start on " << display_;
  }

  void TearDown() override {
    if (app_ > 0) kill(app_, SIGKILL), waitpid(app_, nullptr, 0);
    if (xvfb_ > 0) kill(xvfb_, SIGTERM), waitpid(xvfb_, nullptr, 0);
    if (lock_ >= 0) ::close(lock_);  // lets the next test of this file go
  }

  pid_t spawn(const std::string& cmd) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }

  std::string x(const std::string& args) {
    std::string out;
    test::run_shell("DISPLAY=" + display_ + " xdotool " + args, &out);
    return out;
  }

  std::string log() const { return read_file(dir_ + "/ui.log"); }

  // Waits until the log has a line containing `what` after offset `from` of the log; returns the line.
  std::string wait_for(const std::string& what, size_t from = 0, int timeout_ms = 20000) {
    for (int t = 0; t < timeout_ms; t += 50) {
      const std::string l = log();
      const size_t at = l.find(what, std::min(from, l.size()));
      if (at != std::string::npos) {
        const size_t bol = l.rfind('\n', at), eol = l.find('\n', at);
        return l.substr(bol == std::string::npos ? 0 : bol + 1, eol - (bol == std::string::npos ? 0 : bol + 1));
      }
      sleep_ms(50);
    }
    ADD_FAILURE() << "no '" << what << "' in the UI log within " << timeout_ms << " ms; log:\n" << log();
    return "";
  }

  // The last "place KIND NAME x0 y0 x1 y1" line of the log.
  Rect place(const std::string& kind_name) {
    const std::string l = log(), key = "place " + kind_name + " ";
    const size_t at = l.rfind(key);
    Rect r;
    if (at == std::string::npos) {
      ADD_FAILURE() << "the window never logged where '" << kind_name << "' is";
      return r;
    }
    std::sscanf(l.c_str() + at + key.size(), "%d %d %d %d", &r.x0, &r.y0, &r.x1, &r.y1);
    return r;
  }

  // After each step: a few frames later, the screen as PNG and the window's layout audit clean.
  void step(const std::string& name) {
    sleep_ms(400);
    char png[64];
    std::snprintf(png, sizeof png, "/%02d-%s.png", ++steps_, name.c_str());
    std::string why;
    EXPECT_TRUE(framebuffer_png(dir_ + "/fb/Xvfb_screen0", dir_ + png, &why)) << why;
    const std::string l = log();
    const size_t at = l.rfind("audit ");
    ASSERT_NE(at, std::string::npos) << "the window logged no layout audit";
    EXPECT_EQ(l.compare(at, 11, "audit clean"), 0) << "after step " << name << ":\n" << l.substr(at);
  }

  // A key held for a few frames: Dear ImGui 1.86 reads key state once a frame, so a press and release
  // inside one frame would be lost (clicks are latched by its GLFW backend, keys are not).
  void key(const std::string& k) {
    x("keydown --clearmodifiers " + k);
    sleep_ms(150);
    x("keyup " + k);
    sleep_ms(100);
  }

  void click(int cx, int cy) { x("mousemove --window " + wid_ + " " + std::to_string(cx) + " " + std::to_string(cy) + " click 1"); }

  std::string dir_, display_, wid_;
  pid_t xvfb_ = -1, app_ = -1;
  int steps_ = 0;
  int lock_ = -1;
};

TEST_F(Driven, EveryInputAUserGivesTheWindow) {
  app_ = spawn("cd '" + dir_ + "' && DISPLAY=" + display_ + " XDG_CONFIG_HOME='" + dir_ + "/config' exec " +
               std::string(KL_BINARY) + " --backend " + test::window_backend() + " --size 1920x1080 --ui-log '" + dir_ + "/ui.log' > '" + dir_ +
               "/app.out' 2>&1");
  wait_for("panel vector-add");
  wait_for("size ");
  wid_ = x("search --sync --name 'Kernel Ladder'");
  while (!wid_.empty() && (wid_.back() == '\n' || wid_.back() == ' ')) wid_.pop_back();
  ASSERT_FALSE(wid_.empty()) << "no X window named Kernel Ladder";
  if (wid_.find('\n') != std::string::npos) wid_ = wid_.substr(wid_.rfind('\n') + 1);
  x("windowfocus --sync " + wid_);
  step("start");

  // Collapse the source pane (its box in the sidebar): the view gets the panel's whole width.
  {
    const size_t from = log().size();
    const Rect r = place("checkbox source");
    click(r.x0 + 10, r.cy());
    wait_for("source hidden", from);
    step("source-hidden");
  }

  // Every sidebar entry, then back to the first.
  for (const char* id : {"relu-dropout", "softmax", "attention", "flash-attention", "measure", "vector-add"}) {
    const size_t from = log().size();
    const Rect r = place(std::string("sidebar ") + id);
    click(r.cx(), r.cy());
    wait_for(std::string("panel ") + id, from);
    step(std::string("panel-") + id);
  }

  // Drag the block_size slider to the right: the value changes, old and new logged.
  {
    const size_t from = log().size();
    const Rect r = place("control vector-add block_size");
    x("mousemove --window " + wid_ + " " + std::to_string(r.x0 + 20) + " " + std::to_string(r.cy()) + " mousedown 1");
    for (int dx = 40; dx <= 200; dx += 40)
      x("mousemove --window " + wid_ + " " + std::to_string(r.x0 + 20 + dx) + " " + std::to_string(r.cy())), sleep_ms(50);
    x("mouseup 1");
    const std::string line = wait_for("param vector-add block_size ", from);
    EXPECT_NE(line.find(" -> "), std::string::npos) << line;
    step("drag-block_size");
  }

  // Type a value into n and press Enter.
  {
    const size_t from = log().size();
    const Rect r = place("control vector-add n");
    click(r.x0 + 30, r.cy());
    key("ctrl+a");
    x("type --delay 30 5000");
    key("Return");
    const std::string line = wait_for("param vector-add n ", from);
    EXPECT_NE(line.find("-> 5000"), std::string::npos) << line;
    step("type-n-5000");
  }

  // An out-of-range value: refused, and the refusal is shown under the control.
  {
    const size_t from = log().size();
    const Rect r = place("control vector-add n");
    click(r.x0 + 30, r.cy());
    key("ctrl+a");
    x("type --delay 30 0");
    key("Return");
    const std::string line = wait_for("refused vector-add n: ", from);
    EXPECT_NE(line.find("n=0"), std::string::npos) << line;  // the value and the allowed range, one line
    EXPECT_NE(line.find("[1, "), std::string::npos) << line;
    const std::string shown = wait_for("place message vector-add ", from);
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    const size_t nums = shown.find_last_of("abcdefghijklmnopqrstuvwxyz)]");
    ASSERT_EQ(std::sscanf(shown.c_str() + nums + 1, "%d %d %d %d", &x0, &y0, &x1, &y1), 4) << shown;
    EXPECT_GE(y0, r.y1) << "the refusal is not under the control: " << shown;
    EXPECT_EQ(log().find("param vector-add n ", from), std::string::npos) << "a refused value was applied";
    step("refused-n-0");
  }

  // Hover a heatmap cell.
  {
    const size_t from = log().size();
    const Rect r = place("heatmap programs");
    x("mousemove --window " + wid_ + " " + std::to_string(r.cx()) + " " + std::to_string(r.cy()));
    const std::string line = wait_for("hover heatmap programs col ", from);
    EXPECT_NE(line.find(" row "), std::string::npos) << line;
    step("hover-heatmap");
  }

  // F12: a PNG, and the status bar says where it went.
  {
    const size_t from = log().size();
    x("mousemove --window " + wid_ + " 5 5");
    key("F12");
    const std::string line = wait_for("screenshot /", from);
    const std::string file = line.substr(std::string("screenshot ").size());
    EXPECT_TRUE(exists(file)) << file;
    EXPECT_NE(wait_for("status screenshot saved to " + file, from), "");
    step("f12");
  }

  // Ctrl+= scales the UI up live (the fonts are rasterised again between frames), Ctrl+0 goes back.
  {
    size_t from = log().size();
    key("ctrl+equal");
    wait_for("scale 1.25", from);
    step("ctrl-equal-scale-1.25");
    from = log().size();
    key("ctrl+0");
    wait_for("scale 1.00", from);
    step("ctrl-0-scale-1");
  }

  // Resize to 1280x720 and back.
  {
    size_t from = log().size();
    x("windowsize " + wid_ + " 1280 720");
    wait_for("size 1280x720", from);
    step("size-1280x720");
    from = log().size();
    x("windowsize " + wid_ + " 1920 1080");
    wait_for("size 1920x1080", from);
    step("size-1920x1080");
  }

  // Ctrl+Q closes the window; the app exits 0 with no GL error.
  key("ctrl+q");
  int status = -1;
  for (int t = 0; t < 200 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
  app_ = -1;
  ASSERT_TRUE(WIFEXITED(status)) << read_file(dir_ + "/app.out");
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(dir_ + "/app.out");
  EXPECT_NE(read_file(dir_ + "/app.out").find(", 0 GL errors"), std::string::npos) << read_file(dir_ + "/app.out");
}

// The source pane as an editor, in the product binary (the edited kernel compiled for real, in the worker:
// the host compiler on the CPU backend, NVRTC on CUDA): Edit clicked, a line typed at the top of the
// source, Ctrl+Enter pressed once, the compiler's error shown on line 1; Ctrl+Enter in a panel's input
// compiles nothing; the edit is in the settings file after Ctrl+Q and is back on the next start.
TEST_F(Driven, EditorTypedIntoAndCtrlEnterOnce) {
  const std::string start = "cd '" + dir_ + "' && DISPLAY=" + display_ + " XDG_CONFIG_HOME='" + dir_ + "/config' exec " +
                            std::string(KL_BINARY) + " --backend " + test::window_backend() +
                            " --size 1920x1080 --panel vector-add --ui-log '" + dir_ + "/ui.log'";
  app_ = spawn(start + " > '" + dir_ + "/app.out' 2>&1");
  wait_for("panel vector-add");
  wait_for("size ");
  wid_ = x("search --sync --name 'Kernel Ladder'");
  while (!wid_.empty() && (wid_.back() == '\n' || wid_.back() == ' ')) wid_.pop_back();
  ASSERT_FALSE(wid_.empty()) << "no X window named Kernel Ladder";
  if (wid_.find('\n') != std::string::npos) wid_ = wid_.substr(wid_.rfind('\n') + 1);
  x("windowfocus --sync " + wid_);
  step("editor-start");

  {
    const size_t from = log().size();
    const Rect r = place("button edit vector-add");
    click(r.cx(), r.cy());
    wait_for("editor open vector-add", from);
    step("editor-open");
  }
  {
    const size_t from = log().size();
    wait_for("place editor vector-add ");
    const Rect r = place("editor vector-add");
    click(r.x0 + (r.x1 - r.x0) / 2, r.y0 + 40);
    key("ctrl+Home");
    x("type --delay 30 'int typo = undefined_name;'");
    key("Return");
    const std::string line = wait_for("editor edited vector-add +1 -0", from);
    EXPECT_NE(line, "");
    key("Escape");  // not a revert of everything typed (Dear ImGui's text field alone would)
    sleep_ms(300);
    EXPECT_EQ(log().find("editor edited vector-add +0 -0", from), std::string::npos) << log().substr(from);
    step("editor-typed");
  }
  {
    const size_t from = log().size();
    key("ctrl+Return");
    const std::string run = wait_for("editor run vector-add: ", from);
    EXPECT_NE(run.find("compile errors, "), std::string::npos) << run;
    const std::string diag = wait_for("editor diagnostic vector-add ", from);
    EXPECT_NE(diag.find("vector-add 1:"), std::string::npos) << diag;  // the typed line, named by the compiler
    EXPECT_NE(diag.find("undefined_name"), std::string::npos) << diag;
    EXPECT_NE(wait_for("editor status vector-add ", from).find("compile error"), std::string::npos);
    step("editor-ctrl-enter");
  }
  {
    // Ctrl+F, a word, Enter: the next match, scrolled into view.
    const size_t from = log().size();
    key("ctrl+f");
    x("type --delay 30 'pid'");
    key("Return");
    const std::string line = wait_for("editor find 'pid' 2 of ", from);
    EXPECT_NE(line, "");
    step("editor-find");
    key("Escape");
  }
  {
    // Ctrl+Enter while typing into a panel's input: no compile.
    const size_t from = log().size();
    const Rect r = place("control vector-add n");
    click(r.x0 + 30, r.cy());
    key("ctrl+Return");
    sleep_ms(600);
    EXPECT_EQ(log().find("editor run ", from), std::string::npos) << log().substr(from);
    step("editor-ctrl-enter-elsewhere");
  }
  // What the edit ended as (on a loaded machine the X server can repeat a key, so the count of lines is
  // read from the log rather than assumed): the next start must bring back exactly that.
  const std::string so_far = log();
  const size_t cut = so_far.rfind("editor edited vector-add ");
  ASSERT_NE(cut, std::string::npos) << so_far;
  const std::string last_edit = so_far.substr(cut, so_far.find('\n', cut) - cut);
  key("ctrl+q");
  int status = -1;
  for (int t = 0; t < 200 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
  app_ = -1;
  ASSERT_TRUE(WIFEXITED(status)) << read_file(dir_ + "/app.out");
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(dir_ + "/app.out");
  const std::string ini = read_file(dir_ + "/config/kernel-ladder/imgui.ini");
  EXPECT_NE(ini.find("\neditor=1\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("\nedit.vector-add=int typo = undefined_name;\\n"), std::string::npos) << ini;

  // The next start: the edit is back, in the editor.
  const size_t from = log().size();
  app_ = spawn(start + " --frames 20 > '" + dir_ + "/app2.out' 2>&1");
  for (int t = 0; t < 400 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
  app_ = -1;
  EXPECT_NE(wait_for(last_edit, from), "") << "expected the edit as it was saved: " << last_edit;
}

}  // namespace
}  // namespace kl
