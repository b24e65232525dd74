// kernels/editable/nvrtc.cu: the CUDA backend's run-time build. NVRTC compiles without a GPU, so its
// errors are tested on every machine with the toolkit; the launches need a device (skipped without one):
// the unedited source built by NVRTC gives the shipped CUDA trace, and an edited kernel's trace (and its
// fault) is identical on the CPU and CUDA backends, in process and through the worker.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"
#include "kernels/rungs/vector_add.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/trace.h"
#include "test_util.h"
#include "vector_add_outcome.h"

namespace kl {
namespace {

using editable::DType;

const void* const kEnv = test::use_worker_binary();

editable::Source edited(const std::string& from = "", const std::string& to = "") {
  return test::shipped_copy("vector-add", "nv_vector_add.cu", from, to);
}

TEST(EditableNvrtc, CompileErrorsAtTheUsersFileAndLineWithoutAGpu) {
  if (!cuda_compiled()) GTEST_SKIP() << "built without CUDA";
  const editable::Source s = edited("out.store(offset, a + b, mask);", "out.store(offset, a + c, mask);");
  try {
    editable::compile(Backend::Cuda, s);
    FAIL() << "compiled";
  } catch (const editable::CompileError& e) {
    ASSERT_FALSE(e.diagnostics.empty()) << e.what();
    EXPECT_EQ(e.diagnostics[0].file, "nv_vector_add.cu");
    EXPECT_EQ(e.diagnostics[0].line, test::line_of(s.text, "a + c"));
    EXPECT_NE(e.diagnostics[0].message.find("\"c\""), std::string::npos) << e.diagnostics[0].message;
    EXPECT_EQ(e.diagnostics[0].text().rfind("nv_vector_add.cu:", 0), 0u) << e.diagnostics[0].text();
  }
}

TEST(EditableNvrtc, TheUneditedSourceCompiles) {
  if (!cuda_compiled()) GTEST_SKIP() << "built without CUDA";
  EXPECT_NO_THROW(editable::compile(Backend::Cuda, edited()));
}

using Outcome = test::VectorAddOutcome;

// In process (run_in_process) or through the worker (launch).
Outcome vector_add_on(Backend b, int64_t n, int block, const editable::Source* src, bool worker,
                      const std::vector<float>& x, const std::vector<float>& y) {
  return test::traced_vector_add(b, n, block, x, y,
                                 [&](const float* dx, const float* dy, float* dout, int64_t m, int bs, ElementTraceView* v) {
                                   const editable::Launch l = vector_add::detail::traced_launch(dx, dy, dout, m, bs, v);
                                   return worker ? editable::launch(b, src, l) : editable::run_in_process(b, src, l);
                                 });
}

void expect_same(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4));
  EXPECT_EQ(a.writer, b.writer);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.lanes, b.lanes);
  EXPECT_EQ(a.fault.text(), b.fault.text());
}

TEST(EditableNvrtcGpu, UneditedSourceGivesTheShippedCudaTrace) {
  KL_REQUIRE_CUDA();
  const editable::Source src = edited();
  for (int block : {32, 1024, 4096}) {
    const int64_t n = 100003;
    const std::vector<float> x = test::random_floats(n), y = test::random_floats(n);
    const Outcome shipped = vector_add_on(Backend::Cuda, n, block, nullptr, false, x, y);
    const Outcome rt = vector_add_on(Backend::Cuda, n, block, &src, false, x, y);
    EXPECT_EQ(rt.fault.kind, editable::Fault::None) << rt.fault.text();
    expect_same(shipped, rt);
  }
}

TEST(EditableNvrtcGpu, AnEditedKernelsTraceIsIdenticalOnCpuAndCuda) {
  KL_REQUIRE_CUDA();
  // Without the store mask: the tail's stores fault; the first fault, and everything stored, must agree.
  const editable::Source unmasked = edited("out.store(offset, a + b, mask)", "out.store(offset, a + b)");
  // An off-by-one mask: the last element is never written.
  const editable::Source doubled = edited("const bool mask = offset < n;", "const bool mask = offset < n - 1;");
  for (const editable::Source* s : {&unmasked, &doubled}) {
    for (bool worker : {false, true}) {
      SCOPED_TRACE(std::string(worker ? "worker " : "in process ") + (s == &unmasked ? "unmasked" : "off by one"));
      const int64_t n = 1000;
      const std::vector<float> x = test::random_small_ints(n), y = test::random_small_ints(n);
      const Outcome c = vector_add_on(Backend::Cpu, n, 256, s, worker, x, y);
      const Outcome g = vector_add_on(Backend::Cuda, n, 256, s, worker, x, y);
      expect_same(c, g);
    }
  }
}

// Shuffles and barriers: the prelude's fibers against the GPU.
const char* kReduce = R"(#include "kl.cuh"
__global__ void block_sum(kl::Tensor<float> x, kl::Tensor<float> out, int n) {
  __shared__ float partial[32];
  const int t = threadIdx.x;
  const int64_t i = kl::program_id() * blockDim.x + t;
  float v = x.load(i, i < n, 0.0f);
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (t % 32 == 0) partial[t / 32] = v;
  __syncthreads();
  if (t < 32) {
    float w = t < int(blockDim.x) / 32 ? partial[t] : 0.0f;
    for (int o = 16; o > 0; o /= 2) w += __shfl_down_sync(0xffffffffu, w, o);
    if (t == 0) out.store(kl::program_id(), w);
  }
}
)";

TEST(EditableNvrtcGpu, ShufflesAndBarriersAgreeWithTheCpuPrelude) {
  KL_REQUIRE_CUDA();
  const int block = 512, grid = 7, n = block * grid - 3;
  const std::vector<float> x = test::random_small_ints(size_t(n));
  std::vector<std::vector<float>> got;
  for (Backend b : {Backend::Cpu, Backend::Cuda}) {
    Buffer<float> dx(b, size_t(n)), dout(b, grid);
    dx.upload(x);
    dout.fill_bytes(0xFF);
    editable::Launch l;
    l.kernel = "block_sum";
    l.grid.x = grid;
    l.block.x = block;
    l.args = {editable::tensor("x", DType::F32, dx.data(), n, false),
              editable::tensor("out", DType::F32, dout.data(), grid, true), editable::i32("n", n)};
    const editable::Source s{"", "reduce.cu", kReduce};
    EXPECT_EQ(editable::run_in_process(b, &s, l).kind, editable::Fault::None);
    got.push_back(dout.to_host());
  }
  EXPECT_EQ(0, std::memcmp(got[0].data(), got[1].data(), grid * 4));
  for (int p = 0; p < grid; ++p) EXPECT_FALSE(std::isnan(got[1][size_t(p)])) << p;
}

TEST(EditableNvrtcGpu, AnIllegalAddressEndsTheWorkerNotTheApp) {
  KL_REQUIRE_CUDA();
  const char* wild = R"(#include "kl.cuh"
__global__ void wild(kl::Tensor<float> out) { *(out.data + (int64_t(1) << 40)) = 1.0f; }
)";
  Buffer<float> out(Backend::Cuda, 4);
  editable::Launch l;
  l.kernel = "wild";
  l.args = {editable::tensor("out", DType::F32, out.data(), 4, true)};
  const editable::Source s{"", "wild.cu", wild};
  const editable::Fault f = editable::launch(Backend::Cuda, &s, l);
  EXPECT_TRUE(f.kind == editable::Fault::DeviceFault || f.kind == editable::Fault::Crash) << f.text();
  // The app's own context is untouched: the shipped kernel still runs here, and a fresh worker too.
  const std::vector<float> x = test::random_small_ints(500), y = test::random_small_ints(500);
  const Outcome shipped = vector_add_on(Backend::Cuda, 500, 128, nullptr, false, x, y);
  for (size_t i = 0; i < 500; ++i) ASSERT_EQ(shipped.out[i], x[i] + y[i]) << i;
  const editable::Source ok = edited();
  const Outcome again = vector_add_on(Backend::Cuda, 500, 128, &ok, true, x, y);
  EXPECT_EQ(again.fault.kind, editable::Fault::None) << again.fault.text();
  expect_same(shipped, again);
}

}  // namespace
}  // namespace kl
