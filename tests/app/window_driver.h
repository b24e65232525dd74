// The real window under Xvfb, driven by X input events (xdotool, through XTEST) as a user drives it: the
// fixture the driven window tests share (test_window_driven.cpp, test_window_live.cpp). It starts an
// Xvfb of a given screen size with its framebuffer in a file (-fbdir, XWD format), launches the app with
// a fresh settings folder and --ui-log, and reads the app's state from that log: the events it logs and
// where its widgets are ("place KIND NAME x0 y0 x1 y1"), with the window's own layout audit. Keys are
// held for 150 ms (Dear ImGui 1.86 reads key state once a frame: a press and release inside one frame
// would be lost). One test at a time (a lock file): the tests pick displays from the same range.
// Skips only where Xvfb or xdotool is not installed (./ladder.sh installs both).
#pragma once
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
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "viz/png.h"

namespace kl::test {

inline bool have(const char* tool) { return run_shell(std::string("command -v ") + tool, nullptr) == 0; }
inline bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}
inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline uint32_t be32(const std::string& b, size_t at) {
  return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) | (uint32_t(uint8_t(b[at + 2])) << 8) |
         uint32_t(uint8_t(b[at + 3]));
}

// Xvfb's screen as XWD: a big-endian header (its size at 0, width and height at 16 and 20, bytes per
// line at 48, colour count at 76), the window name, 12 bytes per colour, then BGRX pixels.
inline bool framebuffer_rgba(const std::string& xwd, std::vector<uint8_t>& rgba, int& width, int& height,
                             std::string* why) {
  const std::string b = read_file(xwd);
  if (b.size() < 100) return *why = "framebuffer file too short: " + xwd, false;
  const uint32_t header = be32(b, 0), w = be32(b, 16), h = be32(b, 20), bpl = be32(b, 48), ncolors = be32(b, 76);
  const size_t start = size_t(header) + size_t(ncolors) * 12;
  if (w == 0 || h == 0 || bpl < w * 4 || b.size() < start + size_t(bpl) * h) return *why = "unexpected XWD layout", false;
  rgba.assign(size_t(w) * h * 4, 0);
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) {
      const uint8_t* p = reinterpret_cast<const uint8_t*>(b.data()) + start + size_t(y) * bpl + size_t(x) * 4;
      uint8_t* q = &rgba[(size_t(y) * w + x) * 4];
      q[0] = p[2], q[1] = p[1], q[2] = p[0], q[3] = 255;
    }
  width = int(w), height = int(h);
  return true;
}

inline bool framebuffer_png(const std::string& xwd, const std::string& png, std::string* why) {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  if (!framebuffer_rgba(xwd, rgba, w, h, why)) return false;
  viz::write_png(png, rgba, w, h);
  return true;
}

struct Rect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int cx() const { return (x0 + x1) / 2; }
  int cy() const { return (y0 + y1) / 2; }
  int w() const { return x1 - x0; }
  int h() const { return y1 - y0; }
};

class Driven : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have("Xvfb")) GTEST_SKIP() << "Xvfb is not installed (./ladder.sh installs it)";
    if (!have("xdotool")) GTEST_SKIP() << "xdotool is not installed (./ladder.sh installs it)";
    lock_ = ::open((tmp_dir() + "/window-driven.lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock_ >= 0) ::flock(lock_, LOCK_EX);
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = tmp_dir() + "/window-driven" + (name.rfind("Editor", 0) == 0 ? "-editor" : "-" + name);
    run_shell("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "/fb' '" + dir_ + "/config'", nullptr);
    start_x("1920x1080");
  }

  void TearDown() override {
    stop_app();
    stop_x();
    if (lock_ >= 0) ::close(lock_);  // lets the next test go
  }

  // An Xvfb of `screen` ("1280x720") on the first of :45..:49 with no server, replacing any started before.
  void start_x(const std::string& screen) {
    stop_x();
    display_.clear();
    for (int n = 45; n <= 49 && display_.empty(); ++n)
      if (!exists("/tmp/.X11-unix/X" + std::to_string(n)) && !exists("/tmp/.X" + std::to_string(n) + "-lock"))
        display_ = ":" + std::to_string(n);
    ASSERT_FALSE(display_.empty()) << "displays :45 to :49 are all taken";
    xvfb_ = spawn("exec Xvfb " + display_ + " -screen 0 " + screen + "x24 -fbdir '" + dir_ + "/fb' -nolisten tcp");
    const std::string sock = "/tmp/.X11-unix/X" + display_.substr(1);
    for (int i = 0; i < 100 && !exists(sock); ++i) sleep_ms(100);
    ASSERT_TRUE(exists(sock)) << "Xvfb did not start on " << display_;
  }
  void stop_x() {
    if (xvfb_ > 0) kill(xvfb_, SIGTERM), waitpid(xvfb_, nullptr, 0);
    xvfb_ = -1;
    for (int i = 0; i < 50 && !display_.empty() && exists("/tmp/.X11-unix/X" + display_.substr(1)); ++i) sleep_ms(50);
  }
  void stop_app() {
    if (app_ > 0) kill(app_, SIGKILL), waitpid(app_, nullptr, 0);
    app_ = -1;
  }

  pid_t spawn(const std::string& cmd) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }

  // The app (KL_BINARY unless `binary`, on KL_TEST_BACKEND's backend unless `backend`) in the test's folder
  // with its own settings folder and the UI log; waits for its first panel and size and gives its window the
  // keyboard.
  void launch(const std::string& args, const std::string& binary = KL_BINARY, const std::string& out = "app.out",
              const std::string& backend = window_backend()) {
    const size_t from = log().size();
    app_ = spawn("cd '" + dir_ + "' && DISPLAY=" + display_ + " XDG_CONFIG_HOME='" + dir_ + "/config' exec " + binary +
                 " --backend " + backend + " " + args + " --ui-log '" + dir_ + "/ui.log' > '" + dir_ + "/" +
                 out + "' 2>&1");
    wait_for("panel ", from);
    wait_for("\nsize ", from);
    wid_ = x("search --sync --name 'Kernel Ladder'");
    while (!wid_.empty() && (wid_.back() == '\n' || wid_.back() == ' ')) wid_.pop_back();
    ASSERT_FALSE(wid_.empty()) << "no X window named Kernel Ladder";
    if (wid_.find('\n') != std::string::npos) wid_ = wid_.substr(wid_.rfind('\n') + 1);
    x("windowfocus --sync " + wid_);
  }

  // Ctrl+Q; the exit status (-1: it did not exit within 10 s).
  int quit() {
    key("ctrl+q");
    int status = -1;
    for (int t = 0; t < 200 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
    app_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string x(const std::string& args) {
    std::string out;
    run_shell("DISPLAY=" + display_ + " xdotool " + args, &out);
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

  // Where "KIND NAME" is once it has stopped moving: the same logged place for 400 ms (a popup or a panel
  // settles over its first frames, later on a loaded machine), within `timeout_ms`. An empty rectangle (a tab
  // bar logs its tabs at 0 0 0 0 in its first frame) is not a place yet.
  Rect settled_place(const std::string& kind_name, int timeout_ms = 10000) {
    Rect last = place(kind_name);
    for (int t = 0, still = 0; t < timeout_ms && still < 400; t += 100) {
      sleep_ms(100);
      const Rect r = place(kind_name);
      const bool same = r.x0 == last.x0 && r.y0 == last.y0 && r.x1 == last.x1 && r.y1 == last.y1;
      still = same && r.x1 > r.x0 && r.y1 > r.y0 ? still + 100 : 0;
      last = r;
    }
    return last;
  }

  // Every widget the log placed, at its last place ("KIND NAME" -> rectangle).
  std::map<std::string, Rect> places() {
    std::map<std::string, Rect> m;
    std::istringstream in(log());
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("place ", 0) != 0) continue;
      // The name may hold spaces: the rectangle is the last four numbers.
      size_t end = line.size();
      for (int k = 0; k < 4 && end != std::string::npos; ++k) end = line.rfind(' ', end - 1);
      if (end == std::string::npos || end <= 6) continue;
      Rect r;
      if (std::sscanf(line.c_str() + end, "%d %d %d %d", &r.x0, &r.y0, &r.x1, &r.y1) == 4) m[line.substr(6, end - 6)] = r;
    }
    return m;
  }

  // The screen as Xvfb holds it now.
  bool screen(std::vector<uint8_t>& rgba, int& w, int& h) {
    std::string why;
    const bool ok = framebuffer_rgba(dir_ + "/fb/Xvfb_screen0", rgba, w, h, &why);
    EXPECT_TRUE(ok) << why;
    return ok;
  }

  // After each step: a few frames later, the screen as PNG and the window's layout audit clean.
  void step(const std::string& name) {
    sleep_ms(400);
    char png[96];
    std::snprintf(png, sizeof png, "/%02d-%s.png", ++steps_, name.c_str());
    std::string why;
    EXPECT_TRUE(framebuffer_png(dir_ + "/fb/Xvfb_screen0", dir_ + png, &why)) << why;
    const std::string l = log();
    const size_t at = l.rfind("audit ");
    ASSERT_NE(at, std::string::npos) << "the window logged no layout audit";
    EXPECT_EQ(l.compare(at, 11, "audit clean"), 0) << "after step " << name << ":\n" << l.substr(at);
  }

  // A key held for a few frames (clicks are latched by Dear ImGui's GLFW backend, keys are not).
  void key(const std::string& k) {
    x("keydown --clearmodifiers " + k);
    sleep_ms(150);
    x("keyup " + k);
    sleep_ms(100);
  }

  void click(int cx, int cy) { x("mousemove --window " + wid_ + " " + std::to_string(cx) + " " + std::to_string(cy) + " click 1"); }
  void move(int cx, int cy) { x("mousemove --window " + wid_ + " " + std::to_string(cx) + " " + std::to_string(cy)); }

  // The app's CPU time so far (user + system, in clock ticks), from /proc/PID/stat.
  long cpu_ticks() const {
    const std::string s = read_file("/proc/" + std::to_string(app_) + "/stat");
    const size_t close = s.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream in(s.substr(close + 2));
    std::string f;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> f; ++i) {  // fields 14 and 15 (1-based) after "pid (comm)"
      if (i == 14) utime = std::atol(f.c_str());
      if (i == 15) stime = std::atol(f.c_str());
    }
    return utime + stime;
  }

  std::string dir_, display_, wid_;
  pid_t xvfb_ = -1, app_ = -1;
  int steps_ = 0;
  int lock_ = -1;
};

}  // namespace kl::test
