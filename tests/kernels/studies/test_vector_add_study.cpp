// kernels/studies/vector_add_study.*: what the vector-add panel concludes, asserted on numbers. Each
// sentence the panel shows is checked against the numbers it states, computed here from the study's
// own arrays (the output and the trace), on every backend present.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "assets/embedded.h"
#include "kernels/editable/launch.h"
#include "kernels/editable/worker.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/vector_add_study.h"
#include "test_util.h"

namespace kl {
namespace {

ParamValues settings(int64_t n, int block, uint64_t seed) {
  ParamValues v(study::vector_add_params());
  v.set("n", std::to_string(n));
  v.set("block_size", std::to_string(block));
  v.set("seed", std::to_string(seed % (1u << 30)));
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(VectorAddStudy, GridTailAndChecksStateTheirNumbers) {
  struct Case {
    int64_t n;
    int block;
  } cases[] = {{1000, 256}, {33, 32}, {1024, 128}, {1, 4096}, {100000, 1024}};
  for (Backend b : test::backends())
    for (const Case& c : cases) {
      const uint64_t seed = test::next_seed();
      const study::VectorAddResult r = study::run_vector_add(b, settings(c.n, c.block, seed));
      SCOPED_TRACE("n " + std::to_string(c.n) + " block " + std::to_string(c.block) + " seed " + std::to_string(seed));
      const int64_t grid = (c.n + c.block - 1) / c.block;
      EXPECT_EQ(r.grid, grid);
      EXPECT_EQ(r.offsets, grid * c.block);
      EXPECT_EQ(r.masked, grid * c.block - c.n);
      // The output against x + y computed here, and the trace read back here.
      const std::vector<float> out = r.out.to_host();
      int64_t wrong = 0;
      for (int64_t i = 0; i < c.n; ++i) wrong += out[size_t(i)] != r.x[size_t(i)] + r.y[size_t(i)];
      EXPECT_EQ(wrong, 0);
      EXPECT_TRUE(r.matches_reference.pass);
      EXPECT_EQ(r.matches_reference.sentence, "yes, max abs diff 0");
      const std::vector<int32_t> writer = r.trace.writer.to_host();
      int64_t by_owner = 0;
      for (int64_t i = 0; i < c.n; ++i) by_owner += writer[size_t(i)] == int32_t(i / c.block);
      EXPECT_EQ(by_owner, c.n) << "each element stored by pid = offset / BLOCK_SIZE";
      EXPECT_TRUE(r.trace_check.pass);
      EXPECT_EQ(r.trace_check.sentence, std::to_string(c.n) + " of " + std::to_string(c.n) +
                                            " elements stored exactly once; " + std::to_string(r.masked) +
                                            " masked offsets recorded (expected " + std::to_string(r.masked) + ")");
      EXPECT_TRUE(contains(r.grid_line, "= " + std::to_string(grid) + " programs,  " + std::to_string(grid * c.block) +
                                            " offsets,  " + std::to_string(grid * c.block - c.n) + " masked"))
          << r.grid_line;
      const int64_t first = (grid - 1) * c.block;
      if (r.masked)
        EXPECT_TRUE(contains(r.tail_line, "offsets " + std::to_string(first) + ".." + std::to_string(c.n - 1) +
                                              " (arange 0.." + std::to_string(c.n - first - 1) + ") store; offsets " +
                                              std::to_string(c.n) + ".." + std::to_string(first + c.block - 1)))
            << r.tail_line;
      else
        EXPECT_TRUE(contains(r.tail_line, "every offset stores")) << r.tail_line;
      const int threads = c.block < 1024 ? c.block : 1024;
      EXPECT_TRUE(contains(r.block_line, "BLOCK_SIZE = " + std::to_string(c.block) + " counts elements, not threads"));
      EXPECT_TRUE(contains(r.block_line, "so here " + std::to_string(threads) + " threads")) << r.block_line;
      // Triton's 4 warps: 128 threads for the program's elements (the old line said "one CUDA block of 256
      // threads runs it", as if elements were threads).
      EXPECT_TRUE(contains(r.block_line, "by default 4 x 32 = 128")) << r.block_line;
      if (c.block >= 128)
        EXPECT_TRUE(contains(r.block_line, "(" + std::to_string(c.block / 128) + " elements each)")) << r.block_line;
      EXPECT_FALSE(contains(r.block_line, "one CUDA block of")) << r.block_line;
    }
}

// In CUDA a lane is one of a warp's 32 threads; the panel's sentences speak of offsets and elements.
TEST(VectorAddStudy, NoSentenceCallsElementsLanes) {
  const study::VectorAddResult r = study::run_vector_add(Backend::Cpu, settings(1000, 256, 1));
  for (const std::string& s : {r.grid_line, r.block_line, r.tail_line, r.matches_reference.sentence,
                               r.trace_check.sentence})
    EXPECT_FALSE(contains(s, "lane")) << s;
}

TEST(VectorAddStudy, CpuAndCudaConcludeTheSame) {
  KL_REQUIRE_CUDA();
  const ParamValues v = settings(100003, 512, test::next_seed());
  const study::Report c = study::vector_add_report(study::run_vector_add(Backend::Cpu, v));
  const study::Report g = study::vector_add_report(study::run_vector_add(Backend::Cuda, v));
  EXPECT_EQ(study::to_json(c), study::to_json(g));
}

TEST(VectorAddStudy, OutOfRangeSettingsAreInputErrors) {
  ParamValues v(study::vector_add_params());
  EXPECT_THROW(v.set("block_size", "100"), InputError);
  EXPECT_THROW(v.set("n", "0"), InputError);
}

TEST(VectorAddStudy, RegistryEntryReportsChecksAndNumbers) {
  const study::Entry* e = study::find("vector-add");
  ASSERT_NE(e, nullptr);
  ParamValues v(e->params());
  v.set("n", "1000");
  const study::Report rep = e->run(Backend::Cpu, v);
  EXPECT_EQ(rep.settings, "n=1000, block_size=256, seed=1");
  ASSERT_EQ(rep.checks.size(), 2u);
  EXPECT_EQ(rep.checks[0].sentence, "matches reference: yes, max abs diff 0");
  EXPECT_TRUE(rep.checks[0].pass && rep.checks[1].pass);
  EXPECT_EQ(rep.numbers["programs"], 4);
  EXPECT_EQ(rep.numbers["masked"], 24);
  EXPECT_NE(study::to_text(rep).find("[pass] trace: 1000 of 1000 elements stored exactly once"), std::string::npos);
}

// The gallery's missing mask: the elements are right only because this tracer refused the stores past the
// end. The check is not green, and says a plain kernel on a GPU would have stored past the end, usually
// silently; the trace line does not call the unmasked store's offsets masked; the gallery's sentence agrees.
TEST(VectorAddStudy, NoMaskGalleryIsNotGreenAndSaysWhatAGpuWouldDo) {
  editable::worker::set_program(KL_BINARY);
  editable::Source src;
  std::string sentence;
  for (const editable::GalleryBug& b : editable::gallery("vector-add"))
    if (b.file == "no_mask.cu") src = {"vector-add", b.file, b.text}, sentence = b.sentence;
  ASSERT_FALSE(src.text.empty());
  const study::VectorAddResult r = study::run_vector_add(Backend::Cpu, settings(1000, 256, 1), &src);
  EXPECT_FALSE(r.matches_reference.pass);
  EXPECT_TRUE(contains(r.matches_reference.sentence, "stored up to 96 bytes past the end of out's 4000")) << r.matches_reference.sentence;
  EXPECT_TRUE(contains(r.matches_reference.sentence, "on a GPU a plain kernel would, usually silently"))
      << r.matches_reference.sentence;
  EXPECT_FALSE(contains(r.trace_check.sentence, "masked offsets recorded")) << r.trace_check.sentence;
  EXPECT_TRUE(contains(sentence, "a plain kernel on a GPU would store past the end, usually silently")) << sentence;
}

// The text: Triton's default 4 warps = 128 threads hold a program's elements; one thread per element is
// this build's choice (the old text let BLOCK_SIZE = 256 read as 256 threads).
TEST(VectorAddStudy, TextSaysTritonsThreadsAreNotTheElements) {
  std::string text(assets::find("text/vector_add.md"));
  for (char& ch : text) ch = ch == '\n' ? ' ' : ch;
  EXPECT_TRUE(contains(text, "by default 4 warps = 128 threads, so at BLOCK_SIZE = 256 each thread holds 2 elements"))
      << text;
  EXPECT_TRUE(contains(text, "a choice of this build, not the rule")) << text;
  EXPECT_TRUE(contains(text, "the colours repeat every 12")) << text;
}

// The panel's opening line, from the study's numbers, for each case a student meets first.
TEST(VectorAddStudy, NoticeSaysWhatToSee) {
  const study::VectorAddResult r = study::run_vector_add(Backend::Cpu, settings(1000, 256, 1));
  EXPECT_EQ(r.notice, "ceil(1000 / 256) = 4 programs cover 1024 offsets: the last program's 24 offsets past n are "
                      "masked off (hatched), so nothing is loaded or stored past the end");
  EXPECT_EQ(study::vector_add_report(r).notice, r.notice);
  const study::VectorAddResult m = study::run_vector_add(Backend::Cpu, settings(4096, 1024, 1));
  EXPECT_EQ(m.notice.rfind("n = 4096 is a multiple of BLOCK_SIZE = 1024: 4 programs, nothing masked", 0), 0u) << m.notice;
}

}  // namespace
}  // namespace kl
