// kernels/runtime/fault.cpp: KL_INJECT_FAULT=launch:N fails exactly the Nth launch, as a failed CUDA launch
// does (a RuntimeError with CUDA's wording), and the launch after it runs normally: on the CPU
// backend's vector-add launch and on every kl::cuda::launch.
#include <gtest/gtest.h>

#include <string>

#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/fault.h"
#include "kernels/rungs/vector_add.h"
#include "test_util.h"

namespace kl {
namespace {

struct Disarm {
  ~Disarm() { fault::arm(""); }
};

TEST(Fault, ExactlyTheNthLaunchFails) {
  Disarm d;
  fault::arm("launch:3");
  EXPECT_NO_THROW(fault::at_launch("a"));
  EXPECT_NO_THROW(fault::at_launch("b"));
  try {
    fault::at_launch("c");
    FAIL() << "launch 3 did not fail";
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA error: unspecified launch failure"), std::string::npos) << m;
    EXPECT_NE(m.find("KL_INJECT_FAULT=launch:3"), std::string::npos) << m;
    EXPECT_NE(m.find("in launch of c"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(fault::at_launch("d"));
  EXPECT_EQ(fault::launches_counted(), 4);
  fault::arm("");
  EXPECT_EQ(fault::launches_counted(), 0);
  for (int i = 0; i < 5; ++i) EXPECT_NO_THROW(fault::at_launch("e"));
}

TEST(Fault, MalformedSpecsAreRefused) {
  Disarm d;
  for (const char* bad : {"launch:", "launch:0", "launch:-1", "launch:1x", "launch", "alloc:1", "launch:99999999999999"})
    EXPECT_THROW(fault::arm(bad), InputError) << bad;
  EXPECT_NO_THROW(fault::arm("launch:1"));
}

TEST(Fault, VectorAddLaunchFailsThenTheNextOneIsExact) {
  Disarm d;
  for (Backend b : test::backends()) {
    const int64_t n = 1000;
    const std::vector<float> x = test::random_small_ints(n), y = test::random_small_ints(n);
    Buffer<float> dx(b, n), dy(b, n), out(b, n);
    dx.upload(x);
    dy.upload(y);
    out.fill_bytes(0xFF);
    fault::arm("launch:1");
    EXPECT_THROW(vector_add::run_traced(b, dx.data(), dy.data(), out.data(), n, 256, nullptr), RuntimeError)
        << backend_name(b);
    vector_add::run_traced(b, dx.data(), dy.data(), out.data(), n, 256, nullptr);
    const std::vector<float> got = out.to_host();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], x[size_t(i)] + y[size_t(i)]) << backend_name(b) << " " << i;
  }
}

}  // namespace
}  // namespace kl
