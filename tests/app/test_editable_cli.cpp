// app/cli/source.* and the --source options of `run` and `shot`: `source KERNEL` prints the rung's
// editable source; an edited copy runs headlessly; compile errors exit 2 with FILE.cu:LINE:COL: error:
// lines; an out-of-bounds store exits 3 with one line saying where; `shot --source` renders the edited
// kernel's views and exits 3 after writing them when it misbehaved.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <regex>

#include "kernels/editable/launch.h"
#include "kernels/runtime/npy.h"
#include "test_util.h"

namespace kl {
namespace {

using test::write_file;

std::string write_npy(const std::string& name, const std::vector<float>& data) {
  return test::write_npy(name, {int64_t(data.size())}, data);
}

std::string edited(const std::string& from, const std::string& to) {
  return test::replaced(editable::shipped_source("vector-add"), from, to);
}

std::string run_args(const std::string& source, const std::string& out) {
  static const std::vector<float> x = test::random_small_ints(1000), y = test::random_small_ints(1000);
  return "run vector-add --backend cpu --set block_size=256 --in x=" + write_npy("ecli_x.npy", x) +
         " --in y=" + write_npy("ecli_y.npy", y) + " --out " + out + " --source " + source;
}

TEST(EditableCli, SourcePrintsTheEditableKernel) {
  std::string out;
  ASSERT_EQ(test::run_cli("source vector-add", &out), 0) << out;
  EXPECT_EQ(out, editable::shipped_source("vector-add"));
  EXPECT_EQ(test::run_cli("source vector-add --variant traced", &out), 0) << out;
  EXPECT_EQ(test::run_cli("source vector-add --variant fast", &out), 2) << out;
  EXPECT_NE(out.find("--variant fast: not editable"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("source flash-attention-backward --variant naive", &out), 2) << out;
  EXPECT_NE(out.find("--variant naive: not editable"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("source no-such-kernel", &out), 2) << out;
  EXPECT_NE(out.find("no editable kernel; editable: attention, flash-attention, flash-attention-backward, relu-dropout, softmax, transpose, vector-add"), std::string::npos) << out;
}

TEST(EditableCli, RunTheUneditedSourceWritesTheSum) {
  const std::string src = write_file("ecli_same.cu", editable::shipped_source("vector-add"));
  const std::string out_path = test::test_file("ecli_out.npy");
  std::string out;
  ASSERT_EQ(test::run_cli(run_args(src, out_path), &out), 0) << out;
  const Array got = npy::read(out_path);
  const Array x = npy::read(test::test_file("ecli_x.npy")), y = npy::read(test::test_file("ecli_y.npy"));
  ASSERT_EQ(got.data.size(), 1000u);
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(got.data[i], x.data[i] + y.data[i]) << i;
}

TEST(EditableCli, CompileErrorsExit2WithTheFilesLines) {
  const std::string src = write_file("ecli_typo.cu", edited("out.store(offset, a + b, mask);", "out.store(offset, a + c, mask);"));
  std::string out;
  EXPECT_EQ(test::run_cli(run_args(src, test::test_file("ecli_unused.npy")), &out), 2) << out;
  const std::regex line(R"((^|\n)[^\n]*ecli_typo\.cu:(\d+):(\d+): error: [^\n]*'c'[^\n]*)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, line)) << out;
  int want = 1;
  const std::string text = edited("out.store(offset, a + b, mask);", "out.store(offset, a + c, mask);");
  for (size_t i = 0; i < text.find("a + c"); ++i) want += text[i] == '\n';
  EXPECT_EQ(std::stoi(m[2].str()), want) << out;
}

TEST(EditableCli, AnOutOfBoundsStoreExits3WithOneLine) {
  const std::string src = write_file("ecli_nomask.cu", edited("out.store(offset, a + b, mask)", "out.store(offset, a + b)"));
  std::string out;
  EXPECT_EQ(test::run_cli(run_args(src, test::test_file("ecli_nomask.npy")), &out), 3) << out;
  EXPECT_EQ(out, "kernel-ladder: out-of-bounds store to out[1000] (size 1000) by program 3, lane 232\n");
}

TEST(EditableCli, ShotRendersTheEditedKernelAndExits3WhenItMisbehaved) {
  const std::string src = write_file("ecli_shot.cu", edited("out.store(offset, a + b, mask)", "out.store(offset, a + b)"));
  const std::string png = test::test_file("ecli_shot.png");
  ::unlink(png.c_str());
  std::string out;
  EXPECT_EQ(test::run_cli("shot vector-add --backend cpu --size 800x600 --out " + png + " --source " + src, &out), 3) << out;
  EXPECT_NE(out.find("kernel-ladder: out-of-bounds store to out[1000] (size 1000) by program 3, lane 232"),
            std::string::npos)
      << out;
  struct stat st{};
  EXPECT_EQ(::stat(png.c_str(), &st), 0) << "no PNG written";
  const std::string typo = write_file("ecli_shot_typo.cu", edited("const bool mask", "const bool mask mask"));
  EXPECT_EQ(test::run_cli("shot vector-add --backend cpu --out " + png + " --source " + typo, &out), 2) << out;
  EXPECT_NE(out.find("ecli_shot_typo.cu:"), std::string::npos) << out;
  const std::string same = write_file("ecli_shot_same.cu", editable::shipped_source("vector-add"));
  EXPECT_EQ(test::run_cli("shot vector-add --backend cpu --size 800x600 --out " + png + " --source " + same, &out), 0) << out;
}

}  // namespace
}  // namespace kl
