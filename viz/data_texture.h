// A 2-D texture of raw float values (1, 2 or 4 channels) that shaders/heatmap.frag turns into colour.
// Filled in one of two ways:
//   upload(host)            the CPU backend: glTexSubImage2D from host memory.
//   device write (CUDA)     the CUDA backend: a pixel-unpack buffer registered with CUDA once per size;
//                           kernels write through a device pointer while it is mapped; on unmap the
//                           texture is refreshed from that buffer on the GPU (no trip through the host).
// If registration fails (or KL_FORCE_NO_INTEROP=1), the device path falls back to a device staging
// buffer copied to the host and uploaded, and interop_status() says so for the UI.
// The picture is the data: the first write of each texture on each path (upload, interop) in a process is
// read back at a few texels (corners and centre) and compared with the data it came from (the host array;
// on interop a host copy of the CUDA-written buffer taken before unmapping). A mismatch is said once as
// "texture N: GPU wrote X, data says Y (texel x,y channel k): ..." on stderr, in the UI log and in the
// status bar (write_problem()), and the texture falls back for this and every later write: interop to
// the host copy and the staging path; glTexSubImage2D to glTexImage2D with every unpack setting reset.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kl::viz {

class DataTexture {
 public:
  DataTexture();
  ~DataTexture();
  DataTexture(const DataTexture&) = delete;
  DataTexture& operator=(const DataTexture&) = delete;

  // (Re)allocates when the size or channel count changes; contents undefined until written.
  void resize(int width, int height, int channels);
  void upload(const float* host);  // width*height*channels floats, row-major, row 0 at the top

  int width() const { return w_; }
  int height() const { return h_; }
  int channels() const { return c_; }
  unsigned gl_id() const { return tex_; }

  // --- CUDA backend -------------------------------------------------------------------------------
  // A device pointer to width*height*channels floats, valid until end_device_write(). Within a batch
  // mapped by begin_device_write_all() it returns the pointer mapped there (nothing is mapped twice).
  float* begin_device_write();
  void end_device_write();
  bool interop_active() const { return interop_ok_; }
  // Takes the fallback path (device-to-host copy + glTexSubImage2D) even where interop would work, as
  // KL_FORCE_NO_INTEROP=1 does for every texture: `bench-frame` times both paths in one run. Takes
  // effect at the next registration (the first device write after construction or a resize).
  void force_upload_path(bool on) { force_upload_ = on; }
  const std::string& interop_status() const { return interop_status_; }
  // Whether the first write on the upload path / the interop path has been read back and compared, and
  // whether this texture's uploads have fallen back to glTexImage2D (a mismatch on the upload path).
  bool upload_checked() const { return checked_upload_; }
  bool interop_checked() const { return checked_interop_; }
  bool upload_fallback() const { return safe_upload_; }
  // The last mismatch said ("" while every texture read back matched its data), for the status bar.
  static const std::string& write_problem();
  // Test hook: corrupts one texel after every write of that path (as a broken driver would), so the check
  // and the fallback can be tested. Also set by KL_TEST_CORRUPT_TEXTURE=upload|interop at start-up.
  enum class Corrupt { None, Upload, Interop };
  static void corrupt_writes_for_test(Corrupt c);

  // Maps several textures' buffers with one cudaGraphicsMapResources call (once per frame).
  static void begin_device_write_all(const std::vector<DataTexture*>& textures);
  static void end_device_write_all(const std::vector<DataTexture*>& textures);
  // The device pointer of a texture mapped by begin_device_write_all (nullptr when not mapped).
  float* device_pointer() const { return static_cast<float*>(mapped_); }
  // The interop status of the texture most recently written by a device (for the status bar);
  // "textures uploaded from the host (glTexSubImage2D)" until then.
  static const std::string& last_interop_status();

 private:
  void ensure_registered();
  void release(bool gl_live);
  void write_texture(const float* host, bool safe);  // glTexSubImage2D, or glTexImage2D with unpack reset
  void corrupt_if_testing(Corrupt path);
  // Compares the sample texels with `data`; on a mismatch says it, with `fallback` naming what follows.
  bool matches(const float* data, const char* fallback);
  void interop_failed(const std::vector<float>& host_copy);  // draws the host copy, leaves interop
  uint64_t gl_generation_ = 0;  // the render host's context the GL names belong to
  unsigned tex_ = 0, pbo_ = 0;
  int w_ = 0, h_ = 0, c_ = 0;
  void* resource_ = nullptr;  // cudaGraphicsResource_t
  void* mapped_ = nullptr;
  void* staging_ = nullptr;   // device staging buffer on the fallback path
  bool interop_tried_ = false, interop_ok_ = false, force_upload_ = false;
  bool checked_upload_ = false, checked_interop_ = false, safe_upload_ = false, interop_mismatch_ = false;
  std::string interop_status_ = "not used (CPU backend uploads with glTexSubImage2D)";
};

}  // namespace kl::viz
