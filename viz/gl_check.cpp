// GL error bookkeeping: a count of every error drained and the first message, for tests and the UI.
#include "viz/gl_check.h"

#include <epoxy/gl.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace kl::viz {
namespace {
std::atomic<int> g_count{0};
std::mutex g_mutex;
std::string g_first;

const char* gl_error_name(GLenum e) {
  switch (e) {
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    case GL_STACK_UNDERFLOW: return "GL_STACK_UNDERFLOW";
    case GL_STACK_OVERFLOW: return "GL_STACK_OVERFLOW";
    default: return "unknown GL error";
  }
}
}  // namespace

bool gl_check(const char* where) {
  bool clean = true;
  // Bounded: a lost context may keep reporting the same error for ever.
  for (int i = 0; i < 32; ++i) {
    GLenum e = glGetError();
    if (e == GL_NO_ERROR) break;
    clean = false;
    ++g_count;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_first.empty()) {
      char code[16];
      snprintf(code, sizeof(code), "0x%04X", unsigned(e));
      g_first = std::string(gl_error_name(e)) + " (" + code + ") at " + (where ? where : "?");
    }
  }
  return clean;
}

int gl_error_count() { return g_count.load(); }

std::string gl_first_error() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_first;
}

}  // namespace kl::viz
