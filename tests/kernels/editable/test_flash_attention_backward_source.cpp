// Rung 6's editable source (kernels/editable/sources/flash_attention_backward.cu, backward_teaching):
// compiled at run time on the CPU it reproduces the shipped build's dQ, dK, dV and its whole trace (tile
// states, the traced program's P, dS, dK_j, dV_j per step, the chosen query tile's dQ contributions, who
// stored each gradient element and how often) bit for bit; dQ's atomic adds on the CPU run in program
// order, so two runs agree bit for bit; its gallery bug shows its symptom in the study (through the
// worker) while the shipped source does not; on a GPU machine the CPU and CUDA traces of the unedited
// source and of the gallery's edit agree: coverage exactly, values within float tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/runtime/buffer.h"
#include "kernels/studies/flash_attention_backward_study.h"
#include "kernels/rungs/attention_inputs.h"
#include "test_util.h"

namespace kl {
namespace {

namespace fab = flash_attention_backward;
using fab::Shape;

const void* const kEnv = test::use_worker_binary();

constexpr const char* kRung = "flash-attention-backward";

Shape shape(int64_t lq, int64_t lk, int d, int64_t batch = 1, int64_t heads = 1) {
  return test::attention_shape<Shape>(lq, lk, d, batch, heads);
}

editable::Source gallery_bug(const std::string& name) {
  for (const editable::GalleryBug& b : editable::gallery(kRung))
    if (b.name == name) return {kRung, b.file, b.text};
  ADD_FAILURE() << "no gallery bug " << name;
  return {kRung, "missing.cu", editable::shipped_source(kRung)};
}

// Inputs and the forward's O and L (rung 5's teaching forward on the CPU) and D = rowsum(dO ∘ O): fixed
// host data, so the CPU and CUDA launches below see the same bytes.
struct Inputs {
  Shape s;
  fab::Options o;
  int bm = 0, bn = 0;
  std::vector<float> q, k, v, dout, lse, drow;
};

Inputs make_inputs(const Shape& s, bool causal, int bm, int bn) {
  Inputs in;
  in.s = s;
  in.o.causal = causal;
  in.bm = bm;
  in.bn = bn;
  in.q = test::random_floats(size_t(s.bh() * s.lq * s.d));
  in.k = test::random_floats(size_t(s.bh() * s.lk * s.d));
  in.v = test::random_floats(size_t(s.bh() * s.lk * s.d));
  in.dout = test::random_floats(size_t(s.bh() * s.lq * s.d));
  std::vector<float> o(in.q.size());
  in.lse.resize(size_t(s.bh() * s.lq));
  fab::forward(Backend::Cpu, in.q.data(), in.k.data(), in.v.data(), o.data(), in.lse.data(), s, in.o, bm, bn);
  in.drow.resize(in.lse.size());
  for (size_t r = 0; r < in.drow.size(); ++r) {
    float acc = 0;
    for (int c = 0; c < s.d; ++c) acc += in.dout[r * size_t(s.d) + size_t(c)] * o[r * size_t(s.d) + size_t(c)];
    in.drow[r] = acc;
  }
  return in;
}

struct Grads {
  std::vector<float> dq, dk, dv;
  std::vector<int32_t> dq_writer, dk_writer, dv_writer;
  std::vector<uint32_t> dq_count, dk_count, dv_count;
  std::vector<uint8_t> tile_state;
  std::vector<float> p, ds, dk_partial, dv_partial, dq_contrib;
  editable::Fault fault;
};

// One launch of backward_teaching on backend b, in this process (the shipped build, or src compiled
// here), traced at program (0, kv) and query tile q_tile; the gradients' writers and counts recorded too.
Grads run_on(Backend b, const Inputs& in, int64_t kv, int64_t q_tile, const editable::Source* src) {
  const Shape& s = in.s;
  Buffer<float> q(b, 0), k(b, 0), v(b, 0), dout(b, 0), lse(b, 0), drow(b, 0);
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  dout.upload(in.dout);
  lse.upload(in.lse);
  drow.upload(in.drow);
  Buffer<float> dq(b, in.q.size()), dk(b, in.k.size()), dv(b, in.v.size());
  dq.fill_bytes(0);  // accumulated
  dk.fill_bytes(0xFF);
  dv.fill_bytes(0xFF);
  Buffer<int32_t> wq(b, in.q.size()), wk(b, in.k.size()), wv(b, in.v.size());
  Buffer<uint32_t> cq(b, in.q.size()), ck(b, in.k.size()), cv(b, in.v.size());
  for (Buffer<int32_t>* w : {&wq, &wk, &wv}) w->fill_bytes(0xFF);
  for (Buffer<uint32_t>* c : {&cq, &ck, &cv}) c->fill_bytes(0);
  fab::BackwardTrace t;
  t.reset(b, s, in.bm, in.bn, 0, kv, q_tile);
  fab::BackwardTraceView tv = t.view();
  editable::Launch l = fab::detail::teaching_launch(q.data(), k.data(), v.data(), lse.data(), drow.data(), dout.data(),
                                                    dq.data(), dk.data(), dv.data(), s, in.o.resolved_scale(s.d),
                                                    in.o.causal, in.bm, in.bn, &tv);
  // The gradients' tensors are arguments 6, 7, 8 (dq, dk, dv): their stores recorded here.
  if (l.args.size() < 9 || l.args[6].tensor.name != "dq" || l.args[8].tensor.name != "dv")
    throw std::logic_error("backward_teaching's arguments moved");
  l.args[6].tensor.writer = wq.data(), l.args[6].tensor.count = cq.data();
  l.args[7].tensor.writer = wk.data(), l.args[7].tensor.count = ck.data();
  l.args[8].tensor.writer = wv.data(), l.args[8].tensor.count = cv.data();
  Grads g;
  g.fault = editable::run_in_process(b, src, l);
  g.dq = dq.to_host(), g.dk = dk.to_host(), g.dv = dv.to_host();
  g.dq_writer = wq.to_host(), g.dk_writer = wk.to_host(), g.dv_writer = wv.to_host();
  g.dq_count = cq.to_host(), g.dk_count = ck.to_host(), g.dv_count = cv.to_host();
  g.tile_state = t.tile_state.to_host();
  g.p = t.p_tile.to_host(), g.ds = t.ds_tile.to_host();
  g.dk_partial = t.dk_partial.to_host(), g.dv_partial = t.dv_partial.to_host();
  g.dq_contrib = t.dq_contrib.to_host();
  return g;
}

using test::same_bits;

struct Case {
  Shape s;
  bool causal;
  int bm, bn;
  int64_t kv, q_tile;
};

const Case kCases[] = {{shape(96, 128, 32), true, 32, 32, 1, 2},      // the panel's defaults
                       {shape(45, 61, 16, 1, 2), false, 16, 32, 1, 2},  // tails in both directions, 2 heads
                       {shape(70, 50, 64), true, 32, 16, 0, 0},       // Lq > Lk: rows that see no key
                       {shape(37, 53, 128), false, 16, 16, 3, 1}};

// The per-element coverage every run must show: dK and dV stored once each; dQ's rows added to by every
// program whose keys they see, once per program.
void expect_coverage(const Case& c, const Grads& g) {
  const Shape& s = c.s;
  const int64_t k_blocks = (s.lk + c.bn - 1) / c.bn;
  for (size_t e = 0; e < g.dk_count.size(); ++e) {
    ASSERT_EQ(g.dk_count[e], 1u) << "dk " << e;
    ASSERT_EQ(g.dv_count[e], 1u) << "dv " << e;
    ASSERT_EQ(g.dk_writer[e], int32_t((int64_t(e) / s.d % s.lk) / c.bn + k_blocks * (int64_t(e) / s.d / s.lk)));
  }
  for (size_t e = 0; e < g.dq_count.size(); ++e) {
    const int64_t i = int64_t(e) / s.d % s.lq, qb = i / c.bm;
    int64_t adds = 0;  // programs that computed query tile qb
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      bool any = false;
      for (int64_t r = qb * c.bm; r < std::min<int64_t>(s.lq, (qb + 1) * c.bm); ++r)
        any = any || attention::visible_keys(r, s.lq, s.lk, c.causal) > kb * c.bn;
      adds += any;
    }
    ASSERT_EQ(g.dq_count[e], uint32_t(adds)) << "dq " << e;
  }
}

TEST(FlashAttentionBackwardSource, UneditedSourceCompiledAtRunTimeReproducesTheShippedTraceBitForBit) {
  const editable::Source src{kRung, "my_backward.cu", editable::shipped_source(kRung)};
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.s.text() + (c.causal ? " causal" : "") + " tiles " + std::to_string(c.bm) + "x" + std::to_string(c.bn));
    const Inputs in = make_inputs(c.s, c.causal, c.bm, c.bn);
    const Grads shipped = run_on(Backend::Cpu, in, c.kv, c.q_tile, nullptr);
    const Grads edited = run_on(Backend::Cpu, in, c.kv, c.q_tile, &src);
    const Grads again = run_on(Backend::Cpu, in, c.kv, c.q_tile, nullptr);
    ASSERT_EQ(shipped.fault.kind, editable::Fault::None) << shipped.fault.text();
    ASSERT_EQ(edited.fault.kind, editable::Fault::None) << edited.fault.text();
    EXPECT_EQ(test::nan_count(shipped.dq) + test::nan_count(shipped.dk) + test::nan_count(shipped.dv), 0u);
    for (const std::vector<float>* f : {&shipped.p, &shipped.ds, &shipped.dk_partial, &shipped.dv_partial, &shipped.dq_contrib})
      EXPECT_EQ(test::nan_count(*f), 0u) << "every step of the traced program recorded";
    for (uint8_t st : shipped.tile_state) EXPECT_TRUE(st == fab::kTileComputed || st == fab::kTileSkipped);
    for (const Grads* g : {&edited, &again}) {
      EXPECT_TRUE(same_bits(shipped.dq, g->dq)) << "dQ: the CPU's atomic adds run in program order";
      EXPECT_TRUE(same_bits(shipped.dk, g->dk));
      EXPECT_TRUE(same_bits(shipped.dv, g->dv));
      EXPECT_EQ(shipped.tile_state, g->tile_state);
      EXPECT_TRUE(same_bits(shipped.p, g->p));
      EXPECT_TRUE(same_bits(shipped.ds, g->ds));
      EXPECT_TRUE(same_bits(shipped.dk_partial, g->dk_partial));
      EXPECT_TRUE(same_bits(shipped.dv_partial, g->dv_partial));
      EXPECT_TRUE(same_bits(shipped.dq_contrib, g->dq_contrib));
      EXPECT_EQ(shipped.dq_writer, g->dq_writer);
      EXPECT_EQ(shipped.dq_count, g->dq_count);
      EXPECT_EQ(shipped.dk_writer, g->dk_writer);
      EXPECT_EQ(shipped.dv_count, g->dv_count);
    }
    expect_coverage(c, shipped);
  }
}

// The gallery's bug for rung 6, through the study at the panel's defaults (the worker runs it).
TEST(FlashAttentionBackwardSource, GalleryDsWithoutDShowsInTheStudy) {
  const std::vector<editable::GalleryBug> bugs = editable::gallery(kRung);
  ASSERT_EQ(bugs.size(), 1u);
  EXPECT_EQ(bugs[0].name, "ds without d");
  EXPECT_NE(bugs[0].sentence.find("dV still matches"), std::string::npos) << bugs[0].sentence;
  EXPECT_NE(bugs[0].sentence.find("0.20 and 0.14"), std::string::npos) << bugs[0].sentence;
  ParamValues p(flash_attention_backward_study::params());
  const editable::Source bug = gallery_bug("ds without d");
  const flash_attention_backward_study::Result r = flash_attention_backward_study::run(Backend::Cpu, p, &bug);
  EXPECT_TRUE(r.edited);
  EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
  EXPECT_LT(r.dv_rel, r.tolerance) << "dV = P^T dO never uses dS";
  EXPECT_GT(r.dq_rel, 0.15);  // the sentence's numbers: 0.20 and 0.14
  EXPECT_LT(r.dq_rel, 0.25);
  EXPECT_GT(r.dk_rel, 0.1);
  EXPECT_LT(r.dk_rel, 0.2);
  EXPECT_LT(r.p_max_abs_diff, 1e-6) << "P is recomputed as before";
  const study::Report rep = flash_attention_backward_study::report(r);
  bool teaching = true, fold = true;
  for (const study::Check& c : rep.checks) {
    if (c.name == "teaching_matches_reference") teaching = c.pass;
    if (c.name == "partials_fold_to_the_result") fold = c.pass;
  }
  EXPECT_FALSE(teaching);
  EXPECT_FALSE(fold) << "dK_j after the last query tile misses the reference";
  EXPECT_EQ(rep.numbers.at("fault"), 0);
  EXPECT_EQ(rep.lines.back(), "kernel: " + bug.file + " (edited)");
  // The shipped source at the same settings passes.
  const flash_attention_backward_study::Result ok = flash_attention_backward_study::run(Backend::Cpu, p, nullptr);
  EXPECT_LT(ok.dq_rel, ok.tolerance);
  EXPECT_LT(ok.dk_rel, ok.tolerance);
  EXPECT_FALSE(ok.edited);
  EXPECT_FALSE(flash_attention_backward_study::report(ok).numbers.contains("fault"));
}

// An edited kernel's out-of-bounds store is located and reported by the study.
TEST(FlashAttentionBackwardSource, AnEditedOutOfBoundsStoreIsLocatedInTheStudy) {
  editable::Source src{kRung, "unmasked_dk.cu", editable::shipped_source(kRung)};
  const std::string from = "dk.store((kv * lk + j) * d + idx % d, dKs[idx], j < lk);";
  const size_t at = src.text.find(from);
  ASSERT_NE(at, std::string::npos);
  src.text.replace(at, from.size(), "dk.store((kv * lk + j) * d + idx % d, dKs[idx]);  // the mask is gone");
  ParamValues p(flash_attention_backward_study::params());
  p.set("lk=120");  // the last K/V tile (keys 96..127) runs past Lk = 120
  const flash_attention_backward_study::Result r = flash_attention_backward_study::run(Backend::Cpu, p, &src);
  ASSERT_EQ(r.fault.kind, editable::Fault::OutOfBounds) << r.fault.text();
  EXPECT_EQ(r.fault.text(), "out-of-bounds store to dk[3840] (size 3840) by program 3, lane 0");
  const study::Report rep = flash_attention_backward_study::report(r);
  EXPECT_EQ(rep.numbers.at("fault"), 1);
  EXPECT_EQ(rep.lines.back(), "edited kernel: " + r.fault.text());
}

// NVRTC compiles without a GPU: the shipped source and the gallery's edit build for the CUDA backend on
// every machine with the toolkit (the host compiler's build of both runs in the tests above).
TEST(FlashAttentionBackwardSource, NvrtcCompilesTheShippedSourceAndTheGalleryBug) {
  if (!cuda_compiled()) GTEST_SKIP() << "built without CUDA";
  const editable::Source shipped{kRung, "nv_shipped.cu", editable::shipped_source(kRung)};
  EXPECT_NO_THROW(editable::compile(Backend::Cuda, shipped));
  EXPECT_NO_THROW(editable::compile(Backend::Cuda, gallery_bug("ds without d")));
}

// On the GPU machine: the CPU prelude and the CUDA build of the same source (shipped, and the gallery's
// edit compiled by the host compiler and by NVRTC) record the same tile states and store the same
// elements as often; dK and dV by the same programs. dQ's writer (the last program to add) is not
// compared: on CUDA the atomic adds land in any order. Values agree to float tolerance, not bit for bit:
// expf rounds differently on the two (glibc, libdevice), and CUDA's dQ sums in the order the adds land.
TEST(FlashAttentionBackwardSource, CpuAndCudaTracesAgreeUneditedAndEdited) {
  KL_REQUIRE_CUDA();
  const editable::Source bug = gallery_bug("ds without d");
  for (const editable::Source* src : {static_cast<const editable::Source*>(nullptr), &bug}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(src ? "edited " : "shipped ") + c.s.text() + (c.causal ? " causal" : ""));
      const Inputs in = make_inputs(c.s, c.causal, c.bm, c.bn);
      const Grads cpu = run_on(Backend::Cpu, in, c.kv, c.q_tile, src);
      const Grads gpu = run_on(Backend::Cuda, in, c.kv, c.q_tile, src);
      ASSERT_EQ(cpu.fault.kind, editable::Fault::None) << cpu.fault.text();
      ASSERT_EQ(gpu.fault.kind, editable::Fault::None) << gpu.fault.text();
      EXPECT_EQ(cpu.tile_state, gpu.tile_state);
      EXPECT_EQ(cpu.dq_count, gpu.dq_count);
      EXPECT_EQ(cpu.dk_writer, gpu.dk_writer);
      EXPECT_EQ(cpu.dv_writer, gpu.dv_writer);
      EXPECT_EQ(cpu.dk_count, gpu.dk_count);
      expect_coverage(c, gpu);
      auto wide = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
      for (auto [got, ref] : {std::pair{&gpu.dq, &cpu.dq}, {&gpu.dk, &cpu.dk}, {&gpu.dv, &cpu.dv}, {&gpu.p, &cpu.p},
                              {&gpu.ds, &cpu.ds}, {&gpu.dk_partial, &cpu.dk_partial},
                              {&gpu.dv_partial, &cpu.dv_partial}, {&gpu.dq_contrib, &cpu.dq_contrib}})
        EXPECT_LT(test::rel_err(*got, wide(*ref)), 1e-5);
    }
  }
}

}  // namespace
}  // namespace kl
