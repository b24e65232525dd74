// kernels/relu_dropout.{h,cpp,cu}: fused / unfused / traced ReLU + dropout on both backends.
// Host reference: relu_dropout::reference (float64 scale). A random kernel is tested by its distribution
// (drop rate within 0.01 of p, a binomial test over many seeds) and by what must hold exactly: survivors
// are relu(x)/(1-p) within 1 ulp, dropped elements are exactly 0, the mask is a function of (seed, index).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/runtime/errors.h"
#include "kernels/rungs/philox.h"
#include "kernels/rungs/relu_dropout.h"
#include "test_util.h"

namespace kl {
namespace {

namespace rd = relu_dropout;

const char* const kVariants[] = {"fused", "unfused", "traced"};
const int kBlocks[] = {32, 64, 128, 256, 512, 1024, 2048, 4096};

struct Result {
  std::vector<float> out;
  std::vector<uint8_t> keep;  // traced only
  ElementTrace* trace = nullptr;
};

// Runs one variant with the output poisoned (NaN) first; returns the output as the kernel left it.
std::vector<float> run(Backend b, const std::string& variant, const std::vector<float>& x, double p,
                       uint64_t seed, int block, std::vector<uint8_t>* keep = nullptr,
                       std::vector<int32_t>* writer = nullptr, std::vector<uint32_t>* count = nullptr) {
  const int64_t n = int64_t(x.size());
  Buffer<float> dx(b, x.size()), dout(b, x.size());
  dx.upload(x);
  dout.fill_bytes(0xFF);
  if (variant == "fused") {
    rd::run_fused(b, dx.data(), dout.data(), n, p, seed, block);
  } else if (variant == "unfused") {
    Buffer<float> tmp(b, x.size());
    tmp.fill_bytes(0xFF);
    rd::run_unfused(b, dx.data(), tmp.data(), dout.data(), n, p, seed, block);
  } else {
    rd::DropoutTrace t;
    t.reset(b, n, block);
    rd::DropoutTraceView v = t.view();
    rd::run_traced(b, dx.data(), dout.data(), n, p, seed, block, &v);
    if (keep) *keep = t.keep.to_host();
    if (writer) *writer = t.elements.writer.to_host();
    if (count) *count = t.elements.write_count.to_host();
  }
  mem::synchronize(b);
  return dout.to_host();
}

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = int32_t(0x80000000u - uint32_t(ia));
  if (ib < 0) ib = int32_t(0x80000000u - uint32_t(ib));
  return std::llabs(int64_t(ia) - int64_t(ib));
}

// Every element: negatives (and zeros) give exactly 0, dropped give exactly 0, survivors give
// relu(x)/(1-p) in float64 rounded, within 1 ulp; the mask is the reference's.
void check_against_reference(const std::vector<float>& x, const std::vector<float>& out, double p,
                             uint64_t seed, const std::string& what) {
  const int64_t n = int64_t(x.size());
  std::vector<float> ref(x.size());
  std::vector<uint8_t> keep(x.size());
  rd::reference(x.data(), ref.data(), keep.data(), n, p, seed);
  int64_t bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    const float o = out[size_t(i)];
    bool ok;
    if (keep[size_t(i)] == rd::kDropped || !(x[size_t(i)] > 0.0f)) ok = (o == 0.0f && !std::signbit(o));
    else ok = std::isfinite(o) && ulp_distance(o, ref[size_t(i)]) <= 1;
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " x=" << x[size_t(i)] << " out=" << o << " ref=" << ref[size_t(i)]
                    << " keep=" << int(keep[size_t(i)]);
    }
  }
}

TEST(ReluDropout, MatchesReferenceEveryVariantBlockAndTail) {
  for (Backend b : test::backends()) {
    for (int64_t n : {1, 2, 3, 4, 5, 31, 32, 33, 1023, 1024, 1025, 4095, 4097, 100003}) {
      for (int block : kBlocks) {
        for (const char* v : kVariants) {
          const uint64_t seed = test::next_seed() & 0xFFFFFFFFull;
          const double p = 0.3;
          const std::vector<float> x = test::random_floats(size_t(n), -2.0f, 2.0f);
          const std::vector<float> out = run(b, v, x, p, seed, block);
          check_against_reference(x, out, p, seed,
                                  std::string(backend_name(b)) + " " + v + " n=" + std::to_string(n) +
                                      " block=" + std::to_string(block) + " seed=" + std::to_string(seed));
        }
      }
    }
  }
}

// At n = 100000 the drop rate from the recorded mask, and from the zeros on strictly positive inputs
// (so ReLU's zeros do not count), lies within 0.01 of p.
TEST(ReluDropout, EmpiricalRateWithinOneHundredthOfP) {
  const int64_t n = 100000;
  for (Backend b : test::backends()) {
    for (double p : {0.1, 0.5, 0.9}) {
      const uint64_t seed = test::next_seed() & 0xFFFFFFFFull;
      const std::vector<float> x = test::random_floats(size_t(n), 0.01f, 1.0f);
      std::vector<uint8_t> keep;
      run(b, "traced", x, p, seed, 1024, &keep);
      int64_t dropped = 0;
      for (uint8_t k : keep) {
        ASSERT_TRUE(k == rd::kKept || k == rd::kDropped);
        dropped += k == rd::kDropped;
      }
      EXPECT_NEAR(double(dropped) / n, p, 0.01) << backend_name(b) << " seed " << seed;
      for (const char* v : {"fused", "unfused"}) {
        const std::vector<float> out = run(b, v, x, p, seed, 1024);
        int64_t zeros = 0;
        for (float o : out) zeros += o == 0.0f;
        EXPECT_EQ(zeros, dropped) << backend_name(b) << " " << v << " seed " << seed;
      }
    }
  }
}

// Over 200 seeds, each count of drops among n = 20000 is Binomial(n, p): the per-seed z-scores have
// sum of squares ~ chi-square(200) (accepted within 5 sigma, P(false failure) < 1e-5), at most 9 of 200
// fall outside the two-sided 99% interval (expected 2; P(> 9) < 1e-4), and the pooled rate is within
// 5 sigma of p. Run on the CPU backend's fused kernel (the mask is backend-independent, tested below).
TEST(ReluDropout, BinomialTestOverManySeeds) {
  const int64_t n = 20000;
  const int seeds = 200;
  const std::vector<float> x = test::random_floats(size_t(n), 0.01f, 1.0f);
  for (double p : {0.1, 0.5, 0.9}) {
    const uint64_t first = test::next_seed() & 0xFFFFFFFFull;
    double chi2 = 0;
    int outside = 0;
    int64_t total = 0;
    std::vector<float> out(static_cast<size_t>(n));
    for (int s = 0; s < seeds; ++s) {
      rd::run_fused(Backend::Cpu, x.data(), out.data(), n, p, first + uint64_t(s) * 7919, 1024);
      int64_t k = 0;
      for (float o : out) k += o == 0.0f;
      total += k;
      const double z = (double(k) - n * p) / std::sqrt(n * p * (1 - p));
      chi2 += z * z;
      outside += std::fabs(z) > 2.5758;
    }
    EXPECT_NEAR(chi2, seeds, 5 * std::sqrt(2.0 * seeds)) << "p " << p << " first seed " << first;
    EXPECT_LE(outside, 9) << "p " << p << " first seed " << first;
    const double N = double(n) * seeds;
    EXPECT_NEAR(double(total) / N, p, 5 * std::sqrt(p * (1 - p) / N)) << "p " << p;
  }
}

TEST(ReluDropout, SameSeedSameMaskOtherSeedOtherMask) {
  const int64_t n = 50000;
  for (Backend b : test::backends()) {
    const uint64_t seed = test::next_seed() & 0xFFFFFFFFull;
    const std::vector<float> x = test::random_floats(size_t(n), 0.01f, 1.0f);
    std::vector<uint8_t> k1, k2, k3;
    const std::vector<float> o1 = run(b, "traced", x, 0.5, seed, 256, &k1);
    const std::vector<float> o2 = run(b, "traced", x, 0.5, seed, 256, &k2);
    const std::vector<float> o3 = run(b, "traced", x, 0.5, seed ^ 1, 256, &k3);
    EXPECT_EQ(k1, k2);
    EXPECT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * 4));
    int64_t differ = 0;
    for (size_t i = 0; i < k1.size(); ++i) differ += k1[i] != k3[i];
    // Independent masks at p = 0.5 differ in about half the elements.
    EXPECT_NEAR(double(differ) / n, 0.5, 0.02);
  }
}

// The mask, and the output bit for bit, are the same for every BLOCK_SIZE and every variant.
TEST(ReluDropout, BlockSizeAndVariantDoNotChangeTheBits) {
  const int64_t n = 12345;
  for (Backend b : test::backends()) {
    const uint64_t seed = test::next_seed() & 0xFFFFFFFFull;
    const std::vector<float> x = test::random_floats(size_t(n), -1.0f, 1.0f);
    std::vector<uint8_t> keep0;
    const std::vector<float> out0 = run(b, "traced", x, 0.4, seed, 32, &keep0);
    for (int block : kBlocks) {
      std::vector<uint8_t> keep;
      const std::vector<float> t = run(b, "traced", x, 0.4, seed, block, &keep);
      EXPECT_EQ(keep, keep0) << "block " << block;
      for (const char* v : kVariants) {
        const std::vector<float> o = run(b, v, x, 0.4, seed, block);
        EXPECT_EQ(0, std::memcmp(o.data(), out0.data(), size_t(n) * 4)) << backend_name(b) << " " << v << " block " << block;
      }
    }
  }
}

// The CPU and CUDA backends draw the same mask and produce the same bits.
TEST(ReluDropout, CpuAndCudaMasksIdentical) {
  KL_REQUIRE_CUDA();
  for (int64_t n : {int64_t(7), int64_t(100003), int64_t(1) << 22}) {
    for (int block : {32, 1024, 4096}) {
      const uint64_t seed = test::next_seed() & 0xFFFFFFFFull;
      const std::vector<float> x = test::random_floats(size_t(n), -1.0f, 1.0f);
      std::vector<uint8_t> kc, kg;
      const std::vector<float> oc = run(Backend::Cpu, "traced", x, 0.25, seed, block, &kc);
      const std::vector<float> og = run(Backend::Cuda, "traced", x, 0.25, seed, block, &kg);
      EXPECT_EQ(kc, kg) << "n " << n << " block " << block << " seed " << seed;
      EXPECT_EQ(0, std::memcmp(oc.data(), og.data(), size_t(n) * 4));
      for (const char* v : {"fused", "unfused"}) {
        const std::vector<float> fc = run(Backend::Cpu, v, x, 0.25, seed, block);
        const std::vector<float> fg = run(Backend::Cuda, v, x, 0.25, seed, block);
        EXPECT_EQ(0, std::memcmp(fc.data(), fg.data(), size_t(n) * 4)) << v << " n " << n << " block " << block;
      }
    }
  }
}

// The fast CUDA kernel's scalar path (a pointer that is not 16-byte aligned) gives the same bits.
TEST(ReluDropout, CudaUnalignedPointersSameBits) {
  KL_REQUIRE_CUDA();
  const int64_t n = 10001;
  const uint64_t seed = test::next_seed() & 0xFFFFFFFFull;
  const std::vector<float> x = test::random_floats(size_t(n) + 1, -1.0f, 1.0f);
  Buffer<float> dx(Backend::Cuda, x.size()), dout(Backend::Cuda, x.size());
  dx.upload(x);
  dout.fill_bytes(0xFF);
  rd::run_fused(Backend::Cuda, dx.data() + 1, dout.data() + 1, n, 0.5, seed, 1024);
  const std::vector<float> got = dout.to_host();
  std::vector<float> ref(static_cast<size_t>(n));
  rd::run_fused(Backend::Cpu, x.data() + 1, ref.data(), n, 0.5, seed, 1024);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(0, std::memcmp(got.data() + 1, ref.data(), size_t(n) * 4));
}

TEST(ReluDropout, PZeroIsTheIdentityOnRelu) {
  for (Backend b : test::backends()) {
    const std::vector<float> x = test::random_floats(4099, -3.0f, 3.0f);
    for (const char* v : kVariants) {
      const std::vector<float> o = run(b, v, x, 0.0, test::next_seed() & 0xFFFF, 512);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i] > 0 ? x[i] : 0.0f) << v << " " << i;
    }
  }
}

TEST(ReluDropout, TraceRecordsEveryElementOnceAndTheMaskedLanes) {
  for (Backend b : test::backends()) {
    for (int64_t n : {1, 1000, 4097}) {
      for (int block : {32, 1024, 4096}) {
        const std::vector<float> x = test::random_floats(size_t(n));
        std::vector<uint8_t> keep;
        std::vector<int32_t> writer;
        std::vector<uint32_t> count;
        run(b, "traced", x, 0.5, 7, block, &keep, &writer, &count);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(count[size_t(i)], 1u);
          ASSERT_EQ(writer[size_t(i)], int32_t(i / block));
        }
        // lane states: n active, grid*block - n masked
        rd::DropoutTrace t;
        t.reset(b, n, block);
        rd::DropoutTraceView v = t.view();
        Buffer<float> dx(b, size_t(n)), dout(b, size_t(n));
        dx.upload(x);
        rd::run_traced(b, dx.data(), dout.data(), n, 0.5, 7, block, &v);
        const std::vector<uint8_t> lanes = t.elements.lane_state.to_host();
        int64_t active = 0, masked = 0;
        for (uint8_t l : lanes) active += l == kLaneActive, masked += l == kLaneMasked;
        EXPECT_EQ(active, n);
        EXPECT_EQ(masked, t.elements.grid * block - n);
      }
    }
  }
}

TEST(ReluDropout, RefusesPOutsideZeroOne) {
  std::vector<float> x(8, 1.0f), out(8);
  for (double p : {1.0, -0.01, 1.5, std::nan("")}) {
    EXPECT_THROW(rd::run_fused(Backend::Cpu, x.data(), out.data(), 8, p, 1, 1024), InputError) << p;
    EXPECT_THROW(rd::run_traced(Backend::Cpu, x.data(), out.data(), 8, p, 1, 1024, nullptr), InputError) << p;
  }
  try {
    rd::check_p(1.0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[0, 1)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rd::run_fused(Backend::Cpu, x.data(), out.data(), 8, 0.5, 1, 48), InputError);
  EXPECT_THROW(rd::run_fused(Backend::Cpu, x.data(), out.data(), 0, 0.5, 1, 1024), InputError);
  KernelEntry e = rd::entry();
  ParamValues pv(e.params);
  EXPECT_THROW(pv.set("p=1"), InputError);
  EXPECT_THROW(pv.set("p=-0.5"), InputError);
  EXPECT_NO_THROW(pv.set("p=0"));
  EXPECT_NO_THROW(pv.set("p=0.999"));
}

// The registry entry runs every variant and returns the kernel's output (and the mask for `traced`).
TEST(ReluDropout, EntryRunsEveryVariant) {
  const KernelEntry e = rd::entry();
  EXPECT_EQ(e.name, "relu-dropout");
  for (Backend b : test::backends()) {
    for (const std::string& v : e.variants) {
      KernelRunRequest r;
      r.backend = b;
      r.variant = v;
      r.params = ParamValues(e.params);
      r.params.set("p=0.25");
      r.params.set("seed=99");
      Array x;
      x.shape = {3, 333};
      x.data = test::random_floats(999);
      r.inputs["x"] = x;
      const KernelRunResult res = e.run(r);
      const Array& out = res.outputs.at("out");
      EXPECT_EQ(out.shape, x.shape);
      check_against_reference(x.data, out.data, 0.25, 99, std::string(backend_name(b)) + " entry " + v);
      if (v == "traced") {
        const Array& k = res.outputs.at("trace_keep");
        std::vector<float> ref(999);
        std::vector<uint8_t> keep(999);
        rd::reference(x.data.data(), ref.data(), keep.data(), 999, 0.25, 99);
        for (size_t i = 0; i < 999; ++i) ASSERT_EQ(k.data[i], keep[i] == rd::kKept ? 1.0f : 0.0f);
      }
    }
  }
}

// The views' summaries, computed where the backend runs: counts from the mask, every survivor's out/x in
// the one histogram bin holding 1/(1-p), and the mask raster cell for cell.
TEST(ReluDropout, SummaryAndMaskCellsForTheViews) {
  for (Backend b : test::backends()) {
    const int64_t n = 30000;
    const double p = 0.3;
    const std::vector<float> x = test::random_floats(size_t(n), -1.0f, 1.0f);
    Buffer<float> dx(b, size_t(n)), dout(b, size_t(n));
    dx.upload(x);
    dout.fill_bytes(0xFF);
    rd::DropoutTrace t;
    t.reset(b, n, 1024);
    rd::DropoutTraceView v = t.view();
    rd::run_traced(b, dx.data(), dout.data(), n, p, 5, 1024, &v);
    const double scale = 1.0 / (1.0 - p);
    const int bins = 64;
    const rd::Summary s = rd::summarize(b, dx.data(), dout.data(), t.keep.data(), n, 0.0, 2.0 * scale, bins);
    std::vector<float> ref(static_cast<size_t>(n));
    std::vector<uint8_t> keep(static_cast<size_t>(n));
    rd::reference(x.data(), ref.data(), keep.data(), n, p, 5);
    int64_t kept = 0, survivors = 0;
    for (int64_t i = 0; i < n; ++i) kept += keep[size_t(i)] == rd::kKept, survivors += keep[size_t(i)] == rd::kKept && x[size_t(i)] > 0;
    EXPECT_EQ(s.kept, kept);
    EXPECT_EQ(s.dropped, n - kept);
    EXPECT_EQ(s.not_run, 0);
    EXPECT_EQ(s.survivors, survivors);
    const size_t spike = size_t(bins / 2);  // [scale, scale + bin width) or just below it, within 1 ulp
    EXPECT_EQ(int64_t(s.ratio_hist[spike] + s.ratio_hist[spike - 1]), survivors) << backend_name(b);
    EXPECT_EQ(s.ratio_below + s.ratio_above, 0);
    const int w = 200, h = 151;  // 30200 cells: the last 200 are past n
    Buffer<float> cells(b, size_t(w) * h * 2);
    rd::mask_cells(b, t.keep.data(), n, w, h, cells.data());
    const std::vector<float> c = cells.to_host();
    int64_t wrong = 0;
    for (int64_t i = 0; i < int64_t(w) * h; ++i) {
      if (i < n) wrong += c[size_t(2 * i)] != (keep[size_t(i)] == rd::kKept ? 1.0f : 0.0f) || c[size_t(2 * i + 1)] != 0.0f;
      else wrong += c[size_t(2 * i + 1)] != 1.0f;
    }
    EXPECT_EQ(wrong, 0) << backend_name(b);
  }
}

// `bench` (quick) yields the fused-vs-copy, unfused and fused-vs-unfused rows (figures not judged).
TEST(ReluDropout, BenchQuickRows) {
  const std::vector<bench::Row> rows = rd::bench_rows(Backend::Cpu, true);
  ASSERT_EQ(rows.size(), 3u);
  for (const bench::Row& r : rows) {
    EXPECT_GT(r.ms, 0.0);
    EXPECT_GT(r.ratio, 0.0);
    if (r.baseline != "unfused") EXPECT_NE(r.baseline.find("CPU"), std::string::npos) << r.baseline;  // CPU figures
  }
  EXPECT_EQ(rows[2].baseline, "unfused");
}

}  // namespace
}  // namespace kl
