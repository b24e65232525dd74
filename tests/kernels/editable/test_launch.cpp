// kernels/editable/launch.* and compile.* on the CPU backend, in process: the shipped vector-add source
// compiled at run time reproduces the shipped build's trace bit for bit; the tracing API locates an
// out-of-bounds store exactly and performs none; the host compiler's errors come back at the user's
// file and line; constructs the prelude does not run are named at their line; a changed signature is
// refused in words; the prelude's fibers run barriers, shared memory and warp shuffles, and report
// threads waiting at different barriers as a deadlock; a shipped kernel's blocks spread over CPU threads
// (KL_CPU_THREADS) give what they give in order, bit for bit, faults included.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <regex>

#include <sched.h>

#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/editable/launch_detail.h"
#include "kernels/rungs/attention.h"
#include "kernels/rungs/vector_add.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/trace.h"
#include "test_util.h"
#include "vector_add_outcome.h"

namespace kl {
namespace {

using editable::DType;

using Outcome = test::VectorAddOutcome;

Outcome vector_add_on(Backend b, const std::vector<float>& x, const std::vector<float>& y, int block,
                      const editable::Source* src) {
  // In this process (the worker's own path; tests/kernels/editable/test_worker.cpp covers the worker).
  return test::traced_vector_add(b, int64_t(x.size()), block, x, y,
                                 [&](const float* dx, const float* dy, float* dout, int64_t n, int bs, ElementTraceView* v) {
                                   if (src) return editable::run_in_process(b, src, vector_add::detail::traced_launch(dx, dy, dout, n, bs, v));
                                   return vector_add::run_traced(b, dx, dy, dout, n, bs, v, nullptr);
                                 });
}

editable::Source shipped_copy(const std::string& edit_from = "", const std::string& edit_to = "") {
  return test::shipped_copy("vector-add", "my_vector_add.cu", edit_from, edit_to);
}

TEST(EditableLaunch, ShippedSourceIsEmbedded) {
  const std::string text = editable::shipped_source("vector-add");
  EXPECT_NE(text.find("__global__ void vector_add_traced("), std::string::npos);
  EXPECT_NE(text.find("#include \"kl.cuh\""), std::string::npos);
  EXPECT_EQ(editable::shipped_file("vector-add"), "vector_add.cu");
  EXPECT_TRUE(editable::shipped_source("no-such-rung").empty());
  EXPECT_NE(editable::embedded_header("kl.cuh").find("struct Tensor"), std::string::npos);
  EXPECT_NE(editable::embedded_header("kl_cpu.h").find("__syncthreads"), std::string::npos);
}

TEST(EditableLaunch, UneditedSourceCompiledAtRunTimeReproducesTheShippedTrace) {
  const editable::Source src = shipped_copy();
  for (int block : {32, 256, 4096}) {
    for (int64_t n : {int64_t(1), int64_t(block) + 1, int64_t(1000)}) {
      SCOPED_TRACE("block=" + std::to_string(block) + " n=" + std::to_string(n));
      const std::vector<float> x = test::random_floats(size_t(n)), y = test::random_floats(size_t(n));
      const Outcome shipped = vector_add_on(Backend::Cpu, x, y, block, nullptr);
      const Outcome edited = vector_add_on(Backend::Cpu, x, y, block, &src);
      EXPECT_EQ(edited.fault.kind, editable::Fault::None) << edited.fault.text();
      EXPECT_EQ(0, std::memcmp(shipped.out.data(), edited.out.data(), size_t(n) * 4));
      EXPECT_EQ(shipped.writer, edited.writer);
      EXPECT_EQ(shipped.count, edited.count);
      EXPECT_EQ(shipped.lanes, edited.lanes);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(edited.out[size_t(i)], x[size_t(i)] + y[size_t(i)]) << i;
    }
  }
}

TEST(EditableLaunch, WithoutTheMaskTheFirstOutOfBoundsStoreIsLocatedAndNotPerformed) {
  // The load masks go too: the first fault is then the load of x past its end.
  const editable::Source loads = shipped_copy("x.load(offset, mask, 0.0f)", "x.load(offset)");
  const editable::Source stores = shipped_copy("out.store(offset, a + b, mask)", "out.store(offset, a + b)");
  const int64_t n = 1000;
  const int block = 256;
  const std::vector<float> x = test::random_small_ints(n), y = test::random_small_ints(n);
  const Outcome l = vector_add_on(Backend::Cpu, x, y, block, &loads);
  ASSERT_EQ(l.fault.kind, editable::Fault::OutOfBounds) << l.fault.text();
  EXPECT_FALSE(l.fault.store);
  EXPECT_EQ(l.fault.tensor, "x");
  EXPECT_EQ(l.fault.index, 1000);
  EXPECT_EQ(l.fault.size, 1000);
  EXPECT_EQ(l.fault.program, 3);
  EXPECT_EQ(l.fault.lane, 1000 - 3 * 256);
  EXPECT_EQ(l.fault.text(), "out-of-bounds load from x[1000] (size 1000) by program 3, lane 232");

  // Poisoned guard elements past `out`'s end stay untouched: the faulty stores were not performed.
  Buffer<float> dx(Backend::Cpu, n), dy(Backend::Cpu, n), dout(Backend::Cpu, n + 64);
  dx.upload(x);
  dy.upload(y);
  dout.fill_bytes(0xFF);
  ElementTrace t;
  t.reset(Backend::Cpu, n, block);
  ElementTraceView v = t.view();
  const editable::Fault f = editable::run_in_process(
      Backend::Cpu, &stores, vector_add::detail::traced_launch(dx.data(), dy.data(), dout.data(), n, block, &v));
  ASSERT_EQ(f.kind, editable::Fault::OutOfBounds) << f.text();
  EXPECT_EQ(f.text(), "out-of-bounds store to out[1000] (size 1000) by program 3, lane 232");
  const std::vector<float> got = dout.to_host();
  for (int64_t i = n; i < n + 64; ++i) ASSERT_TRUE(std::isnan(got[size_t(i)])) << "stored past the end at " << i;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], x[size_t(i)] + y[size_t(i)]) << i;
}

std::vector<editable::Diagnostic> compile_errors(Backend b, const editable::Source& s) {
  try {
    editable::compile(b, s);
  } catch (const editable::CompileError& e) {
    return e.diagnostics;
  }
  ADD_FAILURE() << "compiled";
  return {};
}

using test::line_of;

TEST(EditableCompile, HostCompilerErrorsAtTheUsersFileAndLine) {
  editable::Source s = shipped_copy("const float b = y.load(offset, mask, 0.0f);", "const float b = y.lod(offset, mask, 0.0f);");
  const int line = line_of(s.text, "y.lod(");
  const std::vector<editable::Diagnostic> d = compile_errors(Backend::Cpu, s);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].file, "my_vector_add.cu");
  EXPECT_EQ(d[0].line, line);
  EXPECT_GT(d[0].col, 1);
  EXPECT_NE(d[0].message.find("lod"), std::string::npos) << d[0].message;
  EXPECT_TRUE(std::regex_match(d[0].text(), std::regex(R"(my_vector_add\.cu:\d+:\d+: error: .*)"))) << d[0].text();

  editable::Source undeclared = shipped_copy("out.store(offset, a + b, mask);", "out.store(offset, a + c, mask);");
  const std::vector<editable::Diagnostic> d2 = compile_errors(Backend::Cpu, undeclared);
  ASSERT_FALSE(d2.empty());
  EXPECT_EQ(d2[0].line, line_of(undeclared.text, "a + c"));
  EXPECT_NE(d2[0].message.find("'c'"), std::string::npos) << d2[0].message;
}

TEST(EditableCompile, UnsupportedConstructsAreNamedAtTheirLine) {
  editable::Source s = shipped_copy("const float b = y.load(offset, mask, 0.0f);",
                                    "float b = y.load(offset, mask, 0.0f);\n    asm volatile(\"\" ::: \"memory\");\n"
                                    "    __nanosleep(100);");
  const std::vector<editable::Diagnostic> d = compile_errors(Backend::Cpu, s);
  ASSERT_EQ(d.size(), 2u);
  bool asm_seen = false, sleep_seen = false;
  for (const editable::Diagnostic& x : d) {
    if (x.message.find("asm") != std::string::npos) {
      asm_seen = true;
      EXPECT_EQ(x.line, line_of(s.text, "asm volatile"));
      EXPECT_EQ(x.col, 5);
    }
    if (x.message.find("__nanosleep") != std::string::npos) {
      sleep_seen = true;
      EXPECT_EQ(x.line, line_of(s.text, "__nanosleep"));
    }
    EXPECT_NE(x.message.find("not supported by the CPU prelude"), std::string::npos) << x.message;
  }
  EXPECT_TRUE(asm_seen && sleep_seen);
}

TEST(EditableCompile, AChangedSignatureOrAMissingKernelIsRefusedInWords) {
  const editable::Source s = shipped_copy("int64_t n, int BLOCK_SIZE", "int n, int BLOCK_SIZE");
  const std::vector<float> x(100, 1.0f);
  try {
    vector_add_on(Backend::Cpu, x, x, 32, &s);
    FAIL() << "ran";
  } catch (const editable::CompileError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("my_vector_add.cu:"), std::string::npos) << m;
    EXPECT_NE(m.find("int64_t n"), std::string::npos) << m;
  }
  const editable::Source renamed = shipped_copy("__global__ void vector_add_traced(", "__global__ void vector_add_traced2(");
  try {
    vector_add_on(Backend::Cpu, x, x, 32, &renamed);
    FAIL() << "ran";
  } catch (const editable::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("no __global__ function named vector_add_traced"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("vector_add_traced2"), std::string::npos) << e.what();
  }
}

// A block reduction through static and dynamic shared memory, __syncthreads and warp shuffles.
const char* kReduce = R"(#include "kl.cuh"
__global__ void block_sum(kl::Tensor<float> x, kl::Tensor<float> out, kl::Tensor<float> by_shuffle, int n) {
  __shared__ float partial[32];
  extern __shared__ float tile[];
  const int t = threadIdx.x;
  const int64_t i = kl::program_id() * blockDim.x + t;
  tile[t] = x.load(i, i < n, 0.0f);
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) tile[t] += tile[t + s];
    __syncthreads();
  }
  if (t == 0) out.store(kl::program_id(), tile[0]);
  float v = x.load(i, i < n, 0.0f);
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (t % 32 == 0) partial[t / 32] = v;
  __syncthreads();
  if (t == 0) {
    float s = 0;
    for (int w = 0; w < int(blockDim.x) / 32; ++w) s += partial[w];
    by_shuffle.store(kl::program_id(), s);
  }
}
)";

TEST(EditablePrelude, BarriersSharedMemoryAndShufflesRunAsOnTheGpu) {
  const int block = 256, grid = 5, n = block * grid - 17;
  const std::vector<float> x = test::random_small_ints(size_t(n));
  std::vector<float> out(grid, NAN), shfl(grid, NAN);
  editable::Source s{"", "reduce.cu", kReduce};
  editable::Launch l;
  l.kernel = "block_sum";
  l.grid.x = grid;
  l.block.x = block;
  l.shared_bytes = block * 4;
  l.args = {editable::tensor("x", DType::F32, const_cast<float*>(x.data()), n, false),
            editable::tensor("out", DType::F32, out.data(), grid, true),
            editable::tensor("by_shuffle", DType::F32, shfl.data(), grid, true), editable::i32("n", n)};
  const editable::Fault f = editable::run_in_process(Backend::Cpu, &s, l);
  EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
  for (int p = 0; p < grid; ++p) {
    double want = 0;
    for (int i = p * block; i < std::min(n, (p + 1) * block); ++i) want += x[size_t(i)];
    EXPECT_EQ(out[size_t(p)], float(want)) << p;
    EXPECT_EQ(shfl[size_t(p)], float(want)) << p;
  }
}

TEST(EditablePrelude, ThreadsAtDifferentBarriersAreADeadlock) {
  const char* text = R"(#include "kl.cuh"
__global__ void split(kl::Tensor<float> out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out.store(threadIdx.x, 1.0f);
}
)";
  std::vector<float> out(64, 0);
  editable::Source s{"", "split.cu", text};
  editable::Launch l;
  l.kernel = "split";
  l.block.x = 64;
  l.args = {editable::tensor("out", DType::F32, out.data(), 64, true)};
  const editable::Fault f = editable::run_in_process(Backend::Cpu, &s, l);
  ASSERT_EQ(f.kind, editable::Fault::Deadlock) << f.text();
  EXPECT_NE(f.text().find("different barriers"), std::string::npos) << f.text();
  EXPECT_NE(f.text().find("line 4"), std::string::npos) << f.text();
  EXPECT_NE(f.text().find("line 6"), std::string::npos) << f.text();
  // Two barriers on one line are still two barriers.
  editable::Source one_line{"", "split1.cu",
                            "#include \"kl.cuh\"\n__global__ void split(kl::Tensor<float> out) {\n"
                            "  if (threadIdx.x < 32) { __syncthreads(); } else { __syncthreads(); }\n"
                            "  out.store(threadIdx.x, 1.0f);\n}\n"};
  EXPECT_EQ(editable::run_in_process(Backend::Cpu, &one_line, l).kind, editable::Fault::Deadlock);
  // Threads that returned do not hold the others at a barrier (as on the GPU): no deadlock.
  editable::Source early{"", "early.cu",
                         "#include \"kl.cuh\"\n__global__ void split(kl::Tensor<float> out) {\n"
                         "  if (threadIdx.x >= 40) return;\n  __syncthreads();\n  out.store(threadIdx.x, 1.0f);\n}\n"};
  std::fill(out.begin(), out.end(), 0.0f);
  EXPECT_EQ(editable::run_in_process(Backend::Cpu, &early, l).kind, editable::Fault::None);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[size_t(i)], i < 40 ? 1.0f : 0.0f) << i;
}

// KL_CPU_THREADS for one scope.
struct CpuThreads {
  explicit CpuThreads(const char* n) { setenv("KL_CPU_THREADS", n, 1); }
  ~CpuThreads() { unsetenv("KL_CPU_THREADS"); }
};

TEST(EditablePrelude, CpuThreadsIsCheckedAndNamedWhenBad) {
  for (const char* bad : {"0", "257", "x", "4x", "-1"}) {
    CpuThreads t(bad);
    try {
      editable::detail::cpu_threads();
      ADD_FAILURE() << bad << " was taken";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("KL_CPU_THREADS=") + bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[1, 256]"), std::string::npos) << e.what();
    }
  }
  {
    CpuThreads t("3");
    EXPECT_EQ(editable::detail::cpu_threads(), 3);
  }
  // Unset: the CPUs this process may run on, at most 8.
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(editable::detail::cpu_threads(), std::min(CPU_COUNT(&set), 8));
}

// The shipped vector add (no fibers) over 1, 2, 3 and 8 threads: the same output and trace, bit for bit.
TEST(EditablePrelude, ShippedBlocksOverThreadsGiveTheInOrderResult) {
  const int64_t n = 100003;
  const std::vector<float> x = test::random_floats(size_t(n)), y = test::random_floats(size_t(n));
  Outcome one;
  {
    CpuThreads t("1");
    one = vector_add_on(Backend::Cpu, x, y, 256, nullptr);
  }
  for (const char* threads : {"2", "3", "8"}) {
    SCOPED_TRACE(std::string("threads=") + threads);
    CpuThreads t(threads);
    const Outcome many = vector_add_on(Backend::Cpu, x, y, 256, nullptr);
    EXPECT_EQ(many.fault.kind, editable::Fault::None) << many.fault.text();
    EXPECT_EQ(0, std::memcmp(one.out.data(), many.out.data(), size_t(n) * 4));
    EXPECT_EQ(one.writer, many.writer);
    EXPECT_EQ(one.count, many.count);
    EXPECT_EQ(one.lanes, many.lanes);
  }
}

// Rung 4's shipped kernel (fibers: barriers and shuffles in every block) over threads: O, S, P and the
// output trace equal the in-order run's, bit for bit, causal and not.
TEST(EditablePrelude, ShippedFiberBlocksOverThreadsGiveTheInOrderResult) {
  attention::Shape s;
  s.batch = 2, s.heads = 3, s.lq = 77, s.lk = 130, s.d = 32;
  const size_t nq = size_t(s.bh() * s.lq * s.d), nk = size_t(s.bh() * s.lk * s.d), cells = size_t(s.bh() * s.lq * s.lk);
  const std::vector<float> q = test::random_floats(nq), k = test::random_floats(nk), v = test::random_floats(nk);
  struct Run {
    std::vector<float> out, scores, weights;
    std::vector<int32_t> writer;
    std::vector<uint32_t> count;
  };
  auto run = [&](const char* threads, bool causal) {
    CpuThreads t(threads);
    Run r{std::vector<float>(nq), std::vector<float>(cells * 2), std::vector<float>(cells * 2),
          std::vector<int32_t>(nq, -1), std::vector<uint32_t>(nq, 0)};
    attention::Options o;
    o.causal = causal;
    attention::Extras e;
    e.scores = r.scores.data(), e.weights = r.weights.data(), e.channels = 2;
    e.out_writer = r.writer.data(), e.out_count = r.count.data();
    const editable::Fault f = attention::run(Backend::Cpu, q.data(), k.data(), v.data(), r.out.data(), s, o, e);
    EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
    return r;
  };
  for (bool causal : {false, true}) {
    const Run one = run("1", causal);
    for (const char* threads : {"2", "5"}) {
      SCOPED_TRACE(std::string("threads=") + threads + (causal ? " causal" : ""));
      const Run many = run(threads, causal);
      EXPECT_EQ(0, std::memcmp(one.out.data(), many.out.data(), nq * 4));
      EXPECT_EQ(0, std::memcmp(one.scores.data(), many.scores.data(), cells * 8));
      EXPECT_EQ(0, std::memcmp(one.weights.data(), many.weights.data(), cells * 8));
      EXPECT_EQ(one.writer, many.writer);
      EXPECT_EQ(one.count, many.count);
    }
  }
}

// A fault in several blocks at once (the shipped vector add told `out` holds 300 of its n elements): over
// threads, the launch reports the fault of the lowest program, as the in-order run does, every time; the
// stores past 300 are not performed.
TEST(EditablePrelude, ShippedFaultOverThreadsIsTheLowestProgramsFirst) {
  const int64_t n = 20000;
  const int block = 256;
  const std::vector<float> x = test::random_floats(size_t(n)), y = test::random_floats(size_t(n));
  Buffer<float> dx(Backend::Cpu, size_t(n)), dy(Backend::Cpu, size_t(n)), dout(Backend::Cpu, size_t(n));
  dx.upload(x);
  dy.upload(y);
  for (const char* threads : {"1", "4"})
    for (int rep = 0; rep < (std::string(threads) == "1" ? 1 : 20); ++rep) {
      SCOPED_TRACE(std::string("threads=") + threads + " rep " + std::to_string(rep));
      CpuThreads t(threads);
      dout.fill_bytes(0xFF);
      ElementTrace tr;
      tr.reset(Backend::Cpu, n, block);
      ElementTraceView tv = tr.view();
      editable::Launch l = vector_add::detail::traced_launch(dx.data(), dy.data(), dout.data(), n, block, &tv);
      for (editable::Arg& a : l.args)
        if (a.is_tensor && a.tensor.name == "out") a.tensor.size = 300;
      const editable::Fault f = editable::run_in_process(Backend::Cpu, nullptr, l);
      ASSERT_EQ(f.kind, editable::Fault::OutOfBounds) << f.text();
      ASSERT_EQ(f.text(), "out-of-bounds store to out[300] (size 300) by program 1, lane 44");
      const std::vector<float> got = dout.to_host();
      for (int64_t i = 300; i < n; ++i) ASSERT_TRUE(std::isnan(got[size_t(i)])) << "stored past the size at " << i;
    }
}

}  // namespace
}  // namespace kl
