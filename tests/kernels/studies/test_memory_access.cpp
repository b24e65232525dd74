// kernels/studies/memory_access.*: sectors per request of every rung's main loads and stores, from its own
// traced kernel's access logs, against counts worked out by hand from the kernels' indexing; the same on
// the CUDA backend (skipped without a device); refusals become a sentence, a failed launch an exception.
#include <gtest/gtest.h>

#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/fault.h"
#include "kernels/studies/attention_study.h"
#include "kernels/studies/flash_attention_backward_study.h"
#include "kernels/studies/flash_attention_study.h"
#include "kernels/studies/memory_access.h"
#include "kernels/studies/study.h"
#include "test_util.h"

namespace kl {
namespace {

namespace ma = study::memory_access;

ParamValues settings(const std::string& panel, std::vector<std::string> sets = {}) {
  const study::Entry* e = study::find(panel);
  EXPECT_NE(e, nullptr) << panel;
  ParamValues v(e->params());
  for (const std::string& s : sets) v.set(s);
  return v;
}

const ma::TensorAccess* find(const ma::Summary& s, const std::string& tensor, bool store) {
  for (const ma::TensorAccess& a : s.accesses)
    if (a.tensor == tensor && a.store == store) return &a;
  return nullptr;
}

void expect(const ma::Summary& s, const std::string& tensor, bool store, int64_t requests, double spr) {
  const ma::TensorAccess* a = find(s, tensor, store);
  ASSERT_NE(a, nullptr) << s.panel << " " << tensor << (store ? " stores" : " loads") << "\n" << s.line << s.error;
  EXPECT_EQ(a->requests, requests) << s.panel << " " << tensor;
  EXPECT_DOUBLE_EQ(a->sectors_per_request, spr) << s.panel << " " << tensor;
  EXPECT_FALSE(a->overflow);
}

TEST(MemoryAccess, VectorAddAndDropoutAreCoalesced) {
  for (Backend b : test::backends()) {
    // n = 1000, BLOCK_SIZE 256: program 0 is 256 threads, 8 warps, one load of x, y and a store each.
    const ma::Summary v = ma::summarize("vector-add", b, settings("vector-add"));
    EXPECT_TRUE(v.error.empty()) << v.error;
    expect(v, "x", false, 8, 4.0);
    expect(v, "y", false, 8, 4.0);
    expect(v, "out", true, 8, 4.0);
    EXPECT_EQ(v.line, "sectors per request, program 0 (256 elements): x loads 4, y loads 4, out stores 4");
    // n = 65536, BLOCK_SIZE 1024: 32 warps.
    const ma::Summary r = ma::summarize("relu-dropout", b, settings("relu-dropout"));
    expect(r, "x", false, 32, 4.0);
    expect(r, "out", true, 32, 4.0);
    // A tail: n = 40 with BLOCK_SIZE 32... program 0 is whole; n = 20: 20 lanes, 3 sectors (80 bytes).
    const ma::Summary t = ma::summarize("vector-add", b, settings("vector-add", {"n=20", "block_size=32"}));
    expect(t, "x", false, 1, 3.0);
    EXPECT_EQ(t.line, "sectors per request, program 0 (20 elements): x loads 3, y loads 3, out stores 3");
  }
}

TEST(MemoryAccess, SoftmaxRowsAreCoalescedButTheRowsEnd) {
  // n_cols 2000, fixed: BLOCK_SIZE 2048 on 256 threads, 8 columns each (t + 256 j). 64 requests, of which the
  // last warp's last (columns 2016..2047) has no lane inside the row and 1984..2015 has 16: 63 issued, 62 x 4
  // sectors + 2 = 250.
  const ma::Summary s = ma::summarize("softmax", Backend::Cpu, settings("softmax"));
  expect(s, "x", false, 63, 250.0 / 63.0);
  expect(s, "out", true, 63, 250.0 / 63.0);
  EXPECT_DOUBLE_EQ(find(s, "x", false)->ideal_per_request, 250.0 / 63.0);
  EXPECT_EQ(s.kernel, "softmax_traced");
  EXPECT_EQ(s.line, "sectors per request, program 0 of fixed (one row of 2000 columns): x loads 4, out stores 4");
  const ma::Summary o = ma::summarize("softmax", Backend::Cpu, settings("softmax", {"view=online", "n_cols=1024"}));
  EXPECT_EQ(o.kernel, "softmax_online_traced");
  // chunk 256 on 128 threads: x read twice per chunk and once more at the end: 3 x 4 chunks x 2 per thread, 4 warps.
  expect(o, "x", false, 3 * 4 * 2 * 4, 4.0);
}

TEST(MemoryAccess, AttentionsKAndVLoadsAreCoalesced) {
  // Lk 20, d 32: 640 floats of K on 256 threads: loads at t, t + 256, t + 512 (t < 128): 8 + 8 + 4 warp requests.
  const ma::Summary a = ma::summarize("attention", Backend::Cpu, settings("attention"));
  EXPECT_TRUE(a.error.empty()) << a.error;
  expect(a, "k", false, 20, 4.0);
  expect(a, "v", false, 20, 4.0);
  EXPECT_TRUE(a.tma.empty());
  // Past the wall the kernel cannot run: the sentence says why.
  const ma::Summary w = ma::summarize("attention", Backend::Cpu, settings("attention", {"lk=4096", "d=128"}));
  EXPECT_TRUE(w.accesses.empty());
  EXPECT_NE(w.error.find("shared memory"), std::string::npos) << w.error;
}

TEST(MemoryAccess, FlashAttentionTilesAndHowTheFastKernelsLoad) {
  // Lk 96 in tiles of 16 keys, d 32: 512 floats a tile on 128 threads, 4 loads each: 16 requests a tile, 6 tiles.
  const ma::Summary f = ma::summarize("flash-attention", Backend::Cpu, settings("flash-attention"));
  EXPECT_TRUE(f.error.empty()) << f.error;
  expect(f, "k", false, 96, 4.0);
  expect(f, "v", false, 96, 4.0);
  EXPECT_NE(f.tma.find("TMA"), std::string::npos);
  const ma::Summary g = ma::summarize("backward", Backend::Cpu, settings("backward"));
  EXPECT_TRUE(g.error.empty()) << g.error;
  EXPECT_NE(find(g, "k", false), nullptr) << g.line;
  const ma::TensorAccess* dq = find(g, "dq", true);
  ASSERT_NE(dq, nullptr) << g.line;
  EXPECT_TRUE(dq->atomic);  // dQ is added atomically: "dq adds"
  EXPECT_NE(g.line.find("dq adds 4"), std::string::npos) << g.line;
  for (const ma::TensorAccess& a : g.accesses) EXPECT_DOUBLE_EQ(a.sectors_per_request, a.ideal_per_request) << a.tensor;
  // Rung 6's fast default brings Q and dO by TMA and adds dQ by bulk reduce-adds (it once said "no TMA").
  EXPECT_NE(g.tma.find(std::string("(") + flash_attention_backward::kFastBackwardDefaultSm90 + ") brings each step's Q_i "
                       "and dO_i in by TMA"),
            std::string::npos)
      << g.tma;
  EXPECT_NE(g.tma.find("bulk tensor reduce-adds"), std::string::npos) << g.tma;
  EXPECT_EQ(g.tma.find("no TMA"), std::string::npos) << g.tma;
}

TEST(MemoryAccess, ARefusalIsASentenceAFailedLaunchIsThrown) {
  fault::arm("launch:1");  // the next launch fails as a failed CUDA launch would
  EXPECT_THROW(ma::summarize("vector-add", Backend::Cpu, settings("vector-add")), RuntimeError);
  fault::arm("");
  const ma::Summary s = ma::summarize("vector-add", Backend::Cpu, settings("vector-add"));
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_FALSE(s.line.empty());
}

TEST(MemoryAccess, OtherPanelsHaveNothingToSay) {
  const ma::Summary s = ma::summarize("measure", Backend::Cpu, ParamValues());
  EXPECT_TRUE(s.accesses.empty());
  EXPECT_TRUE(s.line.empty());
  EXPECT_TRUE(s.error.empty());
}

TEST(MemoryAccess, TheGpuCountsTheSame) {
  KL_REQUIRE_CUDA();
  for (const char* panel : {"vector-add", "relu-dropout", "softmax", "attention", "flash-attention", "backward"}) {
    const ma::Summary c = ma::summarize(panel, Backend::Cpu, settings(panel));
    const ma::Summary g = ma::summarize(panel, Backend::Cuda, settings(panel));
    EXPECT_EQ(c.line, g.line) << panel;
    ASSERT_EQ(c.accesses.size(), g.accesses.size()) << panel;
    for (size_t i = 0; i < c.accesses.size(); ++i) {
      EXPECT_EQ(c.accesses[i].requests, g.accesses[i].requests) << panel << " " << c.accesses[i].tensor;
      EXPECT_DOUBLE_EQ(c.accesses[i].sectors_per_request, g.accesses[i].sectors_per_request) << panel;
    }
  }
}

}  // namespace
}  // namespace kl
