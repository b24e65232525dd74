// kernels/softmax.{h,cpp,cu}: buggy / fixed / online / three_pass row softmax on both backends against the
// float64 reference (softmax::reference), outputs NaN-poisoned before every launch. Sweeps n_cols on both
// sides of 1024 (the buggy BLOCK_SIZE) and of fixed's limit, rows {1, 3, 4096}; the CPU backend takes the
// shapes up to 2^22 elements, the CUDA backend all of them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/runtime/errors.h"
#include "kernels/rungs/softmax.h"
#include "test_util.h"

namespace kl {
namespace {

using softmax::Variant;
constexpr float kInf = std::numeric_limits<float>::infinity();
const int64_t kCols[] = {1, 2, 5, 781, 1023, 1024, 1025, 1823, 2000, 4096, 12672};
const int64_t kRows[] = {1, 3, 4096};
constexpr int64_t kCpuMaxElements = int64_t(1) << 22;
constexpr double kTol = 1e-5;  // float32 accuracy, relative L2 norm

std::vector<float> run(Backend b, Variant v, const std::vector<float>& x, int64_t rows, int64_t n_cols,
                       softmax::SoftmaxTrace* trace = nullptr, int chunk = softmax::kDefaultChunk,
                       int64_t trace_row = 0) {
  Buffer<float> dx(b, x.size()), dout(b, x.size());
  dx.upload(x);
  dout.fill_bytes(0xFF);  // NaN
  if (trace) {
    trace->reset(b, rows, n_cols, trace_row, chunk);
    softmax::SoftmaxTraceView tv = trace->view();
    softmax::run(b, v, dx.data(), dout.data(), rows, n_cols, &tv, chunk);
  } else {
    softmax::run(b, v, dx.data(), dout.data(), rows, n_cols, nullptr, chunk);
  }
  mem::synchronize(b);
  return dout.to_host();
}

// Relative L2 error over the given columns [c0, c1) of every row; NaN if any output there is NaN.
double rel_err(const std::vector<float>& out, const std::vector<double>& ref, int64_t rows, int64_t n_cols,
               int64_t c0 = 0, int64_t c1 = -1) {
  if (c1 < 0) c1 = n_cols;
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = c0; c < c1; ++c) {
      const double o = out[size_t(r * n_cols + c)], e = ref[size_t(r * n_cols + c)];
      if (std::isnan(o)) return std::numeric_limits<double>::quiet_NaN();
      num += (o - e) * (o - e);
      den += e * e;
    }
  return std::sqrt(num / den);
}

std::string shape(Backend b, Variant v, int64_t rows, int64_t n) {
  return std::string(backend_name(b)) + " " + softmax::variant_name(v) + " " + std::to_string(rows) + "x" +
         std::to_string(n);
}

bool fits(Backend b, int64_t rows, int64_t n) { return b == Backend::Cuda || rows * n <= kCpuMaxElements; }

TEST(Softmax, FixedOnlineThreePassMatchReferenceAcrossWidthsAndRows) {
  for (Backend b : test::backends())
    for (int64_t rows : kRows)
      for (int64_t n : kCols) {
        if (!fits(b, rows, n)) continue;
        const std::vector<float> x = test::random_floats(size_t(rows * n), -4.0f, 4.0f);
        std::vector<double> ref(x.size());
        softmax::reference(x.data(), ref.data(), rows, n);
        for (Variant v : {Variant::Fixed, Variant::Online, Variant::ThreePass}) {
          const std::vector<float> out = run(b, v, x, rows, n);
          EXPECT_LE(rel_err(out, ref, rows, n), kTol) << shape(b, v, rows, n);
        }
      }
}

// Online's chunk size does not matter: chunks smaller, equal to and larger than the row.
TEST(Softmax, OnlineEveryChunkSize) {
  for (Backend b : test::backends())
    for (int chunk : {32, 64, 256, 1024, 4096})
      for (int64_t n : {int64_t(1), int64_t(31), int64_t(33), int64_t(2000), int64_t(5000)}) {
        const int64_t rows = 5;
        const std::vector<float> x = test::random_floats(size_t(rows * n), -4.0f, 4.0f);
        std::vector<double> ref(x.size());
        softmax::reference(x.data(), ref.data(), rows, n);
        softmax::SoftmaxTrace t;  // traced form (chunk by chunk) and fast form
        EXPECT_LE(rel_err(run(b, Variant::Online, x, rows, n, &t, chunk), ref, rows, n), kTol)
            << shape(b, Variant::Online, rows, n) << " traced chunk " << chunk;
        EXPECT_LE(rel_err(run(b, Variant::Online, x, rows, n, nullptr, chunk), ref, rows, n), kTol)
            << shape(b, Variant::Online, rows, n) << " chunk " << chunk;
      }
}

// buggy matches for n_cols <= 1024; past it, exactly the columns >= 1024 stay unwritten (NaN, writer -1)
// and every written column is wrong: normalised over the first 1024 columns only (too large).
TEST(Softmax, BuggyTruncatesExactlyAtColumn1024) {
  for (Backend b : test::backends())
    for (int64_t rows : kRows)
      for (int64_t n : kCols) {
        if (!fits(b, rows, n)) continue;
        const std::vector<float> x = test::random_floats(size_t(rows * n), -1.0f, 1.0f);
        std::vector<double> ref(x.size());
        softmax::reference(x.data(), ref.data(), rows, n);
        softmax::SoftmaxTrace t;
        const std::vector<float> out = run(b, Variant::Buggy, x, rows, n, &t);
        const std::vector<int32_t> writer = t.writer.to_host();
        const std::vector<uint32_t> count = t.write_count.to_host();
        const std::string what = shape(b, Variant::Buggy, rows, n);
        if (n <= 1024) {
          EXPECT_LE(rel_err(out, ref, rows, n), kTol) << what;
        } else {
          // What it does compute: the softmax of the first 1024 columns alone.
          std::vector<float> head(size_t(rows * 1024));
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < 1024; ++c) head[size_t(r * 1024 + c)] = x[size_t(r * n + c)];
          std::vector<double> head_ref(head.size());
          softmax::reference(head.data(), head_ref.data(), rows, 1024);
          double num = 0, den = 0;
          int64_t not_larger = 0;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < 1024; ++c) {
              const double o = out[size_t(r * n + c)];
              num += (o - head_ref[size_t(r * 1024 + c)]) * (o - head_ref[size_t(r * 1024 + c)]);
              den += head_ref[size_t(r * 1024 + c)] * head_ref[size_t(r * 1024 + c)];
              not_larger += !(o > ref[size_t(r * n + c)] * (1 + 5e-5));
            }
          EXPECT_LE(std::sqrt(num / den), kTol) << what;
          EXPECT_EQ(not_larger, 0) << what << ": written columns must differ from the reference";
        }
        int64_t wrong = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < n; ++c) {
            const size_t i = size_t(r * n + c);
            if (c < 1024) wrong += std::isnan(out[i]) || writer[i] != r || count[i] != 1;
            else wrong += !std::isnan(out[i]) || writer[i] != -1 || count[i] != 0;
          }
        EXPECT_EQ(wrong, 0) << what;
      }
}

TEST(Softmax, TraceEveryElementWrittenOnceByItsRow) {
  for (Backend b : test::backends())
    for (Variant v : {Variant::Fixed, Variant::Online, Variant::ThreePass})
      for (int64_t n : {int64_t(1), int64_t(1025), int64_t(2000)}) {
        const int64_t rows = 3;
        const std::vector<float> x = test::random_floats(size_t(rows * n));
        softmax::SoftmaxTrace t;
        const std::vector<float> out = run(b, v, x, rows, n, &t, 256);
        const std::vector<int32_t> writer = t.writer.to_host();
        const std::vector<uint32_t> count = t.write_count.to_host();
        int64_t wrong = 0;
        for (int64_t i = 0; i < rows * n; ++i)
          wrong += std::isnan(out[size_t(i)]) || writer[size_t(i)] != i / n || count[size_t(i)] != 1;
        EXPECT_EQ(wrong, 0) << shape(b, v, rows, n);
      }
}

// The online trace: per chunk of the chosen row, the chunk's own max, the running max (non-decreasing,
// m_new = max(m_old, chunk max)) and the running sum, ending at the row's max and sum(exp(x - max)).
TEST(Softmax, OnlineTraceRecordsRunningMaxAndSumPerChunk) {
  for (Backend b : test::backends())
    for (int64_t n : {int64_t(2000), int64_t(4096), int64_t(100)}) {
      const int64_t rows = 4, trace_row = 2;
      const int chunk = 256;
      std::vector<float> x = test::random_floats(size_t(rows * n), -3.0f, 3.0f);
      softmax::SoftmaxTrace t;
      run(b, Variant::Online, x, rows, n, &t, chunk, trace_row);
      const int64_t n_chunks = (n + chunk - 1) / chunk;
      ASSERT_EQ(t.n_chunks, n_chunks);
      const std::vector<float> cmax = t.chunk_max.to_host(), rmax = t.running_max.to_host(),
                               rsum = t.running_sum.to_host();
      const float* xr = x.data() + trace_row * n;
      float m = -kInf;
      for (int64_t k = 0; k < n_chunks; ++k) {
        float want = -kInf;
        for (int64_t c = k * chunk; c < std::min(n, (k + 1) * chunk); ++c) want = std::max(want, xr[c]);
        EXPECT_EQ(cmax[size_t(k)], want) << "chunk " << k;
        m = std::max(m, want);
        EXPECT_EQ(rmax[size_t(k)], m) << "chunk " << k;
        double s = 0;  // the running sum so far, relative to the running max
        for (int64_t c = 0; c < std::min(n, (k + 1) * chunk); ++c) s += std::exp(double(xr[c]) - m);
        EXPECT_NEAR(rsum[size_t(k)], s, 1e-5 * s) << backend_name(b) << " chunk " << k;
      }
    }
}

TEST(Softmax, OnlineTakesRowsOf65539AndAMillionColumns) {
  for (Backend b : test::backends())
    for (int64_t n : {int64_t(65539), int64_t(1000000)})
      for (int64_t rows : {int64_t(1), int64_t(3)}) {
        const std::vector<float> x = test::random_floats(size_t(rows * n), -8.0f, 8.0f);
        std::vector<double> ref(x.size());
        softmax::reference(x.data(), ref.data(), rows, n);
        EXPECT_LE(rel_err(run(b, Variant::Online, x, rows, n), ref, rows, n), kTol) << shape(b, Variant::Online, rows, n);
        if (rows == 1) {
          softmax::SoftmaxTrace t;
          EXPECT_LE(rel_err(run(b, Variant::Online, x, rows, n, &t, 4096), ref, rows, n), kTol)
              << shape(b, Variant::Online, rows, n) << " traced";
        }
      }
}

// fixed takes the widest row this build holds and refuses one column more, naming the limit and online.
TEST(Softmax, FixedRefusedPastThisBuildsLimitWithAMessage) {
  for (Backend b : test::backends()) {
    const int64_t limit = softmax::fixed_max_cols(device_info(b));
    EXPECT_EQ(limit, 32768);  // this build: 1024 threads x 32 row values (the CPU backend assumes an H200)
    const std::vector<float> x = test::random_floats(size_t(limit) * 3);
    std::vector<double> ref(x.size());
    softmax::reference(x.data(), ref.data(), 3, limit);
    EXPECT_LE(rel_err(run(b, Variant::Fixed, x, 3, limit), ref, 3, limit), kTol) << backend_name(b);
    for (int64_t n : {limit + 1, int64_t(65539)}) {
      try {
        Buffer<float> dy(b, size_t(n)), dout(b, size_t(n));
        softmax::run(b, Variant::Fixed, dy.data(), dout.data(), 1, n);
        ADD_FAILURE() << "fixed accepted n_cols=" << n;
      } catch (const InputError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("n_cols=" + std::to_string(n)), std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(limit)), std::string::npos) << m;
        EXPECT_NE(m.find("online"), std::string::npos) << m;
      }
    }
  }
}

// |x| ~ 1e4 and -inf entries: no NaN; -inf gives exactly 0; a row of all -inf gives 0 (FlashAttention's
// rule); a row with one finite entry gives exactly 1 there.
TEST(Softmax, LargeMagnitudesAndMinusInfinityGiveNoNaN) {
  for (Backend b : test::backends())
    for (int64_t n : {int64_t(5), int64_t(1023), int64_t(2000), int64_t(40000)})
      for (Variant v : {Variant::Fixed, Variant::Online, Variant::ThreePass}) {
        if (v == Variant::Fixed && n > 32768) continue;
        const int64_t rows = 6;
        std::vector<float> x = test::random_floats(size_t(rows * n), -1e4f, 1e4f);
        std::mt19937_64 rng(test::next_seed());
        for (float& e : x)
          if (rng() % 10 == 0) e = -kInf;
        for (int64_t c = 0; c < n; ++c) x[size_t(1 * n + c)] = -kInf;        // row 1: all -inf
        for (int64_t c = 0; c < n; ++c) x[size_t(2 * n + c)] = c == n / 2 ? 3.0f : -kInf;  // row 2: one finite
        for (int64_t c = 0; c < n; ++c) x[size_t(3 * n + c)] = 1e4f * ((c % 7) - 3.0f) / 3.0f;  // row 3: ties at 1e4
        std::vector<double> ref(x.size());
        softmax::reference(x.data(), ref.data(), rows, n);
        const std::vector<float> out = run(b, v, x, rows, n);
        const std::string what = shape(b, v, rows, n);
        int64_t nan = 0, bad_zero = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          nan += std::isnan(out[i]);
          bad_zero += x[i] == -kInf && out[i] != 0.0f;
        }
        EXPECT_EQ(nan, 0) << what;
        EXPECT_EQ(bad_zero, 0) << what;
        for (int64_t c = 0; c < n; ++c) ASSERT_EQ(out[size_t(n + c)], 0.0f) << what << " all -inf row";
        EXPECT_EQ(out[size_t(2 * n + n / 2)], 1.0f) << what;
        EXPECT_LE(rel_err(out, ref, rows, n), kTol) << what;
      }
}

// The fast CUDA kernels' scalar paths: pointers not 16-byte aligned, with n_cols % 4 == 0.
TEST(Softmax, CudaUnalignedPointers) {
  KL_REQUIRE_CUDA();
  for (Variant v : {Variant::Fixed, Variant::Online})
    for (int64_t n : {int64_t(1024), int64_t(4096), int64_t(20000)}) {
      const int64_t rows = 7;
      const std::vector<float> x = test::random_floats(size_t(rows * n) + 1);
      Buffer<float> dx(Backend::Cuda, x.size()), dout(Backend::Cuda, x.size());
      dx.upload(x);
      dout.fill_bytes(0xFF);
      softmax::run(Backend::Cuda, v, dx.data() + 1, dout.data() + 1, rows, n);
      const std::vector<float> got = dout.to_host();
      std::vector<double> ref(size_t(rows * n));
      softmax::reference(x.data() + 1, ref.data(), rows, n);
      EXPECT_TRUE(std::isnan(got[0]));
      EXPECT_LE(rel_err(std::vector<float>(got.begin() + 1, got.end()), ref, rows, n), kTol)
          << shape(Backend::Cuda, v, rows, n);
    }
}

TEST(Softmax, BlockSizesAndVariantNames) {
  EXPECT_EQ(softmax::block_size(Variant::Buggy, 2000), 1024);
  EXPECT_EQ(softmax::block_size(Variant::Fixed, 2000), 2048);
  EXPECT_EQ(softmax::block_size(Variant::Fixed, 1024), 1024);
  EXPECT_EQ(softmax::block_size(Variant::Fixed, 1025), 2048);
  for (Variant v : {Variant::Buggy, Variant::Fixed, Variant::Online, Variant::ThreePass})
    EXPECT_EQ(softmax::parse_variant(softmax::variant_name(v)), v);
  EXPECT_THROW(softmax::parse_variant("fast"), InputError);
  std::vector<float> x(8), out(8);
  EXPECT_THROW(softmax::run(Backend::Cpu, Variant::Online, x.data(), out.data(), 1, 8, nullptr, 48), InputError);
  EXPECT_THROW(softmax::run(Backend::Cpu, Variant::Fixed, x.data(), out.data(), 0, 8), InputError);
  EXPECT_THROW(softmax::run(Backend::Cpu, Variant::Fixed, x.data(), out.data(), 1, 0), InputError);
}

// The registry entry: buggy's unwritten columns come back NaN; shapes that are not [rows, n_cols] refused.
TEST(Softmax, EntryRunsEveryVariant) {
  const KernelEntry e = softmax::entry();
  EXPECT_EQ(e.name, "softmax");
  for (Backend b : test::backends())
    for (const std::string& v : e.variants) {
      KernelRunRequest r;
      r.backend = b;
      r.variant = v;
      r.params = ParamValues(e.params);
      Array x;
      x.shape = {3, 2000};
      x.data = test::random_floats(6000);
      r.inputs["x"] = x;
      const Array out = e.run(r).outputs.at("out");
      ASSERT_EQ(out.shape, x.shape);
      int64_t nan = 0, nan_head = 0;
      for (int64_t i = 0; i < 6000; ++i) {
        nan += std::isnan(out.data[size_t(i)]);
        nan_head += std::isnan(out.data[size_t(i)]) && (i % 2000) < 1024;
      }
      EXPECT_EQ(nan, v == "buggy" ? 3 * (2000 - 1024) : 0) << v;
      EXPECT_EQ(nan_head, 0) << v;
    }
  KernelRunRequest r;
  r.variant = "fixed";
  r.params = ParamValues(e.params);
  Array x;
  x.shape = {2, 2, 2};
  x.data.assign(8, 1.0f);
  r.inputs["x"] = x;
  EXPECT_THROW(e.run(r), InputError);
  x.shape = {1, 65539};
  x.data.assign(65539, 1.0f);
  r.inputs["x"] = x;
  EXPECT_THROW(e.run(r), InputError);
}

// The heatmap cells the panel draws: value = out, state 2 (never written) exactly where the trace has no
// writer, for a window of rows; and plain value cells.
TEST(Softmax, OutputCellsFromTheTrace) {
  for (Backend b : test::backends()) {
    const int64_t rows = 6, n = 2000, row0 = 2, n_rows = 3;
    const std::vector<float> x = test::random_floats(size_t(rows * n));
    Buffer<float> dx(b, x.size()), dout(b, x.size()), cells(b, size_t(n_rows * n * 2));
    dx.upload(x);
    dout.fill_bytes(0xFF);
    softmax::SoftmaxTrace t;
    t.reset(b, rows, n);
    softmax::SoftmaxTraceView tv = t.view();
    softmax::run(b, Variant::Buggy, dx.data(), dout.data(), rows, n, &tv);
    softmax::output_cells(b, dout.data(), t.writer.data(), n, row0, n_rows, cells.data());
    const std::vector<float> c = cells.to_host(), out = dout.to_host();
    int64_t wrong = 0;
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t col = 0; col < n; ++col) {
        const size_t i = size_t(r * n + col);
        const float o = out[size_t((row0 + r) * n + col)];
        wrong += c[2 * i + 1] != (col < 1024 ? 0.0f : 2.0f);
        wrong += col < 1024 ? c[2 * i] != o : !std::isnan(c[2 * i]);
      }
    EXPECT_EQ(wrong, 0) << backend_name(b);
    softmax::value_cells(b, dx.data() + n, n, cells.data());
    const std::vector<float> v = cells.to_host();
    for (int64_t col = 0; col < n; ++col) {
      ASSERT_EQ(v[size_t(2 * col)], x[size_t(n + col)]);
      ASSERT_EQ(v[size_t(2 * col + 1)], 0.0f);
    }
  }
}

TEST(Softmax, BenchQuickRows) {
  const std::vector<bench::Row> rows = softmax::bench_rows(Backend::Cpu, true);
  ASSERT_EQ(rows.size(), 6u);  // 2 widths x fixed, online, three_pass
  for (const bench::Row& r : rows) {
    EXPECT_GT(r.ms, 0.0);
    EXPECT_GT(r.ratio, 0.0);
    EXPECT_NE(r.baseline.find("CPU"), std::string::npos) << r.baseline;  // CPU figures, said so
  }
}

}  // namespace
}  // namespace kl
