// A gallery bug as a small edit of its rung's shipped source (kernels/editable/gallery/<rung>/<bug>.edit),
// applied at build time (kernels/editable/gen/wrapper_gen.cpp) so the embedded gallery holds full texts and
// each rung has one source. The format, line by line:
//
//   // Gallery: <one sentence on what to look for>      the first line, copied as the bug's first line
//   @@ replace                                          then one or more blocks:
//   <old lines, exactly as in the shipped source>
//   @@ with
//   <new lines (none: the old lines are deleted)>
//   @@ end
//
// Between blocks only blank lines. Each old text is whole lines and must occur exactly once in the shipped
// source (at the start of a line); blocks must not overlap. The bug's text is the header line followed by
// the shipped source with every block applied. Anything else is an error naming the edit, the block (its
// number and line) and the text: an edit that no longer fits its shipped source is never skipped.
#pragma once
#include <string>

namespace kl::editable {

// The bug's full text, or kl::RuntimeError naming edit_name (the .edit file) and shipped_name.
std::string apply_gallery_edit(const std::string& shipped, const std::string& shipped_name,
                               const std::string& edit, const std::string& edit_name);

}  // namespace kl::editable
