// Rungs 2 (ReLU + dropout) and 3 (softmax) as editable sources (kernels/editable/sources/relu_dropout.cu,
// softmax.cu): the unedited sources compiled at run time reproduce the shipped traces bit for bit on the
// CPU; each gallery bug shows its symptom in the study's numbers (and the shipped source does not); on a
// device, CPU and CUDA traces of the unedited and an edited source agree, and the missing __syncthreads
// races.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/rungs/softmax.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/relu_dropout_study.h"
#include "kernels/studies/softmax_study.h"
#include "test_util.h"

namespace kl {
namespace {

namespace rd = relu_dropout;
using softmax::Variant;

const void* const kEnv = test::use_worker_binary();

editable::Source copy_of(const std::string& rung, const std::string& from = "", const std::string& to = "") {
  return test::shipped_copy(rung, "edited.cu", from, to);
}

editable::GalleryBug bug(const std::string& rung, const std::string& file) {
  for (const editable::GalleryBug& g : editable::gallery(rung))
    if (g.file == file) return g;
  ADD_FAILURE() << "no gallery bug " << file << " for " << rung;
  return {};
}

// ---- rung 2 ----------------------------------------------------------------------------------------------
struct Dropout {
  std::vector<float> out;
  std::vector<uint8_t> keep, lanes;
  std::vector<int32_t> writer;
  std::vector<uint32_t> count;
  editable::Fault fault;
};

// in_process: the edited source compiled here (no worker), else through editable::launch (the worker).
Dropout dropout_on(Backend b, const std::vector<float>& x, double p, uint64_t seed, int block,
                   const editable::Source* src, bool in_process = false) {
  const int64_t n = int64_t(x.size());
  Buffer<float> dx(b, x.size()), dout(b, x.size());
  dx.upload(x);
  dout.fill_bytes(0xFF);
  rd::DropoutTrace t;
  t.reset(b, n, block);
  rd::DropoutTraceView v = t.view();
  Dropout o;
  if (in_process)
    o.fault = editable::run_in_process(b, src, rd::detail::traced_launch(dx.data(), dout.data(), n, p, seed, block, &v));
  else
    o.fault = rd::run_traced(b, dx.data(), dout.data(), n, p, seed, block, &v, src);
  o.out = dout.to_host();
  o.keep = t.keep.to_host();
  o.lanes = t.elements.lane_state.to_host();
  o.writer = t.elements.writer.to_host();
  o.count = t.elements.write_count.to_host();
  return o;
}

void expect_same(const Dropout& a, const Dropout& b) {
  ASSERT_EQ(a.out.size(), b.out.size());
  EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4));
  EXPECT_EQ(a.keep, b.keep);
  EXPECT_EQ(a.lanes, b.lanes);
  EXPECT_EQ(a.writer, b.writer);
  EXPECT_EQ(a.count, b.count);
}

TEST(EditableReluDropout, UneditedSourceCompiledAtRunTimeReproducesTheShippedTrace) {
  const editable::Source src = copy_of("relu-dropout");
  EXPECT_NE(src.text.find("__global__ void relu_dropout_traced("), std::string::npos);
  for (int block : {32, 1024, 4096}) {
    for (int64_t n : {int64_t(1), int64_t(block) + 3, int64_t(5000)}) {
      SCOPED_TRACE("block=" + std::to_string(block) + " n=" + std::to_string(n));
      const std::vector<float> x = test::random_floats(size_t(n));
      const Dropout shipped = dropout_on(Backend::Cpu, x, 0.3, 77, block, nullptr);
      const Dropout edited = dropout_on(Backend::Cpu, x, 0.3, 77, block, &src, true);
      EXPECT_EQ(edited.fault.kind, editable::Fault::None) << edited.fault.text();
      expect_same(shipped, edited);
      // And the shipped trace is the fused kernel's bits and the reference's mask.
      Buffer<float> dx(Backend::Cpu, x.size()), df(Backend::Cpu, x.size());
      dx.upload(x);
      rd::run_fused(Backend::Cpu, dx.data(), df.data(), n, 0.3, 77, block);
      const std::vector<float> fused = df.to_host();
      EXPECT_EQ(0, std::memcmp(fused.data(), shipped.out.data(), fused.size() * 4));
      std::vector<float> ref(x.size());
      std::vector<uint8_t> keep(x.size());
      rd::reference(x.data(), ref.data(), keep.data(), n, 0.3, 77);
      EXPECT_EQ(keep, shipped.keep);
    }
  }
}

TEST(EditableReluDropout, RunRefusesASourceForTheFusedVariant) {
  const KernelEntry e = rd::entry();
  KernelRunRequest r;
  r.backend = Backend::Cpu;
  r.variant = "fused";
  r.inputs["x"] = Array{{8}, std::vector<float>(8, 1.0f)};
  r.params = ParamValues(e.params);
  const editable::Source src = copy_of("relu-dropout");
  r.source = &src;
  EXPECT_THROW(e.run(r), InputError);
}

ParamValues dropout_settings() {
  ParamValues v(study::relu_dropout_params());
  v.set("n=16384");
  v.set("p=0.5");
  return v;
}

TEST(EditableReluDropout, GalleryScaleByPMovesTheSurvivorHistogram) {
  const std::vector<editable::GalleryBug> bugs = editable::gallery("relu-dropout");
  ASSERT_EQ(bugs.size(), 1u);
  EXPECT_FALSE(bugs[0].sentence.empty());
  const ParamValues v = dropout_settings();
  const study::ReluDropoutResult shipped = study::run_relu_dropout(Backend::Cpu, v, nullptr);
  EXPECT_TRUE(shipped.matches_reference.pass) << shipped.matches_reference.sentence;
  EXPECT_GT(shipped.survivors, 1000);
  EXPECT_EQ(shipped.in_spike, shipped.survivors);  // every survivor at 1/(1-p) = 2

  const editable::Source src{"relu-dropout", bugs[0].file, bugs[0].text};
  const study::ReluDropoutResult r = study::run_relu_dropout(Backend::Cpu, v, &src);
  EXPECT_TRUE(r.edited);
  EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
  EXPECT_EQ(r.survivors, shipped.survivors);  // the mask is unchanged: the same elements survive
  EXPECT_EQ(r.dropped, shipped.dropped);
  EXPECT_EQ(r.in_spike, 0);                   // nothing left at 1/(1-p) = 2 ...
  ASSERT_EQ(r.hist.size(), size_t(study::kDropoutBins));
  EXPECT_DOUBLE_EQ(r.bin_centres[1], 0.5);
  EXPECT_EQ(int64_t(r.hist[1]), r.survivors);  // ... every survivor at p = 0.5
  EXPECT_FALSE(r.matches_reference.pass);
  EXPECT_FALSE(r.bit_for_bit.pass);
  EXPECT_NE(r.hist_title.find("the fullest bin is centred on 0.5"), std::string::npos) << r.hist_title;
  EXPECT_EQ(study::relu_dropout_report(r).numbers.at("fault"), 0);
}

// ---- rung 3 ----------------------------------------------------------------------------------------------
struct Softmax {
  std::vector<float> out;
  std::vector<int32_t> writer;
  std::vector<uint32_t> count;
  editable::Fault fault;
};

Softmax softmax_on(Backend b, Variant v, const std::vector<float>& x, int64_t rows, int64_t n,
                   const editable::Source* src, bool in_process = false) {
  Buffer<float> dx(b, x.size()), dout(b, x.size());
  dx.upload(x);
  dout.fill_bytes(0xFF);
  softmax::SoftmaxTrace t;
  t.reset(b, rows, n);
  softmax::SoftmaxTraceView tv = t.view();
  Softmax o;
  if (in_process)
    o.fault = editable::run_in_process(b, src, softmax::detail::traced_launch(v, dx.data(), dout.data(), rows, n, &tv));
  else
    o.fault = softmax::run(b, v, dx.data(), dout.data(), rows, n, &tv, softmax::kDefaultChunk, nullptr, src);
  o.out = dout.to_host();
  o.writer = t.writer.to_host();
  o.count = t.write_count.to_host();
  return o;
}

TEST(EditableSoftmax, UneditedSourceCompiledAtRunTimeReproducesTheShippedTrace) {
  const editable::Source src = copy_of("softmax");
  EXPECT_NE(src.text.find("__global__ void softmax_traced("), std::string::npos);
  for (Variant v : {Variant::Buggy, Variant::Fixed}) {
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(1024), int64_t(2000)}) {
      SCOPED_TRACE(std::string(softmax::variant_name(v)) + " n=" + std::to_string(n));
      const int64_t rows = 3;
      const std::vector<float> x = test::random_floats(size_t(rows * n), -4.0f, 4.0f);
      const Softmax shipped = softmax_on(Backend::Cpu, v, x, rows, n, nullptr);
      const Softmax edited = softmax_on(Backend::Cpu, v, x, rows, n, &src, true);
      EXPECT_EQ(edited.fault.kind, editable::Fault::None) << edited.fault.text();
      EXPECT_EQ(0, std::memcmp(shipped.out.data(), edited.out.data(), shipped.out.size() * 4));
      EXPECT_EQ(shipped.writer, edited.writer);
      EXPECT_EQ(shipped.count, edited.count);
      // Which columns it wrote: buggy covers 0..1023 of every row, fixed all; each once, by its row.
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c) {
          const bool written = v == Variant::Fixed || c < softmax::kBuggyBlock;
          ASSERT_EQ(shipped.writer[size_t(r * n + c)], written ? int32_t(r) : -1) << r << "," << c;
          ASSERT_EQ(shipped.count[size_t(r * n + c)], written ? 1u : 0u);
        }
    }
  }
}

TEST(EditableSoftmax, OnlineUneditedSourceReproducesTheShippedTraceAndItsChunkRecords) {
  const editable::Source src = copy_of("softmax");
  EXPECT_NE(src.text.find("__global__ void softmax_online_traced("), std::string::npos);
  const int64_t rows = 3;
  for (int chunk : {32, 256, 4096})
    for (int64_t n : {int64_t(1), int64_t(300), int64_t(2000)}) {
      SCOPED_TRACE("chunk=" + std::to_string(chunk) + " n=" + std::to_string(n));
      const std::vector<float> x = test::random_floats(size_t(rows * n), -4.0f, 4.0f);
      struct Run {
        std::vector<float> out, cmax, m, l;
        std::vector<int32_t> writer;
        std::vector<uint32_t> count;
      };
      auto go = [&](bool edited) {
        Buffer<float> dx(Backend::Cpu, x.size()), dout(Backend::Cpu, x.size());
        dx.upload(x);
        dout.fill_bytes(0xFF);
        softmax::SoftmaxTrace t;
        t.reset(Backend::Cpu, rows, n, 1, chunk);
        softmax::SoftmaxTraceView tv = t.view();
        editable::Fault f;
        if (edited)
          f = editable::run_in_process(Backend::Cpu, &src, softmax::detail::traced_launch(Variant::Online, dx.data(),
                                                                                        dout.data(), rows, n, &tv, chunk));
        else
          f = softmax::run(Backend::Cpu, Variant::Online, dx.data(), dout.data(), rows, n, &tv, chunk);
        EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
        return Run{dout.to_host(), t.chunk_max.to_host(), t.running_max.to_host(), t.running_sum.to_host(),
                   t.writer.to_host(), t.write_count.to_host()};
      };
      const Run a = go(false), b = go(true);
      EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4));
      EXPECT_EQ(0, std::memcmp(a.cmax.data(), b.cmax.data(), a.cmax.size() * 4));
      EXPECT_EQ(0, std::memcmp(a.m.data(), b.m.data(), a.m.size() * 4));
      EXPECT_EQ(0, std::memcmp(a.l.data(), b.l.data(), a.l.size() * 4));
      EXPECT_EQ(a.writer, b.writer);
      EXPECT_EQ(a.count, b.count);
      // The records are row 1's: its last running max is its max.
      const float row_max = *std::max_element(x.begin() + n, x.begin() + 2 * n);
      EXPECT_EQ(a.m.back(), row_max);
      for (float c : a.cmax) EXPECT_LE(c, row_max);
    }
}

TEST(EditableSoftmax, ASourceForThreePassIsRefused) {
  const editable::Source src = copy_of("softmax");
  std::vector<float> x(8, 0.0f), out(8);
  EXPECT_THROW(softmax::run(Backend::Cpu, Variant::ThreePass, x.data(), out.data(), 1, 8, nullptr, 256, nullptr, &src),
               InputError);
}

ParamValues softmax_settings(const std::vector<std::string>& sets) {
  ParamValues v(study::softmax_params());
  v.set("rows=4");
  for (const std::string& s : sets) v.set(s);
  return v;
}

TEST(EditableSoftmax, GalleryHardCodedBlockSizeLeavesColumnsPast1023Unwritten) {
  const ParamValues v = softmax_settings({"n_cols=2000"});
  const study::SoftmaxBug shipped = study::softmax_bug(Backend::Cpu, v, nullptr);
  EXPECT_TRUE(shipped.fixed.pass) << shipped.fixed.sentence;
  EXPECT_EQ(shipped.unwritten_fixed, 0);
  EXPECT_EQ(shipped.unwritten_buggy, 4 * (2000 - 1024));

  const editable::GalleryBug g = bug("softmax", "hard_coded_block_size.cu");
  const editable::Source src{"softmax", g.file, g.text};
  const study::SoftmaxBug r = study::softmax_bug(Backend::Cpu, v, &src);
  EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
  EXPECT_EQ(r.unwritten_fixed, 4 * (2000 - 1024));  // columns >= 1024 never written
  EXPECT_FALSE(r.fixed.pass);
  EXPECT_EQ(r.diff_fixed, shipped.diff_buggy);       // the max abs diff of the study: buggy's
  EXPECT_GT(r.diff_fixed, 1e-4);
  EXPECT_EQ(r.fixed_written, "written (from the trace): columns 0..1023  never written: 1024..1999 (red/black)");
  const study::SoftmaxSweep s = study::softmax_sweep(Backend::Cpu, v, &src);
  for (size_t i = 0; i < s.n_cols.size(); ++i)
    if (s.n_cols[i] > 1024) EXPECT_GT(s.fixed[i], 1e-7) << s.n_cols[i];  // the bug, far above rounding
}

TEST(EditableSoftmax, GalleryNoMaxSubtractionGivesNanAtLargeInputsAndSaysWhere) {
  const editable::GalleryBug g = bug("softmax", "no_max_subtraction.cu");
  const editable::Source src{"softmax", g.file, g.text};
  const ParamValues big = softmax_settings({"n_cols=2000", "x_scale=100"});
  const study::SoftmaxBug shipped = study::softmax_bug(Backend::Cpu, big, nullptr);
  EXPECT_TRUE(shipped.fixed.pass) << shipped.fixed.sentence;  // the max is subtracted: |x| ~ 100 is fine
  EXPECT_EQ(shipped.nonfinite_fixed, 0);
  EXPECT_TRUE(shipped.nonfinite_sentence.empty());

  const study::SoftmaxBug r = study::softmax_bug(Backend::Cpu, big, &src);
  EXPECT_GT(r.nonfinite_fixed, 0);
  EXPECT_FALSE(r.fixed.pass);
  EXPECT_EQ(r.fixed.sentence.rfind("no: ", 0), 0u) << r.fixed.sentence;
  ASSERT_GE(r.first_nonfinite_row, 0);
  const size_t first = size_t(r.first_nonfinite_row * r.n_cols + r.first_nonfinite_col);
  EXPECT_TRUE(std::isnan(r.out_fixed[first]));
  EXPECT_GT(r.first_nonfinite_x, 88.7f);  // exp(x) is inf in float32 past ln(FLT_MAX) = 88.72
  // Every non-finite output is where x itself overflows exp, and only there (the sum is inf: 0 elsewhere).
  int64_t overflowing = 0;
  for (size_t i = 0; i < r.x.size(); ++i) {
    const bool over = std::isinf(std::exp(r.x[i]));
    overflowing += over;
    EXPECT_EQ(std::isnan(r.out_fixed[i]), over) << i;
  }
  EXPECT_EQ(r.nonfinite_fixed, overflowing);
  EXPECT_NE(r.nonfinite_sentence.find("row " + std::to_string(r.first_nonfinite_row) + ", column " +
                                      std::to_string(r.first_nonfinite_col)),
            std::string::npos)
      << r.nonfinite_sentence;
  // At the default scale nothing shows: exp(x) of N(0, 1) draws stays finite.
  const study::SoftmaxBug small = study::softmax_bug(Backend::Cpu, softmax_settings({"n_cols=2000"}), &src);
  EXPECT_EQ(small.nonfinite_fixed, 0);
  EXPECT_LT(small.diff_fixed, 1e-6);
}

// On the CPU the prelude runs a block's fibers in a fixed order: thread 0 runs the whole tree alone before
// any other thread takes its next step, so it combines only the partials of threads 0, 1, 2, 4, ..., T/2
// and every thread reads that. fixed at n_cols = 2000 runs 256 threads (BLOCK_SIZE 2048, 8 warps), so the
// sum is over 9 of 256 threads' partial sums p_t = sum_j exp(x[t + 256 j] - m): each row sums to
// sum_t p_t / sum_{t in {0, 1, 2, 4, ..., 128}} p_t (the max cancels), the same on every run.
TEST(EditableSoftmax, GalleryMissingSyncthreadsIsADeterministicWrongSumOnTheCpu) {
  const editable::GalleryBug g = bug("softmax", "missing_syncthreads.cu");
  const editable::Source src{"softmax", g.file, g.text};
  const ParamValues v = softmax_settings({"n_cols=2000"});
  const study::SoftmaxBug r = study::softmax_bug(Backend::Cpu, v, &src);
  EXPECT_EQ(r.fault.kind, editable::Fault::None) << r.fault.text();
  EXPECT_FALSE(r.fixed.pass);
  EXPECT_EQ(r.unwritten_fixed, 0);  // every element written, once: only the values are wrong
  const int64_t n = 2000, T = 256;
  for (int64_t row = 0; row < r.rows; ++row) {
    double all = 0, seen = 0;
    for (int64_t t = 0; t < T; ++t) {
      double p = 0;
      for (int64_t c = t; c < n; c += T) p += std::exp(double(r.x[size_t(row * n + c)]));
      all += p;
      if (t == 0 || (t & (t - 1)) == 0) seen += p;  // 0 and the powers of two
    }
    EXPECT_NEAR(r.sum_fixed[size_t(row)], all / seen, 1e-3 * all / seen) << row;
    EXPECT_GT(r.sum_fixed[size_t(row)], 10.0);
  }
  EXPECT_NE(r.row_sums_sentence.find("do not sum to 1"), std::string::npos) << r.row_sums_sentence;
  const study::SoftmaxBug again = study::softmax_bug(Backend::Cpu, v, &src);
  EXPECT_EQ(0, std::memcmp(r.out_fixed.data(), again.out_fixed.data(), r.out_fixed.size() * 4))
      << "the CPU prelude's fixed fiber order makes the race deterministic";
  const study::SoftmaxBug shipped = study::softmax_bug(Backend::Cpu, v, nullptr);
  for (double s : shipped.sum_fixed) EXPECT_NEAR(s, 1.0, 1e-5);
}

// The gallery's missing __syncthreads on the sweep: its fixed kernel is wrong past 1024, and the plot's top
// moves above its largest diff instead of cutting the line off at 0.1.
TEST(EditableSoftmax, GalleryMissingSyncthreadsSweepSaysItIsWrongAndPlotsAllOfIt) {
  const editable::GalleryBug g = bug("softmax", "missing_syncthreads.cu");
  const editable::Source src{"softmax", g.file, g.text};
  const study::SoftmaxSweep s = study::softmax_sweep(Backend::Cpu, softmax_settings({}), &src);
  EXPECT_GT(s.fixed_past_max, study::SoftmaxSweep::kRounding);
  EXPECT_EQ(s.sentence.find("fixed one stays at rounding level"), std::string::npos) << s.sentence;
  EXPECT_NE(s.sentence.find("the fixed one is off by up to"), std::string::npos) << s.sentence;
  for (size_t i = 0; i < s.n_cols.size(); ++i)
    for (double v : {s.buggy[i], s.fixed[i]})
      if (std::isfinite(v)) EXPECT_LE(v, s.plot_ceiling) << s.n_cols[i];
}

// ---- on a device ---------------------------------------------------------------------------------------
// relu-dropout has no math function: CPU and CUDA traces are identical, bit for bit. softmax calls expf,
// whose CUDA and glibc versions differ by an ulp or so: writers and counts identical, values within 1e-6.
TEST(EditableRungs23, CpuAndCudaTracesAgreeUneditedAndEdited) {
  KL_REQUIRE_CUDA();
  const std::vector<float> x = test::random_floats(6000);
  const editable::GalleryBug scale = bug("relu-dropout", "scale_by_p.cu");
  const editable::Source scale_src{"relu-dropout", scale.file, scale.text};
  for (const editable::Source* src : {static_cast<const editable::Source*>(nullptr), &scale_src}) {
    SCOPED_TRACE(src ? "scale_by_p.cu" : "shipped");
    for (int block : {32, 1024, 4096}) expect_same(dropout_on(Backend::Cpu, x, 0.3, 5, block, src),
                                                   dropout_on(Backend::Cuda, x, 0.3, 5, block, src));
  }
  const editable::GalleryBug hard = bug("softmax", "hard_coded_block_size.cu");
  const editable::Source hard_src{"softmax", hard.file, hard.text};
  const int64_t rows = 5, n = 2000;
  const std::vector<float> sx = test::random_floats(size_t(rows * n), -4.0f, 4.0f);
  for (const editable::Source* src : {static_cast<const editable::Source*>(nullptr), &hard_src})
    for (Variant v : {Variant::Buggy, Variant::Fixed}) {
      SCOPED_TRACE(std::string(src ? "hard_coded_block_size.cu " : "shipped ") + softmax::variant_name(v));
      const Softmax c = softmax_on(Backend::Cpu, v, sx, rows, n, src), g = softmax_on(Backend::Cuda, v, sx, rows, n, src);
      EXPECT_EQ(c.writer, g.writer);
      EXPECT_EQ(c.count, g.count);
      for (size_t i = 0; i < c.out.size(); ++i) {
        if (std::isnan(c.out[i])) ASSERT_TRUE(std::isnan(g.out[i])) << i;  // unwritten on both
        else ASSERT_NEAR(c.out[i], g.out[i], 1e-6) << i;
      }
    }
}

// On a GPU the warps of a block run in no fixed order: without the barrier, thread t reads red[t + s]
// before or after its owner has written it, so the sums are wrong, and can differ from run to run. The test
// asserts the race shows (some row's sum off 1 in some of 20 runs) and records how many runs differed.
TEST(EditableRungs23, MissingSyncthreadsRacesOnTheGpu) {
  KL_REQUIRE_CUDA();
  const editable::GalleryBug g = bug("softmax", "missing_syncthreads.cu");
  const editable::Source src{"softmax", g.file, g.text};
  const int64_t rows = 16, n = 4096;
  const std::vector<float> x = test::random_floats(size_t(rows * n), -2.0f, 2.0f);
  std::set<std::vector<float>> distinct;
  double worst = 0;
  for (int k = 0; k < 20; ++k) {
    const Softmax o = softmax_on(Backend::Cuda, Variant::Fixed, x, rows, n, &src);
    ASSERT_EQ(o.fault.kind, editable::Fault::None) << o.fault.text();
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < n; ++c) s += o.out[size_t(r * n + c)];
      worst = std::max(worst, std::isnan(s) ? HUGE_VAL : std::fabs(s - 1.0));
    }
    distinct.insert(o.out);
  }
  ::testing::Test::RecordProperty("distinct_outputs_of_20", int(distinct.size()));
  ::testing::Test::RecordProperty("worst_row_sum_error", std::to_string(worst));
  std::printf("missing __syncthreads on CUDA: %zu distinct outputs in 20 runs, worst |row sum - 1| = %g\n",
              distinct.size(), worst);
  EXPECT_GT(worst, 1e-3) << "the race did not show in 20 runs";
}

}  // namespace
}  // namespace kl
