// viz/window_host.cpp: no display -> nullptr and one line; under Xvfb (Debian's xvfb) a GLFW window
// renders frames with no GL error and reads them back; when the X server goes away mid-run the loop
// ends cleanly (begin_frame() returns false) instead of Xlib exiting the process.
// Each Xvfb case runs in a forked child, so GLFW's process-wide state never leaks between cases.
#include <gtest/gtest.h>
#include <imgui.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "viz/gl_check.h"
#include "viz/render_host.h"

namespace kl {
namespace {

bool have_xvfb() { return std::system("command -v Xvfb >/dev/null 2>&1") == 0; }

// Starts Xvfb on a free display (-displayfd); returns its pid and sets DISPLAY, or -1.
pid_t start_xvfb() {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string fd = std::to_string(fds[1]);
    execlp("Xvfb", "Xvfb", "-displayfd", fd.c_str(), "-screen", "0", "1024x768x24", "-nolisten", "tcp",
           (char*)nullptr);
    _exit(127);
  }
  close(fds[1]);
  char buf[32] = {0};
  ssize_t n = 0, got = 0;
  while (got < ssize_t(sizeof(buf)) - 1 && (n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0) {
    got += n;
    if (buf[got - 1] == '\n') break;
  }
  close(fds[0]);
  if (got <= 0) return -1;
  setenv("DISPLAY", (":" + std::string(buf, strcspn(buf, "\n"))).c_str(), 1);
  return pid;
}

void stop(pid_t pid) {
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}

// Runs `body` in a child process; the child's exit code is the test's verdict (0 = pass), with its
// stderr shown on failure.
template <class F>
int in_child(F body) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void draw_ui(int frame) {
  ImGui::SetNextWindowPos(ImVec2(10, 10));
  ImGui::Begin("test window");
  ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0.9f, 0.4f, 0.1f, 1.0f));
  ImGui::Button("button", ImVec2(160, 60));
  ImGui::PopStyleColor();
  ImGui::Text("frame %d", frame);
  ImGui::End();
}

TEST(WindowHost, NoDisplayIsOneLineAndNull) {
  const int code = in_child([] {
    unsetenv("DISPLAY");
    unsetenv("WAYLAND_DISPLAY");
    std::string error;
    auto host = viz::make_window_host(viz::HostOptions{}, &error);
    if (host) return 1;
    if (error.find("no display") == std::string::npos || error.find('\n') != std::string::npos) {
      fprintf(stderr, "error: %s\n", error.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(WindowHost, RendersFramesUnderXvfb) {
  if (!have_xvfb()) GTEST_SKIP() << "Xvfb is not installed";
  const int code = in_child([] {
    const pid_t x = start_xvfb();
    if (x < 0) return 3;
    int rc = 0;
    {
      viz::HostOptions o;
      o.width = 640;
      o.height = 400;
      o.vsync = false;
      std::string error;
      auto host = viz::make_window_host(o, &error);
      if (!host) {
        fprintf(stderr, "make_window_host: %s\n", error.c_str());
        stop(x);
        return 4;
      }
      fprintf(stderr, "window GL_RENDERER: %s\n", host->gl_renderer().c_str());
      std::vector<uint8_t> rgba;
      int w = 0, h = 0;
      for (int f = 0; f < 60; ++f) {
        if (!host->begin_frame()) rc = rc ? rc : 5;
        draw_ui(f);
        host->end_frame();
        if (f == 50) host->read_pixels(rgba, w, h);  // asks for capture from here on
      }
      if (!host->read_pixels(rgba, w, h) || w != 640 || h != 400) rc = rc ? rc : 6;
      std::set<uint32_t> colours;
      for (size_t i = 0; i + 3 < rgba.size(); i += 4)
        colours.insert(uint32_t(rgba[i]) | uint32_t(rgba[i + 1]) << 8 | uint32_t(rgba[i + 2]) << 16);
      if (colours.size() < 5) rc = rc ? rc : 7;
      if (viz::gl_error_count() != 0) {
        fprintf(stderr, "GL error: %s\n", viz::gl_first_error().c_str());
        rc = rc ? rc : 8;
      }
    }
    stop(x);
    return rc;
  });
  EXPECT_EQ(code, 0);
}

TEST(WindowHost, LosingTheDisplayEndsTheLoopCleanly) {
  if (!have_xvfb()) GTEST_SKIP() << "Xvfb is not installed";
  const int code = in_child([] {
    const pid_t x = start_xvfb();
    if (x < 0) return 3;
    viz::HostOptions o;
    o.width = 320;
    o.height = 240;
    o.vsync = false;
    std::string error;
    auto host = viz::make_window_host(o, &error);
    if (!host) {
      stop(x);
      return 4;
    }
    for (int f = 0; f < 5; ++f) {
      host->begin_frame();
      draw_ui(f);
      host->end_frame();
    }
    stop(x);  // the X server goes away under the running loop
    int frames = 0;
    while (frames < 200 && host->begin_frame()) {
      draw_ui(frames);
      host->end_frame();
      ++frames;
    }
    if (frames >= 200) return 5;  // the loop never noticed
    host.reset();                 // and tearing down after the loss does not crash or exit
    return 0;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace kl
