// Rung 4's editable source (kernels/editable/sources/attention.cu, attention_smem): compiled at run time
// on the CPU it reproduces the shipped build's output and trace (S, P with their states, who stored each
// output element and how often) bit for bit; its gallery bug shows its symptom in the study's numbers
// (through the worker) while the shipped source does not; on a GPU machine the CPU and CUDA traces of the
// unedited source and of the gallery's edit agree: coverage exactly, values within float tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/studies/attention_study.h"
#include "kernels/rungs/attention_inputs.h"
#include "test_util.h"

namespace kl {
namespace {

const void* const kEnv = test::use_worker_binary();

using attention::Shape;

Shape shape(int64_t lq, int64_t lk, int d, int64_t batch = 1, int64_t heads = 1) {
  return test::attention_shape<Shape>(lq, lk, d, batch, heads);
}

editable::Source shipped_copy(const std::string& file = "my_attention.cu") {
  return {"attention", file, editable::shipped_source("attention")};
}

editable::Source gallery_bug(const std::string& name) {
  for (const editable::GalleryBug& b : editable::gallery("attention"))
    if (b.name == name) return {"attention", b.file, b.text};
  ADD_FAILURE() << "no gallery bug " << name;
  return shipped_copy();
}

struct Trace {
  std::vector<float> out, scores, weights;
  std::vector<int32_t> writer;
  std::vector<uint32_t> count;
  editable::Fault fault;
};

// One launch of attention_smem on backend b, in this process: the shipped build (src == nullptr) or src
// compiled here (the host compiler with the CPU prelude, or NVRTC). Every output poisoned first.
Trace run_on(Backend b, const Shape& s, const attention::Options& o, const std::vector<float>& hq,
             const std::vector<float>& hk, const std::vector<float>& hv, const editable::Source* src) {
  Buffer<float> q(b, 0), k(b, 0), v(b, 0), out(b, hq.size());
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
  const size_t cells = size_t(s.bh() * s.lq * s.lk) * 2;
  Buffer<float> sc(b, cells), w(b, cells);
  Buffer<int32_t> writer(b, hq.size());
  Buffer<uint32_t> count(b, hq.size());
  for (Buffer<float>* f : {&out, &sc, &w}) f->fill_bytes(0xFF);
  writer.fill_bytes(0xFF);
  count.fill_bytes(0);
  attention::Extras x;
  x.scores = sc.data();
  x.weights = w.data();
  x.channels = 2;
  x.out_writer = writer.data();
  x.out_count = count.data();
  attention::check_shape(b, s);
  Trace t;
  t.fault = editable::run_in_process(
      b, src, attention::detail::traced_launch(q.data(), k.data(), v.data(), out.data(), s, o.resolved_scale(s.d), o.causal, x));
  t.out = out.to_host();
  t.scores = sc.to_host();
  t.weights = w.to_host();
  t.writer = writer.to_host();
  t.count = count.to_host();
  return t;
}

using test::same_bits;

struct Case {
  Shape s;
  bool causal;
};

const Case kCases[] = {{shape(12, 20, 32), true},       // the panel's causal stop
                       {shape(37, 53, 16), false},      // three programs, a tail block
                       {shape(19, 23, 64, 2, 3), true}, // batch and heads
                       {shape(20, 7, 128), true}};      // rows that see no key

TEST(AttentionSource, UneditedSourceCompiledAtRunTimeReproducesTheShippedTraceBitForBit) {
  const editable::Source src = shipped_copy();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.s.text() + (c.causal ? " causal" : ""));
    attention::Options o;
    o.causal = c.causal;
    const std::vector<float> q = test::random_floats(size_t(c.s.bh() * c.s.lq * c.s.d), -2, 2);
    const std::vector<float> k = test::random_floats(size_t(c.s.bh() * c.s.lk * c.s.d), -2, 2);
    const std::vector<float> v = test::random_floats(size_t(c.s.bh() * c.s.lk * c.s.d));
    const Trace shipped = run_on(Backend::Cpu, c.s, o, q, k, v, nullptr);
    const Trace edited = run_on(Backend::Cpu, c.s, o, q, k, v, &src);
    EXPECT_EQ(shipped.fault.kind, editable::Fault::None) << shipped.fault.text();
    EXPECT_EQ(edited.fault.kind, editable::Fault::None) << edited.fault.text();
    EXPECT_EQ(test::nan_count(shipped.out) + test::nan_count(shipped.weights), 0u);
    EXPECT_TRUE(same_bits(shipped.out, edited.out));
    EXPECT_TRUE(same_bits(shipped.scores, edited.scores));
    EXPECT_TRUE(same_bits(shipped.weights, edited.weights));
    EXPECT_EQ(shipped.writer, edited.writer);
    EXPECT_EQ(shipped.count, edited.count);
    // Every output element stored exactly once, by the program of its query block.
    for (size_t e = 0; e < shipped.count.size(); ++e) {
      const int64_t row = int64_t(e) / c.s.d, bh = row / c.s.lq, i = row % c.s.lq;
      const int64_t q_blocks = (c.s.lq + attention::kBlockQ - 1) / attention::kBlockQ;
      ASSERT_EQ(shipped.count[e], 1u) << "element " << e;
      ASSERT_EQ(shipped.writer[e], int32_t(i / attention::kBlockQ + q_blocks * bh)) << "element " << e;
    }
  }
}

// The gallery's bug for rung 4: its sentence, and its symptom in the study (the worker runs it). The
// panel's defaults (Lq=12, Lk=20, d=32, magnitude 2, seed 1).
TEST(AttentionSource, GalleryForgottenScaleShowsInTheStudy) {
  const std::vector<editable::GalleryBug> bugs = editable::gallery("attention");
  ASSERT_EQ(bugs.size(), 1u);
  EXPECT_EQ(bugs[0].name, "no scale");
  EXPECT_NE(bugs[0].sentence.find("1/sqrt(d)"), std::string::npos) << bugs[0].sentence;
  ParamValues p(attention_study::params());
  const editable::Source bug = gallery_bug("no scale");
  const attention_study::Result r = attention_study::run(Backend::Cpu, p, {}, &bug);
  ASSERT_TRUE(r.ran) << r.run_error;
  EXPECT_TRUE(r.edited);
  EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
  EXPECT_FALSE(r.check.ok) << r.check.text;
  // The sentence's numbers: a relative error of 1.4 in the output, P's largest weight 1.00 (shipped 0.68).
  EXPECT_GT(r.err, 1.0) << "the output misses the reference by far more than rounding";
  EXPECT_GT(r.werr, 1.0);
  double p_max = 0;
  for (size_t c = 0; c < r.hw.size(); c += 2) p_max = std::max(p_max, double(r.hw[c]));
  EXPECT_GT(p_max, 0.99);
  EXPECT_TRUE(r.rowsum.ok) << "P is still a softmax: its rows sum to 1 (" << r.rowsum.text << ")";
  const study::Report rep = attention_study::report(r);
  EXPECT_EQ(rep.numbers.at("fault"), 0);
  // The shipped source at the same settings shows none of it.
  const attention_study::Result ok = attention_study::run(Backend::Cpu, p, {}, nullptr);
  EXPECT_TRUE(ok.check.ok) << ok.check.text;
  EXPECT_LT(ok.err, 1e-5);
  double ok_max = 0;
  for (size_t c = 0; c < ok.hw.size(); c += 2) ok_max = std::max(ok_max, double(ok.hw[c]));
  EXPECT_NEAR(ok_max, 0.68, 0.005);
  EXPECT_FALSE(ok.edited);
  EXPECT_FALSE(attention_study::report(ok).numbers.contains("fault"));
}

// An out-of-bounds load in an edited kernel is located and reported by the study, not a crash.
TEST(AttentionSource, AnEditedOutOfBoundsLoadIsLocatedInTheStudy) {
  editable::Source src = shipped_copy("wide_k.cu");
  const std::string from = "Ks[idx] = k.load(bh * lk * d + idx);";
  const size_t at = src.text.find(from);
  ASSERT_NE(at, std::string::npos);
  src.text.replace(at, from.size(), "Ks[idx] = k.load(bh * lk * d + idx + d);  // one key too far");
  ParamValues p(attention_study::params());
  const attention_study::Result r = attention_study::run(Backend::Cpu, p, {}, &src);
  ASSERT_EQ(r.fault.kind, editable::Fault::OutOfBounds) << r.fault.text();
  EXPECT_EQ(r.fault.tensor, "k");
  EXPECT_FALSE(r.fault.store);
  EXPECT_EQ(r.fault.index, 20 * 32);  // K is [Lk=20, d=32]: the first index past it
  EXPECT_FALSE(r.check.ok);
  EXPECT_EQ(r.check.text.rfind("edited kernel: out-of-bounds load from k[640] (size 640)", 0), 0u) << r.check.text;
  const study::Report rep = attention_study::report(r);
  EXPECT_EQ(rep.numbers.at("fault"), 1);
}

// The CPU prelude's shuffles (kernels/editable/kl_cpu.h), as attention_smem's warp_sum uses them: lanes
// released from an exchange resume one after the other, so lane 0 may have returned before lane 1 reads
// lane 0's value; it must still get it. (An odd number of lanes with p = 1 makes the even and odd lanes'
// partial sums differ at the last xor step, where lane 1 reads lane 0.)
TEST(AttentionSource, PreludeShuffleReadsALaneThatHasAlreadyReturned) {
  const editable::Source src{"", "warp_sum.cu", R"(#include "kl.cuh"
__global__ void warp_sums(kl::Tensor<float> out, int ones) {
  float x = threadIdx.x % 32 < ones ? 1.0f : 0.0f;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  out.store(threadIdx.x, x);
}
)"};
  for (int ones : {1, 15, 16, 31}) {
    std::vector<float> out(64, -1.0f);
    editable::Launch l;
    l.kernel = "warp_sums";
    l.block.x = 64;
    l.args = {editable::tensor("out", editable::DType::F32, out.data(), 64, true), editable::i32("ones", ones)};
    const editable::Fault f = editable::run_in_process(Backend::Cpu, &src, l);
    ASSERT_EQ(f.kind, editable::Fault::None) << f.text();
    for (int t = 0; t < 64; ++t) ASSERT_EQ(out[size_t(t)], float(ones)) << "ones " << ones << ", thread " << t;
  }
}

// NVRTC compiles without a GPU: the shipped source and the gallery's edit build for the CUDA backend on
// every machine with the toolkit (the host compiler's build of both runs in the tests above).
TEST(AttentionSource, NvrtcCompilesTheShippedSourceAndTheGalleryBug) {
  if (!cuda_compiled()) GTEST_SKIP() << "built without CUDA";
  const editable::Source shipped{"attention", "nv_shipped.cu", editable::shipped_source("attention")};
  EXPECT_NO_THROW(editable::compile(Backend::Cuda, shipped));
  EXPECT_NO_THROW(editable::compile(Backend::Cuda, gallery_bug("no scale")));
}

// On the GPU machine: the CPU prelude and the CUDA build of the same source (shipped, and the gallery's
// edit compiled by the host compiler and by NVRTC) store the same elements the same number of times, by
// the same programs; the values agree to float tolerance, not bit for bit, because expf on the CPU
// (glibc) and on the GPU (CUDA's libdevice) round differently in the last ulp or two.
TEST(AttentionSource, CpuAndCudaTracesAgreeUneditedAndEdited) {
  KL_REQUIRE_CUDA();
  const editable::Source bug = gallery_bug("no scale");
  for (const editable::Source* src : {static_cast<const editable::Source*>(nullptr), &bug}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(src ? "edited " : "shipped ") + c.s.text() + (c.causal ? " causal" : ""));
      attention::Options o;
      o.causal = c.causal;
      const std::vector<float> q = test::random_floats(size_t(c.s.bh() * c.s.lq * c.s.d), -2, 2);
      const std::vector<float> k = test::random_floats(size_t(c.s.bh() * c.s.lk * c.s.d), -2, 2);
      const std::vector<float> v = test::random_floats(size_t(c.s.bh() * c.s.lk * c.s.d));
      const Trace cpu = run_on(Backend::Cpu, c.s, o, q, k, v, src);
      const Trace gpu = run_on(Backend::Cuda, c.s, o, q, k, v, src);
      EXPECT_EQ(cpu.fault.kind, editable::Fault::None) << cpu.fault.text();
      EXPECT_EQ(gpu.fault.kind, editable::Fault::None) << gpu.fault.text();
      EXPECT_EQ(cpu.writer, gpu.writer);
      EXPECT_EQ(cpu.count, gpu.count);
      std::vector<double> ref_out(cpu.out.begin(), cpu.out.end()), ref_w, ref_s;
      for (size_t i = 0; i < cpu.weights.size(); ++i) {
        if (i % 2 == 1) {  // the state channel: exact
          ASSERT_EQ(cpu.weights[i], gpu.weights[i]) << i;
          ASSERT_EQ(cpu.scores[i], gpu.scores[i]) << i;
          continue;
        }
        ref_w.push_back(cpu.weights[i]);
        // -inf where masked, on both: compared exactly, the rest by relative norm
        if (std::isinf(cpu.scores[i]) || std::isinf(gpu.scores[i])) ASSERT_EQ(cpu.scores[i], gpu.scores[i]) << i;
      }
      std::vector<float> gw;
      for (size_t i = 0; i < gpu.weights.size(); i += 2) gw.push_back(gpu.weights[i]);
      EXPECT_LT(test::rel_err(gpu.out, ref_out), 1e-5);
      EXPECT_LT(test::rel_err(gw, ref_w), 1e-5);
    }
  }
}

}  // namespace
}  // namespace kl
