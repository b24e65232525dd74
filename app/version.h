// What `kernel-ladder --version` prints: "kernel-ladder 0.1.0 (commit 1a2b3c4)", the commit as
// `git describe --always --dirty` gave it when the binary was built ("unknown" outside a git checkout).
// Defined in a source generated at build time (cmake/version.cmake).
#pragma once

namespace kl {
const char* version_text();
}  // namespace kl
