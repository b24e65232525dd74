// DataTexture: raw float values in a GL texture, filled from the host (glTexSubImage2D) or, on the CUDA
// backend, through a pixel-unpack buffer registered with CUDA once per size (the cuda-samples simpleGL
// habit: register once, map/unmap once per frame, all resources in one call).
#include "viz/data_texture.h"

#include <epoxy/gl.h>
// epoxy's GL header must precede CUDA's interop header (which would include the system GL header).
#ifdef KL_HAS_CUDA
#include <cuda_gl_interop.h>
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/startup_trace.h"
#include "viz/gl_check.h"
#include "viz/host_common.h"
#include "viz/ui_log.h"

namespace kl::viz {
namespace {

GLenum internal_format(int c) { return c == 1 ? GL_R32F : c == 2 ? GL_RG32F : GL_RGBA32F; }
GLenum pixel_format(int c) { return c == 1 ? GL_RED : c == 2 ? GL_RG : GL_RGBA; }

#ifdef KL_HAS_CUDA
// The same wording as kernels/runtime/cuda_launch.cuh's KL_CUDA_CHECK (that header is for .cu files only).
void cuda_check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw RuntimeError(std::string("CUDA error: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) +
                     ") in " + expr + " at " + file + ":" + std::to_string(line));
}
#define KL_VIZ_CUDA_CHECK(expr) cuda_check((expr), #expr, __FILE__, __LINE__)

bool interop_forced_off() {
  const char* v = std::getenv("KL_FORCE_NO_INTEROP");
  return v && v[0] == '1';
}
#endif

// Set by every device write, read by the status bar. Until one, every texture came from the host (the CPU
// backend, or a CUDA panel that draws host-side data such as rung 1½'s warp diagrams).
std::string& last_status() {
  static std::string s = "textures uploaded from the host (glTexSubImage2D)";
  return s;
}

// [SECTION] The first write read back -----------------------------------------------------------------

std::string& problem() {
  static std::string s;
  return s;
}

DataTexture::Corrupt corrupt_from_env() {
  const char* v = std::getenv("KL_TEST_CORRUPT_TEXTURE");
  if (!v || !*v) return DataTexture::Corrupt::None;
  if (std::strcmp(v, "upload") == 0) return DataTexture::Corrupt::Upload;
  if (std::strcmp(v, "interop") == 0) return DataTexture::Corrupt::Interop;
  throw InputError(out_of_range_message("KL_TEST_CORRUPT_TEXTURE", v, "upload or interop (a test hook)"));
}

DataTexture::Corrupt& corrupt_mode() {
  static DataTexture::Corrupt c = corrupt_from_env();
  return c;
}

struct Texel {
  int x, y;
};

// The corners and the centre, each once.
std::vector<Texel> sample_texels(int w, int h) {
  std::vector<Texel> v;
  for (Texel t : {Texel{0, 0}, Texel{w - 1, h - 1}, Texel{w / 2, h / 2}, Texel{w - 1, 0}, Texel{0, h - 1}}) {
    bool seen = false;
    for (const Texel& o : v) seen = seen || (o.x == t.x && o.y == t.y);
    if (!seen) v.push_back(t);
  }
  return v;
}

// The first `c` channels of texture `tex` at each texel, through a framebuffer it is attached to (float
// formats are colour-renderable in GL 3.3, and glReadPixels leaves them unclamped). False when that
// framebuffer is incomplete. GL's bindings and pack settings are restored.
bool read_texels(unsigned tex, int c, const std::vector<Texel>& at, std::vector<float>* out) {
  GLint prev_read = 0, prev_pack = 0, align = 0, row = 0, skip_px = 0, skip_rows = 0;
  glGetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &prev_read);
  glGetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &prev_pack);
  glGetIntegerv(GL_PACK_ALIGNMENT, &align);
  glGetIntegerv(GL_PACK_ROW_LENGTH, &row);
  glGetIntegerv(GL_PACK_SKIP_PIXELS, &skip_px);
  glGetIntegerv(GL_PACK_SKIP_ROWS, &skip_rows);
  GLuint fbo = 0;
  glGenFramebuffers(1, &fbo);
  glBindFramebuffer(GL_READ_FRAMEBUFFER, fbo);
  glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0);
  glReadBuffer(GL_COLOR_ATTACHMENT0);
  const bool ok = glCheckFramebufferStatus(GL_READ_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE;
  if (ok) {
    glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
    glPixelStorei(GL_PACK_ALIGNMENT, 4);
    glPixelStorei(GL_PACK_ROW_LENGTH, 0);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 0);
    glPixelStorei(GL_PACK_SKIP_ROWS, 0);
    out->clear();
    for (const Texel& t : at) {
      float px[4] = {0, 0, 0, 0};
      glReadPixels(t.x, t.y, 1, 1, GL_RGBA, GL_FLOAT, px);
      out->insert(out->end(), px, px + c);
    }
    glPixelStorei(GL_PACK_ALIGNMENT, align);
    glPixelStorei(GL_PACK_ROW_LENGTH, row);
    glPixelStorei(GL_PACK_SKIP_PIXELS, skip_px);
    glPixelStorei(GL_PACK_SKIP_ROWS, skip_rows);
    glBindBuffer(GL_PIXEL_PACK_BUFFER, GLuint(prev_pack));
  }
  glBindFramebuffer(GL_READ_FRAMEBUFFER, GLuint(prev_read));
  glDeleteFramebuffers(1, &fbo);
  gl_check("DataTexture: reading texels back");
  return ok;
}

// The same value: the same bits, or both NaN (a driver may quieten a NaN's payload).
bool same_value(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)); }

std::string number(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", double(v));
  return b;
}

// Said once per mismatch: stderr, the UI log, the status bar.
void say(const std::string& m) {
  problem() = m;
  std::fprintf(stderr, "kernel-ladder: %s\n", m.c_str());
  ui_log::event(m);
}

}  // namespace

const std::string& DataTexture::last_interop_status() { return last_status(); }
const std::string& DataTexture::write_problem() { return problem(); }
void DataTexture::corrupt_writes_for_test(Corrupt c) { corrupt_mode() = c; }

// Overwrites texel (0, 0)'s first channel with a value it does not hold, when the hook asks for `path`.
void DataTexture::corrupt_if_testing(Corrupt path) {
  if (corrupt_mode() != path) return;
  std::vector<float> px;
  if (!read_texels(tex_, c_, {Texel{0, 0}}, &px)) return;
  px[0] = px[0] == 7.0f ? 8.0f : 7.0f;
  GLint prev = 0, prev_unpack = 0;
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &prev);
  glGetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &prev_unpack);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  glBindTexture(GL_TEXTURE_2D, tex_);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, 1, 1, pixel_format(c_), GL_FLOAT, px.data());
  glBindTexture(GL_TEXTURE_2D, GLuint(prev));
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, GLuint(prev_unpack));
  gl_check("DataTexture: the corrupting test hook");
}

bool DataTexture::matches(const float* data, const char* fallback) {
  const std::vector<Texel> at = sample_texels(w_, h_);
  std::vector<float> got;
  const std::string name = "texture " + std::to_string(tex_);
  if (!read_texels(tex_, c_, at, &got)) {
    std::fprintf(stderr, "kernel-ladder: %s: its framebuffer is incomplete, so its first write is not read back\n",
                 name.c_str());
    return true;
  }
  for (size_t i = 0; i < at.size(); ++i)
    for (int k = 0; k < c_; ++k) {
      const float g = got[i * size_t(c_) + size_t(k)];
      const float want = data[(size_t(at[i].y) * size_t(w_) + size_t(at[i].x)) * size_t(c_) + size_t(k)];
      if (same_value(g, want)) continue;
      say(name + ": GPU wrote " + number(g) + ", data says " + number(want) + " (texel " + std::to_string(at[i].x) +
          "," + std::to_string(at[i].y) + " channel " + std::to_string(k) + "): " +
          (fallback ? fallback : "still wrong after the fallback: the picture is not the data"));
      return false;
    }
  return true;
}

DataTexture::DataTexture() = default;

// Frees the CUDA registration, the staging buffer and the GL names. With `gl_live` false the GL
// context they belong to is gone (the host was destroyed first): its names are dropped, not deleted,
// and CUDA's complaints about the vanished buffer are ignored.
void DataTexture::release(bool gl_live) {
#ifdef KL_HAS_CUDA
  if (mapped_ && resource_) {
    auto r = static_cast<cudaGraphicsResource_t>(resource_);
    if (gl_live) KL_VIZ_CUDA_CHECK(cudaGraphicsUnmapResources(1, &r, 0));
    else if (cudaGraphicsUnmapResources(1, &r, 0) != cudaSuccess) cudaGetLastError();
  }
  mapped_ = nullptr;
  if (resource_) {
    auto r = static_cast<cudaGraphicsResource_t>(resource_);
    resource_ = nullptr;
    if (gl_live) KL_VIZ_CUDA_CHECK(cudaGraphicsUnregisterResource(r));
    else if (cudaGraphicsUnregisterResource(r) != cudaSuccess) cudaGetLastError();
  }
  if (staging_) {
    void* p = staging_;
    staging_ = nullptr;
    KL_VIZ_CUDA_CHECK(cudaFree(p));
  }
#endif
  mapped_ = nullptr;
  if (gl_live && pbo_) glDeleteBuffers(1, &pbo_);
  pbo_ = 0;
  interop_tried_ = false;
  interop_ok_ = false;
}

DataTexture::~DataTexture() {
  const bool live = gl_generation_ != 0 && gl_generation_ == detail::gl_context_generation();
  try {
    release(live);
  } catch (const std::exception&) {
    // Nothing to report to from a destructor; the process may be ending.
  }
  if (live && tex_) glDeleteTextures(1, &tex_);
}

void DataTexture::resize(int width, int height, int channels) {
  if (channels != 1 && channels != 2 && channels != 4)
    throw InputError(out_of_range_message("DataTexture channels", std::to_string(channels), "1, 2 or 4"));
  if (detail::gl_context_generation() == 0) throw RuntimeError("DataTexture::resize with no render host");
  GLint max_size = 0;
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_size);
  if (width < 1 || width > max_size || height < 1 || height > max_size)
    throw InputError(out_of_range_message("DataTexture size", std::to_string(width) + "x" + std::to_string(height),
                                          "1.." + std::to_string(max_size) + " per side (GL_MAX_TEXTURE_SIZE)"));
  if (gl_generation_ != detail::gl_context_generation()) {
    // Names from an earlier host's context: meaningless now, start afresh.
    release(false);
    tex_ = 0;
    gl_generation_ = detail::gl_context_generation();
  }
  if (tex_ && width == w_ && height == h_ && channels == c_) return;
  if (mapped_) throw RuntimeError("DataTexture::resize while mapped for a device write");

  // The buffer registered with CUDA belongs to the old size: release it, register again on next use.
  release(true);

  w_ = width;
  h_ = height;
  c_ = channels;
  if (!tex_) glGenTextures(1, &tex_);
  GLint prev = 0;
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &prev);
  glBindTexture(GL_TEXTURE_2D, tex_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glTexImage2D(GL_TEXTURE_2D, 0, GLint(internal_format(c_)), w_, h_, 0, pixel_format(c_), GL_FLOAT, nullptr);
  glBindTexture(GL_TEXTURE_2D, GLuint(prev));
  if (!gl_check("DataTexture::resize"))
    throw RuntimeError("GL error allocating a " + std::to_string(w_) + "x" + std::to_string(h_) + "x" +
                       std::to_string(c_) + " float texture: " + gl_first_error());
}

void DataTexture::write_texture(const float* host, bool safe) {
  GLint prev = 0, prev_unpack = 0;
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &prev);
  glGetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &prev_unpack);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glBindTexture(GL_TEXTURE_2D, tex_);
  if (safe) {  // the fallback: every unpack setting at its default, the texture's storage specified again
    for (GLenum p : {GL_UNPACK_SKIP_PIXELS, GL_UNPACK_SKIP_ROWS, GL_UNPACK_IMAGE_HEIGHT, GL_UNPACK_SKIP_IMAGES,
                     GL_UNPACK_SWAP_BYTES, GL_UNPACK_LSB_FIRST})
      glPixelStorei(p, 0);
    glTexImage2D(GL_TEXTURE_2D, 0, GLint(internal_format(c_)), w_, h_, 0, pixel_format(c_), GL_FLOAT, host);
  } else {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w_, h_, pixel_format(c_), GL_FLOAT, host);
  }
  glBindTexture(GL_TEXTURE_2D, GLuint(prev));
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, GLuint(prev_unpack));
  gl_check("DataTexture::upload");
}

void DataTexture::upload(const float* host) {
  if (!tex_ || gl_generation_ != detail::gl_context_generation())
    throw RuntimeError("DataTexture::upload before resize (under the current render host)");
  write_texture(host, safe_upload_);
  if (!safe_upload_) corrupt_if_testing(Corrupt::Upload);
  if (checked_upload_) return;
  checked_upload_ = true;
  if (matches(host, "uploading it again with glTexImage2D, every unpack setting reset")) return;
  safe_upload_ = true;
  write_texture(host, true);
  matches(host, nullptr);
}

// [SECTION] CUDA device writes ---------------------------------------------------------------------------
#ifdef KL_HAS_CUDA

void DataTexture::ensure_registered() {
  if (!tex_ || gl_generation_ != detail::gl_context_generation())
    throw RuntimeError("DataTexture device write before resize (under the current render host)");
  if (interop_tried_) return;
  interop_tried_ = true;
  const size_t bytes = size_t(w_) * size_t(h_) * size_t(c_) * sizeof(float);
  std::string why;
  if (interop_forced_off() || force_upload_ || interop_mismatch_) {
    why = interop_mismatch_ ? "its first write read back other values than the data"
          : force_upload_   ? "upload path forced by the caller"
                            : "KL_FORCE_NO_INTEROP=1";
  } else {
    GLint prev = 0;
    glGetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &prev);
    glGenBuffers(1, &pbo_);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, pbo_);
    glBufferData(GL_PIXEL_UNPACK_BUFFER, GLsizeiptr(bytes), nullptr, GL_STREAM_DRAW);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, GLuint(prev));
    if (!gl_check("DataTexture: pixel-unpack buffer")) {
      why = "GL could not allocate the pixel-unpack buffer: " + gl_first_error();
    } else {
      cudaGraphicsResource_t r = nullptr;
      static bool first = true;  // GL's thread only
      startup::Step step("CUDA-GL interop: the first buffer registered (cudaGraphicsGLRegisterBuffer)", first);
      first = false;
      cudaError_t e = cudaGraphicsGLRegisterBuffer(&r, pbo_, cudaGraphicsRegisterFlagsWriteDiscard);
      if (e != cudaSuccess) step.set(std::string("CUDA-GL interop: the first registration failed: ") + cudaGetErrorName(e));
      if (e == cudaSuccess) {
        resource_ = r;
        interop_ok_ = true;
        interop_status_ = "CUDA-GL interop: kernels write the texture's buffer directly";
        return;
      }
      cudaGetLastError();  // registration failures are not sticky: clear and fall back
      why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    }
    glDeleteBuffers(1, &pbo_);
    pbo_ = 0;
  }
  KL_VIZ_CUDA_CHECK(cudaMalloc(&staging_, bytes));
  interop_ok_ = false;
  interop_status_ = "interop unavailable (" + why + "): device-to-host copy + glTexSubImage2D";
}

float* DataTexture::begin_device_write() {
  // Inside a batch mapped by begin_device_write_all, this is the texture's pointer in that batch.
  if (!mapped_) begin_device_write_all({this});
  return static_cast<float*>(mapped_);
}

void DataTexture::end_device_write() { end_device_write_all({this}); }

void DataTexture::begin_device_write_all(const std::vector<DataTexture*>& textures) {
  std::vector<cudaGraphicsResource_t> resources;
  for (DataTexture* t : textures) {
    if (t->mapped_) throw RuntimeError("DataTexture mapped twice for a device write");
    t->ensure_registered();
    if (t->interop_ok_) resources.push_back(static_cast<cudaGraphicsResource_t>(t->resource_));
  }
  if (!resources.empty())
    KL_VIZ_CUDA_CHECK(cudaGraphicsMapResources(int(resources.size()), resources.data(), 0));
  for (DataTexture* t : textures) {
    last_status() = t->interop_status_;
    if (t->interop_ok_) {
      void* p = nullptr;
      size_t size = 0;
      KL_VIZ_CUDA_CHECK(cudaGraphicsResourceGetMappedPointer(
          &p, &size, static_cast<cudaGraphicsResource_t>(t->resource_)));
      t->mapped_ = p;
    } else {
      t->mapped_ = t->staging_;
    }
  }
}

// The interop path's first write did not reach the texture as written: the host copy is drawn (by the
// upload path, whose own first write is read back too) and this texture leaves interop for good.
void DataTexture::interop_failed(const std::vector<float>& host_copy) {
  interop_mismatch_ = true;
  release(true);  // the registration and the buffer; the next device write takes the staging path
  interop_status_ = "interop unavailable (its first write read back other values than the data): device-to-host "
                    "copy + glTexSubImage2D";
  last_status() = interop_status_;
  upload(host_copy.data());
}

void DataTexture::end_device_write_all(const std::vector<DataTexture*>& textures) {
  std::vector<cudaGraphicsResource_t> resources;
  // The first interop write of a texture: a host copy of what CUDA wrote, taken while it is mapped, to
  // compare the texture with (and to draw from if they differ).
  std::vector<std::vector<float>> first(textures.size());
  for (size_t i = 0; i < textures.size(); ++i) {
    DataTexture* t = textures[i];
    if (!t->mapped_) throw RuntimeError("DataTexture::end_device_write without begin_device_write");
    if (!t->interop_ok_) continue;
    resources.push_back(static_cast<cudaGraphicsResource_t>(t->resource_));
    if (t->checked_interop_) continue;
    first[i].resize(size_t(t->w_) * size_t(t->h_) * size_t(t->c_));
    KL_VIZ_CUDA_CHECK(cudaMemcpy(first[i].data(), t->mapped_, first[i].size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  // Unmapping orders all work issued to stream 0 before GL's use of the buffers.
  if (!resources.empty())
    KL_VIZ_CUDA_CHECK(cudaGraphicsUnmapResources(int(resources.size()), resources.data(), 0));
  // Reused across frames: a fresh 64 MiB vector per frame would page-fault its way through every frame.
  static thread_local std::vector<float> host;
  for (size_t i = 0; i < textures.size(); ++i) {
    DataTexture* t = textures[i];
    t->mapped_ = nullptr;
    if (t->interop_ok_) {
      // The texture is refreshed from the buffer on the GPU: offset 0 into the bound unpack buffer.
      GLint prev = 0, prev_unpack = 0;
      glGetIntegerv(GL_TEXTURE_BINDING_2D, &prev);
      glGetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &prev_unpack);
      glBindBuffer(GL_PIXEL_UNPACK_BUFFER, t->pbo_);
      glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
      glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
      glBindTexture(GL_TEXTURE_2D, t->tex_);
      glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, t->w_, t->h_, pixel_format(t->c_), GL_FLOAT, nullptr);
      glBindTexture(GL_TEXTURE_2D, GLuint(prev));
      glBindBuffer(GL_PIXEL_UNPACK_BUFFER, GLuint(prev_unpack));
      gl_check("DataTexture::end_device_write (from the CUDA-written buffer)");
      t->corrupt_if_testing(Corrupt::Interop);
      if (first[i].empty()) continue;
      t->checked_interop_ = true;
      if (!t->matches(first[i].data(), "drawing through the host copy")) t->interop_failed(first[i]);
    } else {
      host.resize(size_t(t->w_) * size_t(t->h_) * size_t(t->c_));
      KL_VIZ_CUDA_CHECK(cudaMemcpy(host.data(), t->staging_, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
      t->upload(host.data());
    }
  }
}

#else  // no CUDA in this build: the device path does not exist

void DataTexture::ensure_registered() {
  throw RuntimeError("DataTexture device write: this build has no CUDA backend");
}
float* DataTexture::begin_device_write() {
  ensure_registered();
  return nullptr;
}
void DataTexture::end_device_write() { ensure_registered(); }
void DataTexture::begin_device_write_all(const std::vector<DataTexture*>& textures) {
  if (!textures.empty()) textures.front()->ensure_registered();
}
void DataTexture::end_device_write_all(const std::vector<DataTexture*>& textures) {
  if (!textures.empty()) textures.front()->ensure_registered();
}

#endif

}  // namespace kl::viz
