// kernels/runtime/buffer.cpp: sizes that do not fit are refused with the bytes asked and the bytes free, on the
// host (checked against MemAvailable before malloc) and on the GPU (cudaMalloc's failure, with
// cudaMemGetInfo's figures); a refusal leaves the buffer empty and the next allocation works.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <regex>
#include <string>

#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

std::string refusal(Backend b, size_t n) {
  try {
    Buffer<uint8_t> buf(b, n);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Buffer, HostHugeRequestNamesBytesAskedAndAvailable) {
  const std::string m = refusal(Backend::Cpu, size_t(1) << 60);
  ASSERT_FALSE(m.empty()) << "2^60 bytes of host memory were granted";
  EXPECT_TRUE(std::regex_search(m, std::regex("cannot allocate 1\\.00 EiB \\(1152921504606846976 bytes\\) of host "
                                              "memory: [0-9.]+ (GiB|MiB|KiB|B) available")))
      << m;
}

TEST(Buffer, HostRequestJustOverAvailableIsRefusedAndJustUnderTheCheckIsGranted) {
  const uint64_t avail = mem::host_available_bytes();
  ASSERT_GT(avail, uint64_t(64) << 20) << "this machine reports less than 64 MiB available";
  EXPECT_THROW(mem::require_host(avail + (uint64_t(1) << 30), "test"), InputError);
  EXPECT_NO_THROW(mem::require_host(1, "test"));
  // Below, at and above the 64 MiB threshold from which host requests are checked: all granted here.
  for (size_t bytes : {(size_t(64) << 20) - 1, size_t(64) << 20, (size_t(64) << 20) + 1}) {
    Buffer<uint8_t> b(Backend::Cpu, bytes);
    b.fill_bytes(0xFF);
    EXPECT_EQ(b.size(), bytes);
    EXPECT_EQ(b.data()[bytes - 1], 0xFF);
  }
}

TEST(Buffer, ElementCountOverflowingSixtyFourBitsIsRefused) {
  try {
    Buffer<float> b(Backend::Cpu, std::numeric_limits<size_t>::max() / 2);
    FAIL() << "an element count whose byte size overflows was granted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 2^64 bytes"), std::string::npos) << e.what();
  }
}

TEST(Buffer, RefusalLeavesTheBufferEmptyAndTheNextAllocationWorks) {
  Buffer<float> b(Backend::Cpu, 16);
  EXPECT_THROW(b.resize(Backend::Cpu, size_t(1) << 60), InputError);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  const std::vector<float> v = test::random_floats(1000);
  b.upload(v);
  EXPECT_EQ(b.to_host(), v);
}

TEST(Buffer, ProcessFiguresAreRead) {
  EXPECT_GT(mem::host_rss_bytes(), uint64_t(1) << 20);
  uint64_t f = 1, t = 1;
  EXPECT_EQ(mem::device_memory(&f, &t), test::has_cuda_device());
  if (test::has_cuda_device()) {
    EXPECT_GT(t, f);
  } else {
    EXPECT_EQ(f, 0u);
    EXPECT_EQ(t, 0u);
  }
}

TEST(Buffer, BytesTextUnits) {
  EXPECT_EQ(mem::bytes_text(1023), "1023 B");
  EXPECT_EQ(mem::bytes_text(1024), "1.0 KiB");
  EXPECT_EQ(mem::bytes_text(uint64_t(3) << 29), "1.50 GiB");
  EXPECT_EQ(mem::bytes_text(uint64_t(1) << 40), "1.00 TiB");
  EXPECT_EQ(mem::bytes_text(uint64_t(1) << 50), "1.00 PiB");
  EXPECT_EQ(mem::bytes_text(uint64_t(1) << 60), "1.00 EiB");
}

TEST(Buffer, DeviceHugeRequestNamesBytesAskedAndFree) {
  KL_REQUIRE_CUDA();
  const std::string m = refusal(Backend::Cuda, size_t(1) << 50);  // 1 PiB
  ASSERT_FALSE(m.empty()) << "1 PiB of device memory was granted";
  EXPECT_TRUE(std::regex_search(m, std::regex("cannot allocate 1\\.00 PiB \\(1125899906842624 bytes\\) on the GPU: "
                                              "[0-9.]+ (GiB|MiB) free of [0-9.]+ GiB")))
      << m;
  // The failure is not sticky: the device still allocates, writes and reads.
  Buffer<float> b(Backend::Cuda, 4096);
  const std::vector<float> v = test::random_floats(4096);
  b.upload(v);
  EXPECT_EQ(b.to_host(), v);
}

}  // namespace
}  // namespace kl
