// One interface for the two places a frame can be drawn: a GLFW window (interactive) and an EGL
// headless context rendering into an FBO (shots, tours, tests, the GPU machine). Panels never know
// which one draws them. Both own the Dear ImGui context, its GL3 backend and the embedded fonts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct ImFont;

namespace kl::viz {

struct HostOptions {
  int width = 1400;   // both 0 (a window): most of the monitor's work area (the first launch)
  int height = 900;
  std::string title = "Kernel Ladder";
  bool vsync = true;
  std::string ini_path;  // ImGui layout file; empty: none (headless always uses none)
};

class RenderHost {
 public:
  virtual ~RenderHost() = default;
  // Polls events and starts an ImGui frame. Returns false when the window was closed (or lost).
  virtual bool begin_frame() = 0;
  // Renders the ImGui frame into the framebuffer and presents it (window) or finishes it (headless).
  virtual void end_frame() = 0;
  // RGBA8 pixels of the last finished frame, top row first.
  virtual bool read_pixels(std::vector<uint8_t>& rgba, int& width, int& height) = 0;
  virtual int width() const = 0;
  virtual int height() const = 0;
  virtual std::string kind() const = 0;  // "window (GLFW)" / "headless (EGL device)"
  // The window's position and size in screen coordinates (false: no window, headless), moving and
  // resizing it (kept inside the monitor's work area), and the monitor's content scale (1 headless).
  virtual bool geometry(int* x, int* y, int* w, int* h) const {
    (void)x, (void)y, (void)w, (void)h;
    return false;
  }
  virtual void set_geometry(int x, int y, int w, int h) { (void)x, (void)y, (void)w, (void)h; }
  virtual float content_scale() const { return 1.0f; }
  virtual void request_close() {}  // the window: begin_frame() returns false from the next frame on
  // How long the next begin_frame() may wait for input before it starts a frame anyway: 0 not at all
  // (something animates), < 0 until input comes. A window draws a few frames after each input event
  // whatever this says; a headless host never waits.
  virtual void wait_before_next_frame(double seconds) { (void)seconds; }
  std::string gl_renderer() const;       // GL_RENDERER of the current context
};

// nullptr with *error set ("no display: DISPLAY and WAYLAND_DISPLAY are unset", GLFW's message, ...).
std::unique_ptr<RenderHost> make_window_host(const HostOptions& o, std::string* error);
// nullptr with *error set when no EGL device/display can give a GL 3.3 core context.
std::unique_ptr<RenderHost> make_headless_host(const HostOptions& o, std::string* error);

// The UI scale: fonts are rasterised at 16 px times it and the style's sizes are scaled by it. Set
// before a host is made, it applies from the first frame; set later, the host rebuilds the fonts
// between frames. Clamped to [kMinUiScale, kMaxUiScale] (callers refuse values outside first).
constexpr float kMinUiScale = 0.5f, kMaxUiScale = 4.0f;
void set_ui_scale(float scale);
float ui_scale();

// Fonts loaded by the hosts from the embedded DejaVu files.
ImFont* font_regular();
ImFont* font_mono();
ImFont* font_large();

}  // namespace kl::viz
