// Editable kernels (issue 15): the contract between a rung's host code, the shipped build of its editable
// source, a user's edited build of it (host compiler + CPU prelude, or NVRTC), and the worker process.
//
// Every rung's traced kernel is one CUDA source in kernels/editable/sources/<rung>.cu, self-contained
// apart from the embedded tracing header "kl.cuh". The same file is compiled at build time (nvcc for the
// CUDA backend; the host compiler with the CPU prelude for the CPU backend) and is what the shipped views
// draw; `kernel-ladder source KERNEL` prints it. A rung launches its traced kernel by describing the
// launch (Launch below) and calling editable::launch(): with no edited source it runs the shipped build
// in process; with one it runs the edited build in the worker process (kernels/editable/worker.h), so
// a faulty kernel never touches the app's CUDA context or GL interop.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"

namespace kl::editable {

enum class DType : uint8_t { F32, I32, U32, U8 };
size_t dtype_bytes(DType t);

// One kl::Tensor<T> parameter of the kernel. `data`, `writer` and `count` live where the backend runs
// (device pointers on CUDA). writer/count may be null (not traced): when given, every store the kernel
// makes through the tracing API records writer[i] = the storing program's id and count[i] += 1.
struct TensorArg {
  std::string name;   // the parameter's name in the kernel's signature, used in fault messages ("out")
  DType dtype = DType::F32;
  void* data = nullptr;
  int64_t size = 0;   // elements; loads and stores past it are faults, caught and located
  int32_t* writer = nullptr;
  uint32_t* count = nullptr;
  bool output = false;  // written by the kernel (copied back from the worker)
  // An access log (kernels/runtime/trace.h: AccessLog) where the backend runs, or null: when given, the
  // kernel records every lane's loads and stores through this tensor into it (issue 31).
  uint64_t* access = nullptr;
  int64_t access_words = 0;
};

struct ScalarArg {
  enum Kind : uint8_t { I32, I64, F32 } kind = I32;
  std::string name;
  int64_t i = 0;
  double f = 0;
};

struct Arg {
  bool is_tensor = false;
  TensorArg tensor;
  ScalarArg scalar;
};
Arg tensor(std::string name, DType t, void* data, int64_t size, bool output, int32_t* writer = nullptr,
           uint32_t* count = nullptr);
Arg i32(std::string name, int32_t v);
Arg i64(std::string name, int64_t v);
Arg f32(std::string name, float v);

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// One launch of one __global__ function of an editable source, arguments in signature order.
struct Launch {
  std::string rung;    // the rung whose editable source holds the kernel ("vector-add"); for src == nullptr
  std::string kernel;  // the __global__ function's name in the source ("vector_add")
  Dim3 grid, block;
  size_t shared_bytes = 0;  // dynamic shared memory
  std::vector<Arg> args;
};

// The first run-time misbehaviour of a launch. kind None: the launch ran cleanly.
struct Fault {
  enum Kind : uint8_t {
    None,
    OutOfBounds,   // a load or store through the tracing API past its tensor (program, lane, index, size)
    Deadlock,      // CPU prelude: the threads of a block wait at different barriers
    DeviceFault,   // CUDA: an illegal address or another sticky error (in the worker, whose context dies)
    TimeLimit,     // the worker ran past its time limit and was stopped
    Crash,         // the worker ended without answering (a signal: SIGSEGV, SIGBUS, ...)
  } kind = None;
  std::string tensor;     // OutOfBounds: the tensor's name
  bool store = false;     // OutOfBounds: a store (else a load)
  int64_t program = -1;   // OutOfBounds: blockIdx.x (y, z linearised into it)
  int64_t lane = -1;      // OutOfBounds: threadIdx.x (y, z linearised)
  int64_t index = -1;     // OutOfBounds: the element index asked for
  int64_t size = 0;       // OutOfBounds: the tensor's size in elements
  std::string detail;     // other kinds: what happened, in one line
  std::string text() const;  // one line, e.g. "out-of-bounds store to out[1000] (size 1000) by program 0, lane 1000"
};

// An edited source, as the editor or `--source FILE.cu` gives it. `file` names it in diagnostics.
struct Source {
  std::string rung;  // the rung's registry name ("vector-add")
  std::string file;  // "FILE.cu" as the user named it, or "<rung>.cu (edited)"
  std::string text;
};

// A rung's host code throws this when an edited kernel misbehaved and the caller wants no partial
// result (`run`: exit 3 with what()); what() is fault.text().
struct FaultError : std::runtime_error {
  explicit FaultError(Fault f) : std::runtime_error(f.text()), fault(std::move(f)) {}
  Fault fault;
};

// Runs one launch. src == nullptr: the shipped build, in process, through the one checked launch path.
// src given: compiled (cached by text and backend) and run in the worker; tensors are staged through the
// host and copied back. Returns the fault (kind None if clean). Throws CompileError (kernels/editable/
// compile.h) when the edited source does not compile, InputError for a bad launch shape.
Fault launch(Backend b, const Source* src, const Launch& l);

// Compiles an edited source where launch() would run it (the worker) and runs nothing: throws CompileError
// with the compiler's diagnostics, or returns. For the editor's Ctrl+Enter before the panel recomputes.
void check_compiles(Backend b, const Source& src);

// The same in this process: the shipped build (src == nullptr) or the edited source compiled here. The
// worker runs its launches with it; tests call it directly. A kernel that crashes takes this process down.
Fault run_in_process(Backend b, const Source* src, const Launch& l);

// The editable source of a rung as shipped ("vector-add" -> kernels/editable/sources/vector_add.cu's text);
// empty for a rung with none. shipped_rungs(): every rung that has one, in ladder order of the files.
std::string shipped_source(const std::string& rung);
std::string shipped_file(const std::string& rung);  // "vector_add.cu"
std::vector<std::string> shipped_rungs();
// The embedded headers an edited source is compiled against: "kl.cuh" and "kl_cpu.h".
std::string embedded_header(const std::string& name);

// The edited source each rung runs instead of its shipped one, as the app holds it (the editor's
// Ctrl+Enter, `shot PANEL --source FILE.cu`): studies called without an explicit source use it. Thread-safe.
void set_edited(const Source& s);            // keyed by s.rung
void reset_edited(const std::string& rung);  // back to the shipped source
std::optional<Source> edited(const std::string& rung);

// The rung's gallery of named bugs, in file order: each kernels/editable/gallery/<rung>/<bug>.edit is a small
// edit of the shipped source (kernels/editable/gallery_edit.h), applied at build time; the embedded text is
// the whole edited source, its first line "// Gallery: <one sentence on what to look for>".
struct GalleryBug {
  std::string name;      // "no mask" (the file's name, underscores as spaces)
  std::string sentence;  // what to look for
  std::string file;      // "no_mask.cu"
  std::string text;      // the whole source, ready to run as an edited one
  std::string edit;      // the text of no_mask.edit that `text` was built from
};
std::vector<GalleryBug> gallery(const std::string& rung);

// An absent tensor (an optional trace record the caller does not want): data null, size 0; stores to it
// are dropped, loads return 0, neither is a fault.
Arg absent(std::string name, DType t);

}  // namespace kl::editable
