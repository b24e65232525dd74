// The interactive render host: a GLFW 3.3 window with a GL 3.3 core context and ImGui's GLFW and
// OpenGL3 backends. Frame order (the ImGui example's): poll -> new frame -> caller's UI -> render -> swap.
// With no display it returns nullptr and one line saying why. Losing the display (X server gone) ends
// the loop cleanly: begin_frame() returns false instead of Xlib exiting the process.
#include <epoxy/gl.h>
// epoxy must come first: GLFW must not pull in the system GL header.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <dlfcn.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/runtime/startup_trace.h"
#include "viz/gl_check.h"
#include "viz/host_common.h"
#include "viz/render_host.h"
#include "viz/window_icon.h"

extern "C" void* glfwGetX11Display(void);  // exported by Debian's X11 build of GLFW 3.3

namespace kl::viz {
namespace {

// [SECTION] Errors: GLFW's callback and the X connection ---------------------------------------------
std::mutex g_error_mutex;
std::string g_last_glfw_error;
std::atomic<int> g_glfw_errors{0};
std::atomic<bool> g_display_lost{false};

void glfw_error_callback(int code, const char* description) {
  ++g_glfw_errors;
  std::lock_guard<std::mutex> lock(g_error_mutex);
  char buf[32];
  snprintf(buf, sizeof(buf), "GLFW error 0x%05X: ", unsigned(code));
  g_last_glfw_error = std::string(buf) + (description ? description : "");
}

std::string last_glfw_error() {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  return g_last_glfw_error;
}

// Xlib's default I/O error handler prints "X connection to :0 broken" and calls exit(). Since libX11
// 1.7 a process-wide I/O error handler that returns, followed by a per-display exit handler that
// returns, leaves the Display marked dead (later calls on it are no-ops), so the frame loop can
// notice and stop. Looked up at run time: no link or header dependency on Xlib.
using XIOHandler = int (*)(void*);
XIOHandler g_previous_io_handler = nullptr;
bool g_io_handler_installed = false;

int x_io_error_handler(void* /*display*/) {
  if (!g_display_lost.exchange(true)) fprintf(stderr, "kernel-ladder: the X display went away; closing\n");
  return 0;
}
void x_io_exit_handler(void* /*display*/, void* /*user*/) { g_display_lost = true; }

void install_x_io_handlers() {
  using SetIOHandler = XIOHandler (*)(XIOHandler);
  using SetExitHandler = void (*)(void*, void (*)(void*, void*), void*);
  auto set_io = reinterpret_cast<SetIOHandler>(dlsym(RTLD_DEFAULT, "XSetIOErrorHandler"));
  auto set_exit = reinterpret_cast<SetExitHandler>(dlsym(RTLD_DEFAULT, "XSetIOErrorExitHandler"));
  void* display = glfwGetX11Display();
  if (!set_io || !set_exit || !display) return;  // Wayland, or an Xlib older than 1.7: Xlib's default
  set_exit(display, &x_io_exit_handler, nullptr);
  g_previous_io_handler = set_io(&x_io_error_handler);
  g_io_handler_installed = true;
}

void restore_x_io_handler() {
  if (!g_io_handler_installed) return;
  using SetIOHandler = XIOHandler (*)(XIOHandler);
  auto set_io = reinterpret_cast<SetIOHandler>(dlsym(RTLD_DEFAULT, "XSetIOErrorHandler"));
  if (set_io) set_io(g_previous_io_handler);
  g_io_handler_installed = false;
}

// [SECTION] Input events: any of them wakes an idle window --------------------------------------------
// Installed before Dear ImGui's GLFW backend, which calls them after its own (it chains the callbacks it
// finds); the cursor, size and refresh callbacks are not the backend's at all.
std::atomic<bool> g_input{false};
std::vector<int> g_pressed;  // keys pressed while events were read for the coming frame
void on_cursor(GLFWwindow*, double, double) { g_input = true; }
void on_button(GLFWwindow*, int, int, int) { g_input = true; }
void on_scroll(GLFWwindow*, double, double) { g_input = true; }
std::vector<int> g_released;
void on_key(GLFWwindow*, int key, int, int action, int) {
  g_input = true;
  if (key < 0 || key >= 512) return;
  if (action == GLFW_PRESS) g_pressed.push_back(key);
  if (action == GLFW_RELEASE) g_released.push_back(key);
}
void on_char(GLFWwindow*, unsigned) { g_input = true; }
void on_focus(GLFWwindow*, int) { g_input = true; }
void on_enter(GLFWwindow*, int) { g_input = true; }
void on_size(GLFWwindow*, int, int) { g_input = true; }
void on_refresh(GLFWwindow*) { g_input = true; }
void on_scale(GLFWwindow*, float, float) { g_input = true; }

void watch_input(GLFWwindow* w) {
  glfwSetCursorPosCallback(w, on_cursor);
  glfwSetMouseButtonCallback(w, on_button);
  glfwSetScrollCallback(w, on_scroll);
  glfwSetKeyCallback(w, on_key);
  glfwSetCharCallback(w, on_char);
  glfwSetWindowFocusCallback(w, on_focus);
  glfwSetCursorEnterCallback(w, on_enter);
  glfwSetFramebufferSizeCallback(w, on_size);
  glfwSetWindowRefreshCallback(w, on_refresh);
  glfwSetWindowContentScaleCallback(w, on_scale);
}

// [SECTION] The host ----------------------------------------------------------------------------------
class WindowHost final : public RenderHost {
 public:
  ~WindowHost() override {
    detail::set_gl_context_live(false);
    if (g_display_lost) {
      // The connection is gone: GL and GLFW teardown would talk to a dead server. Drop ImGui only.
      if (imgui_glfw_) ImGui_ImplGlfw_Shutdown();
      if (imgui_context_) detail::destroy_imgui_context();
      return;
    }
    if (window_) glfwMakeContextCurrent(window_);
    if (imgui_gl_) ImGui_ImplOpenGL3_Shutdown();
    if (imgui_glfw_) ImGui_ImplGlfw_Shutdown();
    if (imgui_context_) detail::destroy_imgui_context();
    if (window_) glfwDestroyWindow(window_);
    if (glfw_) glfwTerminate();
    restore_x_io_handler();
  }

  bool init(const HostOptions& o, std::string* error) {
    const char* x = std::getenv("DISPLAY");
    const char* wl = std::getenv("WAYLAND_DISPLAY");
    if ((!x || !*x) && (!wl || !*wl)) {
      *error = "no display: DISPLAY and WAYLAND_DISPLAY are unset";
      return false;
    }
    g_display_lost = false;
    glfwSetErrorCallback(glfw_error_callback);
    bool inited = false;
    {
      startup::Step step("GLFW initialised (the display connection)");
      inited = glfwInit();
    }
    if (!inited) {
      *error = "no display: glfwInit failed (" + last_glfw_error() + ")";
      return false;
    }
    glfw_ = true;
    install_x_io_handlers();
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    // Never larger than the monitor's work area (the desktop minus panels and docks); no size given
    // (the first launch): all of it, maximised where a window manager can, so that the views and the
    // source pane both have room at any monitor size and scale.
    int ww = o.width, wh = o.height;
    const bool fill = ww <= 0 || wh <= 0;
    if (work_area(&wx_, &wy_, &ww_, &wh_)) {
      if (fill) ww = ww_, wh = wh_;
      ww = std::min(ww, ww_), wh = std::min(wh, wh_);
    } else if (fill) {
      ww = 1400, wh = 900;
    }
    // A given size is in the monitor's logical units (scaled on a HiDPI desktop); the work area is not.
    glfwWindowHint(GLFW_SCALE_TO_MONITOR, fill ? GLFW_FALSE : GLFW_TRUE);
    {
      startup::Step step("GLFW window and GL 3.3 core context");
      window_ = glfwCreateWindow(ww, wh, o.title.c_str(), nullptr, nullptr);
    }
    if (!window_) {
      *error = "could not open a GL 3.3 core window (" + last_glfw_error() + ")";
      return false;
    }
    if (fill && ww_ > 0) {
      glfwSetWindowPos(window_, wx_, wy_);
      glfwMaximizeWindow(window_);
    }
    set_window_icon(window_);
    glfwMakeContextCurrent(window_);
    detail::set_gl_context_live(true);
    glfwSwapInterval(o.vsync ? 1 : 0);
    try {
      detail::create_imgui_context(o.ini_path);
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
    imgui_context_ = true;
    watch_input(window_);  // before the backend, which chains to these
    if (!ImGui_ImplGlfw_InitForOpenGL(window_, true)) {
      *error = "ImGui's GLFW backend failed to initialise";
      return false;
    }
    imgui_glfw_ = true;
    ImGui::GetIO().ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;  // the GLFW backend maps the keys
    if (!ImGui_ImplOpenGL3_Init("#version 330 core")) {
      *error = "ImGui's OpenGL3 backend could not load GL (libGL.so.1)";
      return false;
    }
    imgui_gl_ = true;
    gl_check("window host: init");
    return true;
  }

  bool begin_frame() override {
    if (g_display_lost || glfwWindowShouldClose(window_)) return false;
    wait_for_input();
    if (g_display_lost || glfwWindowShouldClose(window_)) return false;
    // A minimised window has a 0x0 framebuffer: wait instead of drawing nothing at full speed.
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(window_, &fw, &fh);
    while ((fw == 0 || fh == 0) && !glfwWindowShouldClose(window_) && !g_display_lost) {
      glfwWaitEventsTimeout(0.1);
      glfwGetFramebufferSize(window_, &fw, &fh);
    }
    if (g_display_lost || glfwWindowShouldClose(window_)) return false;
    detail::apply_pending_ui_scale(true);
    startup::Step step("first frame begun: ImGui's GL objects, the font atlas rasterised and uploaded", frames_ == 0);
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    in_frame_ = true;
    return true;
  }

  void end_frame() override {
    if (!in_frame_) return;
    in_frame_ = false;
    ImGui::Render();
    if (g_display_lost) return;
    draw_last_frame();
    gl_check("window host: end_frame");
    glfwSwapBuffers(window_);
    if (frames_++ == 0) startup::mark("first frame drawn: the panels' work (kernels, textures) and the GL draw");
  }

  // The frame shown: its draw data (ImGui's until the next frame starts) drawn again into the back
  // buffer and read from there before any swap. The front buffer of a swapped window cannot be read on
  // every driver (Mesa's llvmpipe under Xvfb gives zeros), so the first screenshot would be blank.
  bool read_pixels(std::vector<uint8_t>& rgba, int& width, int& height) override {
    if (g_display_lost || !ImGui::GetCurrentContext()) return false;
    ImDrawData* dd = ImGui::GetDrawData();
    if (!dd || !dd->Valid) return false;
    draw_last_frame();
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(window_, &fw, &fh);
    if (fw <= 0 || fh <= 0) return false;
    std::vector<uint8_t> flipped(size_t(fw) * size_t(fh) * 4);
    glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, fw, fh, GL_RGBA, GL_UNSIGNED_BYTE, flipped.data());
    if (!gl_check("window host: read back")) return false;
    width = fw;
    height = fh;
    const size_t row = size_t(width) * 4;
    rgba.resize(row * size_t(height));
    for (int y = 0; y < height; ++y)
      std::copy_n(&flipped[size_t(height - 1 - y) * row], row, &rgba[size_t(y) * row]);
    return true;
  }

  void wait_before_next_frame(double seconds) override { wait_ = seconds; }

  int width() const override {
    int w = 0, h = 0;
    if (!g_display_lost) glfwGetFramebufferSize(window_, &w, &h);
    return w;
  }
  int height() const override {
    int w = 0, h = 0;
    if (!g_display_lost) glfwGetFramebufferSize(window_, &w, &h);
    return h;
  }
  std::string kind() const override { return "window (GLFW)"; }

  bool geometry(int* x, int* y, int* w, int* h) const override {
    if (g_display_lost) return false;
    glfwGetWindowPos(window_, x, y);
    glfwGetWindowSize(window_, w, h);
    return true;
  }
  void set_geometry(int x, int y, int w, int h) override {
    if (g_display_lost || w <= 0 || h <= 0) return;
    if (ww_ > 0 && wh_ > 0) {
      w = std::min(w, ww_), h = std::min(h, wh_);
      x = std::clamp(x, wx_, wx_ + ww_ - w), y = std::clamp(y, wy_, wy_ + wh_ - h);
    }
    glfwSetWindowPos(window_, x, y);
    glfwSetWindowSize(window_, w, h);
  }
  void request_close() override {
    if (!g_display_lost) glfwSetWindowShouldClose(window_, GLFW_TRUE);
  }
  float content_scale() const override {
    float sx = 1, sy = 1;
    if (!g_display_lost) glfwGetWindowContentScale(window_, &sx, &sy);
    return std::isfinite(sx) && sx > 0 ? sx : 1.0f;
  }

 private:
  // Polls while something animates or for a few frames after input; else sleeps in the X event wait
  // until input comes or the frame asked for is due. Idle, the window draws nothing.
  void wait_for_input() {
    constexpr int kSettleFrames = 3;  // a click or key changes what the next frames draw (hover, popups)
    release_latched_keys();
    g_pressed.clear();
    g_released.clear();
    for (;;) {
      if (settle_ > 0 || wait_ == 0) {
        glfwPollEvents();
        break;
      }
      // Without a limit it still wakes once a second to notice a lost display, and sleeps again.
      glfwWaitEventsTimeout(wait_ < 0 ? 1.0 : wait_);
      if (g_display_lost || glfwWindowShouldClose(window_) || g_input || wait_ > 0) break;
    }
    if (g_input.exchange(false)) settle_ = kSettleFrames;
    else if (settle_ > 0) --settle_;
    latch_quick_keys();
  }

  // Dear ImGui 1.86 sees a key only as down or up at each frame's start: a key pressed and released
  // while one frame was being drawn (a slow frame, a quick tap) would be lost, as its GLFW backend
  // already avoids for mouse clicks. Such a key, and any key let go beside a press (the Ctrl of a
  // Ctrl+Q), is held down for the coming frame and let go before the next one reads events.
  void latch_quick_keys() {
    ImGuiIO& io = ImGui::GetIO();
    for (int k : g_pressed) {
      if (!io.KeysDown[k]) io.KeysDown[k] = true, latched_.push_back(k);
      // A press the last frame did not see end (released and pressed again in between): the coming
      // frame starts its duration again, so that it reads as a press.
      io.KeysDownDuration[k] = -1.0f;
    }
    // A chord (Ctrl+Q) whose modifier was let go in the same batch: the modifier stays down with it.
    if (!g_pressed.empty())
      for (int k : g_released)
        if (!io.KeysDown[k]) io.KeysDown[k] = true, latched_.push_back(k);
    if (!latched_.empty()) update_modifiers();
  }
  void release_latched_keys() {
    if (latched_.empty()) return;
    for (int k : latched_) ImGui::GetIO().KeysDown[k] = false;
    latched_.clear();
    update_modifiers();
  }
  static void update_modifiers() {
    ImGuiIO& io = ImGui::GetIO();
    io.KeyCtrl = io.KeysDown[GLFW_KEY_LEFT_CONTROL] || io.KeysDown[GLFW_KEY_RIGHT_CONTROL];
    io.KeyShift = io.KeysDown[GLFW_KEY_LEFT_SHIFT] || io.KeysDown[GLFW_KEY_RIGHT_SHIFT];
    io.KeyAlt = io.KeysDown[GLFW_KEY_LEFT_ALT] || io.KeysDown[GLFW_KEY_RIGHT_ALT];
    io.KeySuper = io.KeysDown[GLFW_KEY_LEFT_SUPER] || io.KeysDown[GLFW_KEY_RIGHT_SUPER];
  }

  void draw_last_frame() {
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(window_, &fw, &fh);
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    glViewport(0, 0, fw, fh);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x * 0.8f, bg.y * 0.8f, bg.z * 0.8f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  }

  static bool work_area(int* x, int* y, int* w, int* h) {
    GLFWmonitor* m = glfwGetPrimaryMonitor();
    if (!m) return false;
    glfwGetMonitorWorkarea(m, x, y, w, h);
    return *w > 0 && *h > 0;
  }
  int wx_ = 0, wy_ = 0, ww_ = 0, wh_ = 0;  // the work area (0: unknown)

  GLFWwindow* window_ = nullptr;
  bool glfw_ = false, imgui_context_ = false, imgui_glfw_ = false, imgui_gl_ = false;
  bool in_frame_ = false;
  int64_t frames_ = 0;  // frames swapped (the first one's steps are traced)
  double wait_ = 0;  // how long the next begin_frame() may wait for an event (0: not at all; < 0: no limit)
  int settle_ = 0;   // frames still drawn at once after an event (Dear ImGui needs a few to settle)
  std::vector<int> latched_;  // keys held down for one frame after a press and release within one
};

}  // namespace

std::unique_ptr<RenderHost> make_window_host(const HostOptions& o, std::string* error) {
  std::string local;
  if (!error) error = &local;
  if (ImGui::GetCurrentContext()) {
    *error = "a render host already exists in this process (one ImGui context at a time)";
    return nullptr;
  }
  auto host = std::make_unique<WindowHost>();
  if (!host->init(o, error)) return nullptr;
  return host;
}

}  // namespace kl::viz
