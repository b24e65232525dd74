// kernels/editable/gallery_edit.*: a gallery bug is a small edit of its rung's shipped source, applied at
// build time. Every bug's edit applies, each block exactly once, to the current shipped source and gives
// the embedded text (so the gallery cannot drift from the shipped kernels); the edit changes the kernel, not
// only the header; and the format refuses, naming the file, the block and the text, an old text that is
// missing, ambiguous or overlapping, and edits that are malformed.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kernels/editable/gallery_edit.h"
#include "kernels/editable/launch.h"
#include "kernels/runtime/errors.h"

namespace kl {
namespace {

using editable::apply_gallery_edit;

const char* const kShipped =
    "// header\n"
    "int a = 1;\n"
    "int b = 2;\n"
    "  int a = 1;\n"
    "int c = 3;\n"
    "return a + b + c;\n";

// The message apply_gallery_edit throws for `edit` against kShipped, or "" when it applies.
std::string error_of(const std::string& edit, const std::string& shipped = kShipped) {
  try {
    apply_gallery_edit(shipped, "toy.cu", edit, "gallery/toy/bug.edit");
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "";
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// [SECTION] The format -------------------------------------------------------------------------------

TEST(EditableGalleryEdit, ReplacesInsertsAndDeletesWholeLinesAfterTheHeader) {
  const std::string edit =
      "// Gallery: three blocks, listed out of order.\n"
      "@@ replace\nreturn a + b + c;\n@@ with\nreturn a + b;  // c forgotten\n@@ end\n"
      "\n"
      "@@ replace\nint b = 2;\n@@ with\nint b = 2;\nint d = 4;\n@@ end\n"
      "@@ replace\nint c = 3;\n@@ with\n@@ end\n";
  EXPECT_EQ(apply_gallery_edit(kShipped, "toy.cu", edit, "bug.edit"),
            "// Gallery: three blocks, listed out of order.\n"
            "// header\n"
            "int a = 1;\n"
            "int b = 2;\n"
            "int d = 4;\n"
            "  int a = 1;\n"
            "return a + b;  // c forgotten\n");
}

TEST(EditableGalleryEdit, OldTextMatchesOnlyAtTheStartOfALine) {
  // "int a = 1;" also ends the indented line 4, which is not an occurrence: the block applies once.
  const std::string edit = "// Gallery: x.\n@@ replace\nint a = 1;\n@@ with\nint a = 0;\n@@ end\n";
  const std::string out = apply_gallery_edit(kShipped, "toy.cu", edit, "bug.edit");
  EXPECT_NE(out.find("\nint a = 0;\n"), std::string::npos);
  EXPECT_NE(out.find("\n  int a = 1;\n"), std::string::npos);
}

TEST(EditableGalleryEdit, MissingOldTextNamesTheFileTheBlockAndTheText) {
  const std::string e = error_of(
      "// Gallery: x.\n"
      "@@ replace\nint b = 2;\n@@ with\nint b = 3;\n@@ end\n"
      "@@ replace\nint e = 5;\nint f = 6;\n@@ with\n@@ end\n");
  EXPECT_NE(e.find("gallery/toy/bug.edit: block 2 (line 7): old text not found in toy.cu: 'int e = 5;'"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("(and the lines after it)"), std::string::npos) << e;
}

TEST(EditableGalleryEdit, AmbiguousOldTextIsRefusedWithItsLines) {
  const std::string shipped = std::string(kShipped) + "int b = 2;\n  __syncthreads();\nint b = 2;\n";
  const std::string e = error_of("// Gallery: x.\n@@ replace\nint b = 2;\n@@ with\nint b = 5;\n@@ end\n", shipped);
  EXPECT_EQ(e, "gallery/toy/bug.edit: block 1 (line 2): old text occurs 3 times in toy.cu (lines 3, 7, 9), "
               "it must occur once: 'int b = 2;'");
  // More lines of context make it unique.
  EXPECT_EQ(error_of("// Gallery: x.\n@@ replace\nint b = 2;\n  __syncthreads();\n@@ with\n@@ end\n", shipped), "");
  // Old text is whole lines: "int" is the start of three lines but no line of kShipped.
  EXPECT_NE(error_of("// Gallery: x.\n@@ replace\nint\n@@ with\nlong\n@@ end\n").find("old text not found in toy.cu: 'int'"),
            std::string::npos);
}

TEST(EditableGalleryEdit, OverlappingBlocksAreRefused) {
  const std::string e = error_of(
      "// Gallery: x.\n"
      "@@ replace\nint a = 1;\nint b = 2;\n@@ with\n@@ end\n"
      "@@ replace\nint b = 2;\n@@ with\nint b = 5;\n@@ end\n");
  EXPECT_NE(e.find("gallery/toy/bug.edit: block at line 7 overlaps another block in toy.cu"), std::string::npos) << e;
}

TEST(EditableGalleryEdit, MalformedEditsAreRefusedAtTheirLine) {
  EXPECT_NE(error_of("@@ replace\nint b = 2;\n@@ with\n@@ end\n").find("bug.edit:1: the first line must be '// Gallery: "),
            std::string::npos);
  EXPECT_NE(error_of("// Gallery: \n@@ replace\nint b = 2;\n@@ with\n@@ end\n").find("bug.edit:1:"), std::string::npos);
  EXPECT_NE(error_of("// Gallery: x.\n").find("no '@@ replace' block"), std::string::npos);
  EXPECT_NE(error_of("// Gallery: x.\nint b = 2;\n").find("bug.edit:2: expected '@@ replace'"), std::string::npos);
  EXPECT_NE(error_of("// Gallery: x.\n@@ replace\nint b = 2;\n@@ with\nint b = 3;\n").find("block 1 (line 2) has no '@@ end'"),
            std::string::npos);
  EXPECT_NE(error_of("// Gallery: x.\n@@ replace\n@@ with\n@@ end\n").find("bug.edit:3: block 1 has no old text"),
            std::string::npos);
  EXPECT_NE(error_of("// Gallery: x.\n@@ replace\nint b = 2;\n@@ end\n").find("bug.edit:4: '@@ end' before '@@ with'"),
            std::string::npos);
  EXPECT_NE(error_of("// Gallery: x.\n@@ replace\nint b = 2;\n@@ width\n@@ end\n").find("bug.edit:4: unknown marker"),
            std::string::npos);
}

// [SECTION] The shipped gallery ----------------------------------------------------------------------

// Every embedded bug, against its rung's shipped source as this build embeds it.
TEST(EditableGallery, EveryBugIsItsEditAppliedOnceToTheCurrentShippedSource) {
  std::set<std::string> seen;
  for (const std::string& rung : editable::shipped_rungs()) {
    const std::string shipped = editable::shipped_source(rung);
    for (const editable::GalleryBug& b : editable::gallery(rung)) {
      SCOPED_TRACE(rung + "/" + b.file);
      seen.insert(rung + "/" + b.file);
      ASSERT_FALSE(b.edit.empty()) << "no embedded edit for the bug";
      ASSERT_EQ(b.edit.rfind("// Gallery: " + b.sentence + "\n", 0), 0u) << "the edit's header is the sentence";
      const std::string text = apply_gallery_edit(shipped, editable::shipped_file(rung), b.edit, b.file);
      EXPECT_EQ(text, b.text) << "the embedded text is the edit applied to the current shipped source";
      const std::string body = text.substr(text.find('\n') + 1);
      EXPECT_NE(body, shipped) << "the edit changes the kernel, not only its first line";
      // Each block's old text, as whole lines, occurs exactly once in the shipped source.
      size_t blocks = 0;
      for (size_t p = b.edit.find("\n@@ replace\n"); p != std::string::npos; p = b.edit.find("\n@@ replace\n", p + 1)) {
        const size_t from = p + 12, to = b.edit.find("@@ with\n", from);
        ASSERT_NE(to, std::string::npos);
        const std::string old_text = b.edit.substr(from, to - from);
        EXPECT_EQ(count_of("\n" + shipped, "\n" + old_text), 1u) << "block " << blocks + 1 << ": '" << old_text << "'";
        ++blocks;
      }
      EXPECT_GE(blocks, 1u);
    }
  }
  // The galleries README lists; a rung's directory without a shipped source is a configure error.
  const std::set<std::string> expected = {
      "vector-add/no_mask.cu",        "vector-add/off_by_one_grid.cu",
      "relu-dropout/scale_by_p.cu",   "softmax/hard_coded_block_size.cu",
      "softmax/missing_syncthreads.cu", "softmax/no_max_subtraction.cu",
      "attention/no_scale.cu",        "flash-attention/causal_top_left.cu",
      "flash-attention/no_alpha_rescale.cu", "flash-attention-backward/ds_without_d.cu",
      "transpose/strided_read.cu",    "transpose/tile_without_padding.cu",
      "transpose/transposed_index_in_tile.cu"};
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace kl
