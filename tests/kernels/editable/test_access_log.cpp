// The tracer's access logs (kl.cuh: Tensor::access, kl::Shared; kernels/runtime/trace.h: AccessLog): a
// kernel of known access patterns, compiled at run time, records per lane what kernels/runtime/warp_access.h
// turns into the hand-computed sectors and conflict degrees, on the CPU backend and (skipped without a
// device) the CUDA one, in this process and through the worker; the shipped transpose's logs are the same
// on both backends, for one chosen program and for every program; a full log says so.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/editable/launch.h"
#include "kernels/rungs/transpose.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/trace.h"
#include "kernels/runtime/warp_access.h"
#include "test_util.h"

namespace kl {
namespace {

using editable::DType;
using namespace warp_access;

const void* const kEnv = test::use_worker_binary();

// One warp; each line one warp-wide request with a known cost.
const char* kPatterns = R"(#include "kl.cuh"
__global__ void patterns(kl::Tensor<float> a, kl::Tensor<float> out, kl::Tensor<uint32_t> smem_log) {
  __shared__ float flat[32][32];
  __shared__ float padded[32][33];
  kl::Shared f(flat, smem_log);
  kl::Shared p(padded, smem_log);
  const int L = threadIdx.x;
  float s = a.load(L);            // unit stride: 4 sectors, 1 line
  s += a.load(2 * L);             // stride 2: 8 sectors, 2 lines
  s += a.load(32 * L);            // stride 32: 32 sectors, 32 lines
  s += a.load(0);                 // broadcast: 1 sector
  s += a.load(L, L < 8, 0.0f);    // 8 lanes: 1 sector
  f.store(0, L, s);               // a row: no conflict
  f.store(L, 0, s);               // a column: 32-way
  __syncthreads();
  s += f.load(2 * L / 32, 2 * L % 32);  // stride 2: 2-way
  s += f.load(0, 0);                    // broadcast: no conflict
  p.store(L, 3, s);                     // a padded column: no conflict
  out.store(L, s);
  a.atomic_add(5 * L, 1.0f);            // an atomic add, lanes 20 bytes apart: 20 sectors, 5 lines
}
)";

struct Recorded {
  std::vector<Request> global, shared;
  bool overflow = false;
};

Recorded run_patterns(Backend b, bool through_worker) {
  const editable::Source src{"transpose", "patterns.cu", kPatterns};
  std::vector<float> host(32 * 32 + 1, 1.0f);
  Buffer<float> a(b, host.size()), out(b, 32);
  a.upload(host);
  AccessLog ga, go, sm;
  ga.reset(b, 0, 1, 32, 8);
  go.reset(b, 0, 1, 32, 8);
  sm.reset(b, 0, 1, 32, 8);
  editable::Launch l;
  l.rung = "transpose";
  l.kernel = "patterns";
  l.block.x = 32;
  l.args = {editable::tensor("a", DType::F32, a.data(), int64_t(host.size()), false),
            editable::tensor("out", DType::F32, out.data(), 32, true),
            editable::tensor("smem_log", DType::U32, sm.data(), sm.size() * 2, true)};
  l.args[0].tensor.access = ga.data();
  l.args[0].tensor.access_words = ga.size();
  const editable::Fault f = through_worker ? editable::launch(b, &src, l) : editable::run_in_process(b, &src, l);
  EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
  Recorded r;
  const Log g = decode(ga.to_host()), s = decode(sm.to_host());
  r.global = g.requests;
  r.shared = s.requests;
  r.overflow = g.overflow || s.overflow;
  return r;
}

void expect_hand_computed(const Recorded& r, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_FALSE(r.overflow);
  ASSERT_EQ(r.global.size(), 6u);
  const int sectors[] = {4, 8, 32, 1, 1, 20}, lines[] = {1, 2, 32, 1, 1, 5};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(r.global[i].store, i == 5) << i;
    EXPECT_EQ(r.global[i].atomic, i == 5) << i;
    EXPECT_EQ(global_cost(r.global[i]).sectors, sectors[i]) << i;
    EXPECT_EQ(global_cost(r.global[i]).lines, lines[i]) << i;
  }
  EXPECT_EQ(r.global[4].active, 0xFFu);  // the masked load: lanes 0..7 took part
  ASSERT_EQ(r.shared.size(), 5u);
  const int degree[] = {1, 32, 2, 1, 1};
  const bool store[] = {true, true, false, false, true};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.shared[i].store, store[i]) << i;
    EXPECT_EQ(shared_cost(r.shared[i]).degree, degree[i]) << i;
  }
  EXPECT_EQ(r.shared[4].offset[31], (31 * 33 + 3) * 4);  // padded[31][3]
}

bool same(const std::vector<Request>& a, const std::vector<Request>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].program != b[i].program || a[i].warp != b[i].warp || a[i].index != b[i].index ||
        a[i].store != b[i].store || a[i].atomic != b[i].atomic || a[i].bytes != b[i].bytes || a[i].active != b[i].active)
      return false;
    for (int l = 0; l < kWarpSize; ++l)
      if (((a[i].active >> l) & 1u) && a[i].offset[l] != b[i].offset[l]) return false;
  }
  return true;
}

TEST(AccessLog, KnownPatternsGiveTheHandComputedCostsOnTheCpu) {
  expect_hand_computed(run_patterns(Backend::Cpu, false), "cpu, in process");
  expect_hand_computed(run_patterns(Backend::Cpu, true), "cpu, worker");
}

TEST(AccessLog, KnownPatternsGiveTheHandComputedCostsOnTheGpu) {
  KL_REQUIRE_CUDA();
  const Recorded gpu = run_patterns(Backend::Cuda, false);
  expect_hand_computed(gpu, "cuda, in process");
  expect_hand_computed(run_patterns(Backend::Cuda, true), "cuda, worker");
  const Recorded cpu = run_patterns(Backend::Cpu, false);
  EXPECT_TRUE(same(gpu.global, cpu.global));
  EXPECT_TRUE(same(gpu.shared, cpu.shared));
}

struct TransposeLogs {
  std::vector<Request> in, out, tile;
};

TransposeLogs shipped_transpose(Backend b, transpose::Variant v, int64_t rows, int64_t cols, int64_t program) {
  std::vector<float> host(size_t(rows * cols));
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i);
  Buffer<float> in(b, host.size()), out(b, host.size());
  in.upload(host);
  transpose::TransposeTrace t;
  t.reset(b, rows, cols, program);
  transpose::TransposeTraceView tv = t.view();
  transpose::run(b, v, in.data(), out.data(), rows, cols, &tv);
  std::vector<float> ref(host.size());
  transpose::reference(host.data(), ref.data(), rows, cols);
  EXPECT_TRUE(test::same_bits(out.to_host(), ref));
  return {decode(t.in.to_host()).requests, decode(t.out.to_host()).requests, decode(t.tile.to_host()).requests};
}

TEST(AccessLog, ShippedTransposeRecordsTheChosenProgramOnly) {
  // 64 x 96: 3 x 2 programs; program 4 is (bx 1, by 1). Its 8 warps make 4 loads of in and 4 stores of out.
  const TransposeLogs l = shipped_transpose(Backend::Cpu, transpose::Variant::Naive, 64, 96, 4);
  ASSERT_EQ(l.in.size(), 32u);
  ASSERT_EQ(l.out.size(), 32u);
  EXPECT_TRUE(l.tile.empty());
  for (const Request& r : l.in) {
    EXPECT_EQ(r.program, 4);
    EXPECT_EQ(global_cost(r).sectors, 4);
  }
  for (const Request& r : l.out) EXPECT_EQ(global_cost(r).sectors, 32);
  // Warp 2's first load: row 32 + 2 of in, columns 32..63: byte (34 * 96 + 32) * 4 on lane 0.
  EXPECT_EQ(l.in[2 * 4].warp, 2);
  EXPECT_EQ(l.in[2 * 4].offset[0], (34 * 96 + 32) * 4);
  // Every program: 6 x 32 requests; a ragged edge (70 x 50) masks lanes off.
  const TransposeLogs all = shipped_transpose(Backend::Cpu, transpose::Variant::Padded, 70, 50, kAccessEveryProgram);
  EXPECT_EQ(all.in.size(), 6u * 32u);
  EXPECT_EQ(all.tile.size(), 6u * 64u);
  int partial = 0;
  for (const Request& r : all.in) partial += r.lanes() < 32;
  EXPECT_GT(partial, 0);
  EXPECT_EQ(shared_totals(all.tile, Kind::Load).max_degree, 1);
}

TEST(AccessLog, ShippedTransposeLogsAreTheSameOnBothBackends) {
  KL_REQUIRE_CUDA();
  for (transpose::Variant v : transpose::kVariants) {
    const TransposeLogs c = shipped_transpose(Backend::Cpu, v, 70, 50, kAccessEveryProgram);
    const TransposeLogs g = shipped_transpose(Backend::Cuda, v, 70, 50, kAccessEveryProgram);
    EXPECT_TRUE(same(c.in, g.in)) << transpose::variant_name(v);
    EXPECT_TRUE(same(c.out, g.out)) << transpose::variant_name(v);
    EXPECT_TRUE(same(c.tile, g.tile)) << transpose::variant_name(v);
  }
}

TEST(AccessLog, AFullLogSaysSoAndKeepsTheFirstRecords) {
  // A log given room for 2 records per lane: the naive kernel's 4 loads overflow it, the first 2 are kept.
  const Backend b = Backend::Cpu;
  std::vector<float> host(64 * 64, 2.0f);
  Buffer<float> in(b, host.size()), out(b, host.size());
  in.upload(host);
  AccessLog small;
  small.reset(b, 0, 4, transpose::kThreads, 2);
  transpose::TransposeTraceView tv;
  tv.in = &small;
  transpose::run(b, transpose::Variant::Naive, in.data(), out.data(), 64, 64, &tv);
  const Log log = decode(small.to_host());
  EXPECT_TRUE(log.overflow);
  ASSERT_EQ(log.requests.size(), 8u * 2u);
  EXPECT_EQ(log.requests[1].index, 1);
  EXPECT_EQ(log.requests[1].offset[0], 8 * 64 * 4);  // the warp's second load: row 8
}

}  // namespace
}  // namespace kl
