// The headless render host: an EGL context with no window system (no X server needed), ImGui drawn
// into an FBO of the asked size and read back top row first. Display choice, in order:
//   1. the EGL device platform (eglQueryDevicesEXT): NVIDIA's EGL on the GPU machine, Mesa's software
//      device elsewhere; hardware devices are tried before software ones;
//   2. Mesa's surfaceless platform;
//   3. eglGetDisplay(EGL_DEFAULT_DISPLAY).
// KL_EGL_DEVICE=N picks device N of the enumeration explicitly.
#include <epoxy/egl.h>
#include <epoxy/gl.h>
#include <imgui.h>
#include <backends/imgui_impl_opengl3.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/startup_trace.h"
#include "viz/gl_check.h"
#include "viz/host_common.h"
#include "viz/render_host.h"

namespace kl::viz {
namespace {

// [SECTION] EGL display and context --------------------------------------------------------------------
std::string egl_error_text(const char* call) {
  char buf[96];
  snprintf(buf, sizeof(buf), "%s failed (EGL error 0x%04X)", call, unsigned(eglGetError()));
  return buf;
}

bool has_ext(const char* list, const char* name) {
  if (!list) return false;
  const size_t n = strlen(name);
  for (const char* p = list; (p = strstr(p, name)); p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

struct EglContext {
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;
  EGLSurface surface = EGL_NO_SURFACE;  // a 16x16 pbuffer only where surfaceless is unsupported
  std::string how;                      // "EGL device 0", "Mesa surfaceless", ...
};

// Initialises `d` and makes a GL 3.3 core context current on it; false with *why on failure.
bool make_context(EGLDisplay d, EglContext* out, std::string* why) {
  EGLint major = 0, minor = 0;
  if (d == EGL_NO_DISPLAY) return *why = "no EGL display", false;
  if (!eglInitialize(d, &major, &minor)) return *why = egl_error_text("eglInitialize"), false;
  if (!eglBindAPI(EGL_OPENGL_API)) {
    *why = egl_error_text("eglBindAPI(EGL_OPENGL_API)");
    eglTerminate(d);
    return false;
  }
  const char* ext = eglQueryString(d, EGL_EXTENSIONS);
  const bool surfaceless = has_ext(ext, "EGL_KHR_surfaceless_context");
  const EGLint config_attrs[] = {EGL_SURFACE_TYPE, surfaceless ? 0 : EGL_PBUFFER_BIT,
                                 EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                                 EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8,
                                 EGL_NONE};
  EGLConfig config = nullptr;
  EGLint n = 0;
  if (!eglChooseConfig(d, config_attrs, &config, 1, &n) || n < 1) {
    *why = n < 1 ? "no EGL config with desktop OpenGL" : egl_error_text("eglChooseConfig");
    eglTerminate(d);
    return false;
  }
  const EGLint ctx_attrs[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 3,
                              EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                              EGL_NONE};
  EGLContext c = eglCreateContext(d, config, EGL_NO_CONTEXT, ctx_attrs);
  if (c == EGL_NO_CONTEXT) {
    *why = egl_error_text("eglCreateContext(GL 3.3 core)");
    eglTerminate(d);
    return false;
  }
  EGLSurface s = EGL_NO_SURFACE;
  if (!surfaceless) {
    const EGLint pb[] = {EGL_WIDTH, 16, EGL_HEIGHT, 16, EGL_NONE};
    s = eglCreatePbufferSurface(d, config, pb);
    if (s == EGL_NO_SURFACE) {
      *why = egl_error_text("eglCreatePbufferSurface");
      eglDestroyContext(d, c);
      eglTerminate(d);
      return false;
    }
  }
  if (!eglMakeCurrent(d, s, s, c)) {
    *why = egl_error_text("eglMakeCurrent");
    if (s != EGL_NO_SURFACE) eglDestroySurface(d, s);
    eglDestroyContext(d, c);
    eglTerminate(d);
    return false;
  }
  out->display = d;
  out->context = c;
  out->surface = s;
  return true;
}

bool open_egl(EglContext* out, std::string* error) {
  std::string reasons;
  auto note = [&](const std::string& what, const std::string& why) {
    reasons += (reasons.empty() ? "" : "; ") + what + ": " + why;
  };
  const char* client = nullptr;
  {
    startup::Step step("EGL loaded (libEGL and its vendor library: the client extensions)");
    client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  }

  // 1. The device platform, hardware devices before software ones.
  std::string missing;
  const bool device_platform = detail::egl_offers_device_platform(client, &missing);
  if (!device_platform) note("EGL device platform", "the EGL client extensions lack " + missing);
  if (device_platform) {
    EGLDeviceEXT devices[16];
    EGLint count = 0;
    if (eglQueryDevicesEXT(16, devices, &count) && count > 0) {
      std::vector<int> order;
      const char* pick = std::getenv("KL_EGL_DEVICE");
      if (pick && *pick) {
        int i = atoi(pick);
        if (i >= 0 && i < count) order.push_back(i);
        else note("KL_EGL_DEVICE=" + std::string(pick), "no such device (" + std::to_string(count) + " found)");
      } else {
        // Pass 0: the device CUDA calls device 0 (so CUDA-GL interop shares one GPU on multi-GPU
        // hosts); pass 1: other hardware devices; pass 2: software ones.
        auto rank = [&](int i) {
          const char* ext = eglQueryDeviceStringEXT(devices[i], EGL_EXTENSIONS);
          if (has_ext(ext, "EGL_MESA_device_software")) return 2;
          EGLAttrib cuda = -1;
          if (has_ext(ext, "EGL_NV_device_cuda") && eglQueryDeviceAttribEXT(devices[i], EGL_CUDA_DEVICE_NV, &cuda) &&
              cuda == 0)
            return 0;
          return 1;
        };
        for (int pass = 0; pass < 3; ++pass)
          for (int i = 0; i < count; ++i)
            if (rank(i) == pass) order.push_back(i);
      }
      for (int i : order) {
        std::string why;
        EGLDisplay d = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
        if (make_context(d, out, &why)) {
          out->how = "EGL device " + std::to_string(i);
          return true;
        }
        note("EGL device " + std::to_string(i), why);
      }
    } else {
      note("eglQueryDevicesEXT", "no devices");
    }
  }
  // 2. Mesa's surfaceless platform.
  if (has_ext(client, "EGL_MESA_platform_surfaceless")) {
    std::string why;
    EGLDisplay d = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    if (make_context(d, out, &why)) {
      out->how = "surfaceless platform";
      if (!reasons.empty()) std::fprintf(stderr, "kernel-ladder: EGL device platform not used (%s)\n", reasons.c_str());
      return true;
    }
    note("Mesa surfaceless", why);
  }
  // 3. Whatever the default display is.
  {
    std::string why;
    if (make_context(eglGetDisplay(EGL_DEFAULT_DISPLAY), out, &why)) {
      out->how = "EGL default display";
      if (!reasons.empty()) std::fprintf(stderr, "kernel-ladder: EGL device platform not used (%s)\n", reasons.c_str());
      return true;
    }
    note("EGL default display", why);
  }
  *error = "no EGL display gives a GL 3.3 core context (" + reasons + ")";
  return false;
}

// [SECTION] The host ----------------------------------------------------------------------------------
class HeadlessHost final : public RenderHost {
 public:
  ~HeadlessHost() override {
    if (egl_.display == EGL_NO_DISPLAY) return;
    detail::set_gl_context_live(false);
    eglMakeCurrent(egl_.display, egl_.surface, egl_.surface, egl_.context);
    if (imgui_backend_) ImGui_ImplOpenGL3_Shutdown();
    if (imgui_context_) detail::destroy_imgui_context();
    if (fbo_) glDeleteFramebuffers(1, &fbo_);
    if (color_) glDeleteRenderbuffers(1, &color_);
    eglMakeCurrent(egl_.display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    if (egl_.surface != EGL_NO_SURFACE) eglDestroySurface(egl_.display, egl_.surface);
    eglDestroyContext(egl_.display, egl_.context);
    eglTerminate(egl_.display);
  }

  bool init(const HostOptions& o, std::string* error) {
    if (o.width <= 0 || o.height <= 0 || o.width > 16384 || o.height > 16384) {
      *error = "headless size " + std::to_string(o.width) + "x" + std::to_string(o.height) +
               " is out of range: allowed 1..16384 per side";
      return false;
    }
    {
      startup::Step step("EGL display and GL 3.3 core context");
      if (!open_egl(&egl_, error)) return false;
      step.set("EGL display and GL 3.3 core context: " + egl_.how);
    }
    detail::set_gl_context_live(true);
    w_ = o.width;
    h_ = o.height;
    GLint max_rb = 0;
    glGetIntegerv(GL_MAX_RENDERBUFFER_SIZE, &max_rb);
    if (w_ > max_rb || h_ > max_rb) {
      *error = "headless size " + std::to_string(w_) + "x" + std::to_string(h_) +
               " exceeds this GL's renderbuffer limit " + std::to_string(max_rb);
      return false;
    }
    glGenRenderbuffers(1, &color_);
    glBindRenderbuffer(GL_RENDERBUFFER, color_);
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, w_, h_);
    glGenFramebuffers(1, &fbo_);
    glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color_);
    const GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
    if (status != GL_FRAMEBUFFER_COMPLETE) {
      *error = "headless framebuffer incomplete (status 0x" + std::to_string(status) + ")";
      return false;
    }
    if (!gl_check("headless host: FBO setup")) {
      *error = "GL error while creating the headless framebuffer: " + gl_first_error();
      return false;
    }
    try {
      detail::create_imgui_context("");
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
    imgui_context_ = true;
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(float(w_), float(h_));
    io.DisplayFramebufferScale = ImVec2(1, 1);
    io.DeltaTime = 1.0f / 60.0f;
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    if (!ImGui_ImplOpenGL3_Init("#version 330 core")) {
      *error = "ImGui's OpenGL3 backend could not load GL (libGL.so.1)";
      return false;
    }
    imgui_backend_ = true;
    return true;
  }

  bool begin_frame() override {
    startup::Step step("first frame begun: ImGui's GL objects, the font atlas rasterised and uploaded", frames_ == 0);
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(float(w_), float(h_));
    io.DeltaTime = 1.0f / 60.0f;  // fixed: shots and tours are reproducible frame by frame
    detail::apply_pending_ui_scale(true);
    ImGui_ImplOpenGL3_NewFrame();
    ImGui::NewFrame();
    return true;
  }

  void end_frame() override {
    ImGui::Render();
    glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
    glViewport(0, 0, w_, h_);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x * 0.8f, bg.y * 0.8f, bg.z * 0.8f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    glFinish();
    gl_check("headless host: end_frame");
    if (frames_++ == 0) startup::mark("first frame drawn: the panels' work (kernels, textures) and the GL draw");
  }

  bool read_pixels(std::vector<uint8_t>& rgba, int& width, int& height) override {
    width = w_;
    height = h_;
    const size_t row = size_t(w_) * 4;
    std::vector<uint8_t> bottom_up(row * size_t(h_));
    glBindFramebuffer(GL_READ_FRAMEBUFFER, fbo_);
    glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glPixelStorei(GL_PACK_ROW_LENGTH, 0);
    glReadPixels(0, 0, w_, h_, GL_RGBA, GL_UNSIGNED_BYTE, bottom_up.data());
    if (!gl_check("headless host: read_pixels")) return false;
    rgba.resize(bottom_up.size());
    for (int y = 0; y < h_; ++y)
      memcpy(&rgba[size_t(y) * row], &bottom_up[size_t(h_ - 1 - y) * row], row);
    return true;
  }

  int width() const override { return w_; }
  int height() const override { return h_; }
  std::string kind() const override { return "headless (" + egl_.how + ")"; }

 private:
  EglContext egl_;
  GLuint fbo_ = 0, color_ = 0;
  int w_ = 0, h_ = 0;
  int64_t frames_ = 0;  // frames ended (the first one's steps are traced)
  bool imgui_context_ = false, imgui_backend_ = false;
};

}  // namespace

bool detail::egl_offers_device_platform(const char* client_extensions, std::string* missing) {
  const bool enumerate =
      has_ext(client_extensions, "EGL_EXT_device_enumeration") || has_ext(client_extensions, "EGL_EXT_device_base");
  const bool platform = has_ext(client_extensions, "EGL_EXT_platform_device");
  if (missing) {
    missing->clear();
    if (!enumerate) *missing += "EGL_EXT_device_enumeration (or EGL_EXT_device_base)";
    if (!platform) *missing += std::string(missing->empty() ? "" : " and ") + "EGL_EXT_platform_device";
  }
  return enumerate && platform;
}

std::unique_ptr<RenderHost> make_headless_host(const HostOptions& o, std::string* error) {
  std::string local;
  if (!error) error = &local;
  if (ImGui::GetCurrentContext()) {
    *error = "a render host already exists in this process (one ImGui context at a time)";
    return nullptr;
  }
  auto host = std::make_unique<HeadlessHost>();
  if (!host->init(o, error)) return nullptr;
  return host;
}

}  // namespace kl::viz
