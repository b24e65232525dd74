// viz/data_texture.cpp: host uploads read back exactly (glGetTexImage), bad sizes refused; on the GPU
// machine, device writes through the CUDA-GL interop buffer (and through the forced fallback) land in
// the texture bit for bit. The first write's own read-back: a spoiled upload (CPU, llvmpipe) or interop
// write (GPU) is said and falls back. The device tests run under the EGL host (NVIDIA's EGL there).
#include <epoxy/gl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#ifdef KL_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include "kernels/runtime/errors.h"
#include "test_util.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"
#include "viz/render_host.h"

namespace kl {
namespace {

std::vector<float> read_texture(const viz::DataTexture& t) {
  std::vector<float> v(size_t(t.width()) * t.height() * t.channels(), -12345.0f);
  const GLenum fmt = t.channels() == 1 ? GL_RED : t.channels() == 2 ? GL_RG : GL_RGBA;
  glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glBindTexture(GL_TEXTURE_2D, t.gl_id());
  glGetTexImage(GL_TEXTURE_2D, 0, fmt, GL_FLOAT, v.data());
  glBindTexture(GL_TEXTURE_2D, 0);
  return v;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class DataTextureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    viz::HostOptions o;
    o.width = o.height = 64;
    std::string error;
    host_ = viz::make_headless_host(o, &error);
    ASSERT_TRUE(host_) << error;
    errors_before_ = viz::gl_error_count();
  }
  void TearDown() override { EXPECT_EQ(viz::gl_error_count(), errors_before_) << viz::gl_first_error(); }
  std::unique_ptr<viz::RenderHost> host_;
  int errors_before_ = 0;
};

TEST_F(DataTextureTest, HostUploadReadsBackExactly) {
  viz::DataTexture t;
  // Odd sizes (row lengths that are not multiples of 4 bytes per channel group), 1/2/4 channels,
  // and a resize of the same texture between them.
  for (auto [w, h, c] : {std::tuple{1, 1, 1}, std::tuple{7, 3, 1}, std::tuple{33, 17, 2}, std::tuple{5, 64, 4},
                         std::tuple{1000, 3, 2}}) {
    t.resize(w, h, c);
    EXPECT_EQ(t.width(), w);
    EXPECT_EQ(t.height(), h);
    EXPECT_EQ(t.channels(), c);
    std::vector<float> v = test::random_floats(size_t(w) * h * c, -1e3f, 1e3f);
    v[0] = std::numeric_limits<float>::quiet_NaN();  // NaN survives: the shader needs to see it
    t.upload(v.data());
    EXPECT_TRUE(bit_equal(read_texture(t), v)) << w << "x" << h << "x" << c;
  }
}

TEST_F(DataTextureTest, RefusesBadShapes) {
  viz::DataTexture t;
  EXPECT_THROW(t.resize(4, 4, 3), InputError);
  EXPECT_THROW(t.resize(0, 4, 1), InputError);
  EXPECT_THROW(t.resize(4, -1, 1), InputError);
  EXPECT_THROW(t.resize(1 << 20, 1, 1), InputError);
  try {
    t.resize(4, 4, 3);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("channels"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.upload(nullptr), RuntimeError);  // never sized
}

#ifdef KL_HAS_CUDA
bool forced_off() {
  const char* v = std::getenv("KL_FORCE_NO_INTEROP");
  return v && v[0] == '1';
}

// Writes `values` through the device pointer (cudaMemcpy stands in for a kernel) and reads back.
void device_write(viz::DataTexture& t, const std::vector<float>& values) {
  float* d = t.begin_device_write();
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(cudaMemcpy(d, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  t.end_device_write();
}
#endif

TEST_F(DataTextureTest, DeviceWriteLandsInTheTexture) {
  KL_REQUIRE_CUDA();
#ifdef KL_HAS_CUDA
  viz::DataTexture t;
  for (auto [w, h, c] : {std::tuple{37, 11, 2}, std::tuple{256, 128, 1}, std::tuple{3, 5, 4}}) {
    t.resize(w, h, c);
    std::vector<float> v = test::random_floats(size_t(w) * h * c, -10.0f, 10.0f);
    device_write(t, v);
    if (!forced_off()) EXPECT_TRUE(t.interop_active()) << t.interop_status();
    std::printf("%dx%dx%d: %s\n", w, h, c, t.interop_status().c_str());
    EXPECT_FALSE(t.interop_status().empty());
    EXPECT_EQ(viz::DataTexture::last_interop_status(), t.interop_status());
    EXPECT_TRUE(bit_equal(read_texture(t), v)) << w << "x" << h << "x" << c;
    // A second frame of the same size reuses the registration and sees new values.
    std::vector<float> v2 = test::random_floats(v.size(), -10.0f, 10.0f);
    device_write(t, v2);
    EXPECT_TRUE(bit_equal(read_texture(t), v2)) << "second write " << w << "x" << h << "x" << c;
  }
#endif
}

TEST_F(DataTextureTest, SeveralTexturesMappedInOneCall) {
  KL_REQUIRE_CUDA();
#ifdef KL_HAS_CUDA
  viz::DataTexture a, b;
  a.resize(64, 8, 2);
  b.resize(9, 13, 1);
  std::vector<float> va = test::random_floats(64 * 8 * 2), vb = test::random_floats(9 * 13);
  EXPECT_EQ(a.device_pointer(), nullptr);
  viz::DataTexture::begin_device_write_all({&a, &b});
  ASSERT_NE(a.device_pointer(), nullptr);
  ASSERT_NE(b.device_pointer(), nullptr);
  ASSERT_EQ(cudaMemcpy(a.device_pointer(), va.data(), va.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.device_pointer(), vb.data(), vb.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  viz::DataTexture::end_device_write_all({&a, &b});
  EXPECT_EQ(a.device_pointer(), nullptr);
  if (!forced_off()) EXPECT_TRUE(a.interop_active() && b.interop_active()) << a.interop_status();
  EXPECT_TRUE(bit_equal(read_texture(a), va));
  EXPECT_TRUE(bit_equal(read_texture(b), vb));
  // A host upload after device writes still works (the CPU backend shares the texture class).
  std::vector<float> vh = test::random_floats(vb.size());
  b.upload(vh.data());
  EXPECT_TRUE(bit_equal(read_texture(b), vh));
#endif
}

TEST_F(DataTextureTest, ForcedFallbackCopiesThroughTheHost) {
  KL_REQUIRE_CUDA();
#ifdef KL_HAS_CUDA
  const char* old = std::getenv("KL_FORCE_NO_INTEROP");
  const std::string saved = old ? old : "";
  setenv("KL_FORCE_NO_INTEROP", "1", 1);
  viz::DataTexture t;
  t.resize(19, 7, 2);
  std::vector<float> v = test::random_floats(19 * 7 * 2);
  device_write(t, v);
  if (old) setenv("KL_FORCE_NO_INTEROP", saved.c_str(), 1);
  else unsetenv("KL_FORCE_NO_INTEROP");
  EXPECT_FALSE(t.interop_active());
  EXPECT_NE(t.interop_status().find("KL_FORCE_NO_INTEROP"), std::string::npos) << t.interop_status();
  EXPECT_NE(t.interop_status().find("glTexSubImage2D"), std::string::npos) << t.interop_status();
  EXPECT_TRUE(bit_equal(read_texture(t), v));
#endif
}

// The hook on for one test, off again however it ends.
struct CorruptGuard {
  explicit CorruptGuard(viz::DataTexture::Corrupt c) { viz::DataTexture::corrupt_writes_for_test(c); }
  ~CorruptGuard() { viz::DataTexture::corrupt_writes_for_test(viz::DataTexture::Corrupt::None); }
};

std::string prefix_of(const viz::DataTexture& t) {
  return "texture " + std::to_string(t.gl_id()) + ": GPU wrote 7, data says ";
}

TEST_F(DataTextureTest, FirstUploadIsReadBackAndMatches) {
  viz::DataTexture t;
  t.resize(33, 17, 2);
  const std::string before = viz::DataTexture::write_problem();
  EXPECT_FALSE(t.upload_checked());
  std::vector<float> v = test::random_floats(33 * 17 * 2, -1e3f, 1e3f);
  v[1] = std::numeric_limits<float>::quiet_NaN();  // a NaN read back as NaN matches
  t.upload(v.data());
  EXPECT_TRUE(t.upload_checked());
  EXPECT_FALSE(t.upload_fallback());
  EXPECT_EQ(viz::DataTexture::write_problem(), before);
  EXPECT_TRUE(bit_equal(read_texture(t), v));
}

// KL_TEST_CORRUPT_TEXTURE=upload's hook spoils texel (0, 0) after every glTexSubImage2D: the first upload's
// read-back sees it, says it (stderr and write_problem(), which the status bar shows) and the texture's
// uploads fall back to glTexImage2D, this one and every later one (which the hook would spoil otherwise).
TEST_F(DataTextureTest, ACorruptedUploadIsSaidAndFallsBack) {
  CorruptGuard hook(viz::DataTexture::Corrupt::Upload);
  viz::DataTexture t;
  t.resize(33, 17, 2);
  const std::vector<float> v = test::random_floats(33 * 17 * 2, -1e3f, 1e3f);
  testing::internal::CaptureStderr();
  t.upload(v.data());
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string& m = viz::DataTexture::write_problem();
  EXPECT_EQ(m.rfind(prefix_of(t), 0), 0u) << m;
  EXPECT_NE(m.find(" (texel 0,0 channel 0): uploading it again with glTexImage2D"), std::string::npos) << m;
  EXPECT_NE(err.find(m), std::string::npos) << err;
  EXPECT_TRUE(t.upload_fallback());
  EXPECT_TRUE(bit_equal(read_texture(t), v));  // the fallback drew the data
  const std::vector<float> v2 = test::random_floats(v.size(), -1e3f, 1e3f);
  t.upload(v2.data());
  EXPECT_TRUE(bit_equal(read_texture(t), v2)) << "a later upload took the spoiled path again";
  // Once per texture: a second texture is checked (and falls back) on its own first write.
  viz::DataTexture u;
  u.resize(5, 3, 1);
  const std::vector<float> w = test::random_floats(15);
  testing::internal::CaptureStderr();
  u.upload(w.data());
  EXPECT_NE(testing::internal::GetCapturedStderr().find(prefix_of(u)), std::string::npos);
  EXPECT_TRUE(u.upload_fallback());
  EXPECT_TRUE(bit_equal(read_texture(u), w));
}

// The interop variant (the GPU machine): the hook spoils the texture after the interop buffer's copy into
// it; the first write's read-back against the host copy of what CUDA wrote sees it, the host copy is
// drawn, and the texture takes the staging path from then on.
TEST_F(DataTextureTest, ACorruptedInteropWriteIsSaidAndDrawsThroughTheHostCopy) {
  KL_REQUIRE_CUDA();
#ifdef KL_HAS_CUDA
  if (forced_off()) GTEST_SKIP() << "KL_FORCE_NO_INTEROP=1: no interop write to spoil";
  CorruptGuard hook(viz::DataTexture::Corrupt::Interop);
  viz::DataTexture t;
  t.resize(37, 11, 2);
  const std::vector<float> v = test::random_floats(37 * 11 * 2, -10.0f, 10.0f);
  testing::internal::CaptureStderr();
  device_write(t, v);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string& m = viz::DataTexture::write_problem();
  EXPECT_EQ(m.rfind(prefix_of(t), 0), 0u) << m;
  EXPECT_NE(m.find(": drawing through the host copy"), std::string::npos) << m;
  EXPECT_NE(err.find(m), std::string::npos) << err;
  EXPECT_TRUE(t.interop_checked());
  EXPECT_FALSE(t.interop_active());
  EXPECT_NE(t.interop_status().find("read back other values than the data"), std::string::npos) << t.interop_status();
  EXPECT_TRUE(bit_equal(read_texture(t), v));
  const std::vector<float> v2 = test::random_floats(v.size(), -10.0f, 10.0f);
  device_write(t, v2);  // the staging path now
  EXPECT_FALSE(t.interop_active());
  EXPECT_TRUE(bit_equal(read_texture(t), v2));
#endif
}

TEST_F(DataTextureTest, EndWithoutBeginIsAnError) {
  KL_REQUIRE_CUDA();
  viz::DataTexture t;
  t.resize(4, 4, 1);
  EXPECT_THROW(t.end_device_write(), RuntimeError);
}

}  // namespace
}  // namespace kl
