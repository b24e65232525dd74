// Compiling an edited source at run time, for the CPU backend (the system C++ compiler against the
// embedded prelude, loaded with dlopen) and the CUDA one (NVRTC, loaded with the driver API). Modules
// are cached by (backend, source text); a source that does not compile throws CompileError with the
// compiler's diagnostics at the user's file name and line.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/errors.h"

namespace kl::editable {

struct Diagnostic {
  std::string file;  // the user's file name (Source::file)
  int line = 0, col = 0;
  std::string message;  // the compiler's words, "error: " stripped
  std::string text() const;  // "FILE.cu:LINE:COL: error: MESSAGE"
};

// An InputError: the user's source is at fault (exit 2). what() is every diagnostic's text(), one a line.
struct CompileError : InputError {
  explicit CompileError(std::vector<Diagnostic> d);
  std::vector<Diagnostic> diagnostics;
};

// One compiled source.
class Module {
 public:
  virtual ~Module() = default;
  // The kernel's parameter codes (kl::detail::SignatureOf's text); throws CompileError when the source
  // has no __global__ function of that name.
  virtual std::string params(const std::string& kernel) const = 0;
  virtual int line_of(const std::string& kernel) const = 0;  // its line in the source (1 if unknown)
  // Runs the launch: tensors already where the backend runs, args packed as the kernel takes them.
  virtual Fault run(const Launch& l, void** args) = 0;
};

// Compiled (or taken from the cache). Throws CompileError, or RuntimeError when no compiler can be run.
std::shared_ptr<Module> compile(Backend b, const Source& src);

// The command line the CPU build runs (for the README and messages): "c++ -std=c++17 -O2 ...".
std::string cpu_compiler_command();

}  // namespace kl::editable
