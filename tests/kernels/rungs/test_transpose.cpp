// Rung 1½ (kernels/rungs/transpose.*): naive, tiled and padded equal the reference bit for bit on every
// backend and build (the traced editable kernels on the CPU and CUDA, the fast CUDA ones), on square,
// ragged and one-row or one-column matrices; bad shapes are refused in words; `run` and `bench` work.
#include <gtest/gtest.h>

#include "kernels/rungs/transpose.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/registry.h"
#include "test_util.h"

namespace kl {
namespace {

using transpose::Variant;

struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{1, 1}, {32, 32}, {64, 96}, {70, 50}, {1, 1000}, {1000, 1}, {33, 31}, {257, 129}};

std::vector<float> transposed(Backend b, Variant v, const std::vector<float>& x, Shape s, bool traced) {
  Buffer<float> in(b, x.size()), out(b, x.size());
  in.upload(x);
  out.fill_bytes(0xFF);
  transpose::TransposeTrace t;
  t.reset(b, s.rows, s.cols, 0);
  transpose::TransposeTraceView tv = t.view();
  const editable::Fault f = transpose::run(b, v, in.data(), out.data(), s.rows, s.cols, traced ? &tv : nullptr);
  EXPECT_EQ(f.kind, editable::Fault::None) << f.text();
  if (traced) {  // every element stored once, by the program whose tile holds it
    const std::vector<uint32_t> counts = t.write_count.to_host();
    const std::vector<int32_t> writer = t.writer.to_host();
    for (int64_t c = 0; c < s.cols; ++c)
      for (int64_t r = 0; r < s.rows; ++r) {
        const size_t i = size_t(c * s.rows + r);
        EXPECT_EQ(counts[i], 1u) << c << "," << r;
        EXPECT_EQ(writer[i], int32_t(c / 32 + transpose::grid_x(s.cols) * (r / 32))) << c << "," << r;
      }
  }
  return out.to_host();
}

void expect_reference(Backend b, bool traced) {
  for (const Shape s : kShapes) {
    const std::vector<float> x = test::random_floats(size_t(s.rows * s.cols));
    std::vector<float> ref(x.size());
    transpose::reference(x.data(), ref.data(), s.rows, s.cols);
    for (Variant v : transpose::kVariants)
      EXPECT_TRUE(test::same_bits(transposed(b, v, x, s, traced), ref))
          << backend_name(b) << (traced ? " traced " : " ") << transpose::variant_name(v) << " " << s.rows << "x" << s.cols;
  }
}

TEST(Transpose, ReferenceIsTheTranspose) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // 2 x 3
  std::vector<float> out(6);
  transpose::reference(x.data(), out.data(), 2, 3);
  EXPECT_EQ(out, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Transpose, TracedKernelsMatchTheReferenceBitForBitOnTheCpu) { expect_reference(Backend::Cpu, true); }

TEST(Transpose, TracedAndFastKernelsMatchTheReferenceBitForBitOnTheGpu) {
  KL_REQUIRE_CUDA();
  expect_reference(Backend::Cuda, true);
  expect_reference(Backend::Cuda, false);
}

TEST(Transpose, BadShapesAndVariantsAreRefusedInWords) {
  Buffer<float> a(Backend::Cpu, 4), o(Backend::Cpu, 4);
  try {
    transpose::run(Backend::Cpu, Variant::Naive, a.data(), o.data(), 0, 4);
    FAIL() << "rows=0 ran";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rows"), std::string::npos) << e.what();
  }
  EXPECT_THROW(transpose::run(Backend::Cpu, Variant::Naive, a.data(), o.data(), 65536, 65536), InputError);
  EXPECT_THROW(transpose::run(Backend::Cpu, Variant::Naive, a.data(), o.data(), transpose::kMaxSide + 1, 1), InputError);
  EXPECT_THROW(transpose::parse_variant("fast"), InputError);
  EXPECT_THROW(transpose::run_fast(Backend::Cpu, Variant::Padded, a.data(), o.data(), 2, 2), InputError);
}

TEST(Transpose, RunEntryTransposesAndNamesItsShape) {
  const KernelEntry* e = find_kernel("transpose");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->variants, (std::vector<std::string>{"naive", "tiled", "padded"}));
  KernelRunRequest r;
  r.variant = "tiled";
  r.inputs["x"] = Array{{2, 3}, {1, 2, 3, 4, 5, 6}};
  const KernelRunResult res = e->run(r);
  EXPECT_EQ(res.outputs.at("out").shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(res.outputs.at("out").data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  r.inputs["x"] = Array{{6}, {1, 2, 3, 4, 5, 6}};
  EXPECT_THROW(e->run(r), InputError);
}

TEST(Transpose, QuickBenchMeasuresEveryVariantAgainstACopy) {
  const std::vector<bench::Row> rows = transpose::bench_rows(Backend::Cpu, true);
  ASSERT_EQ(rows.size(), 3u);  // the traced build: the CPU backend has no fast one
  for (const bench::Row& r : rows) {
    EXPECT_EQ(r.kernel, "transpose");
    EXPECT_GT(r.ms, 0) << r.variant;
    EXPECT_GT(r.ratio, 0) << r.variant;
    EXPECT_NE(r.baseline.find("copy"), std::string::npos) << r.baseline;
  }
  EXPECT_EQ(rows[2].variant, "traced padded");
}

}  // namespace
}  // namespace kl
