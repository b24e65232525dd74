// editable::launch: arguments packed as the kernel takes them, checked against the kernel's own signature,
// run on the shipped build or an edited one, the first fault read back and named.
#include "kernels/editable/launch.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <sched.h>

#include "assets/embedded.h"
#include "kernels/editable/compile.h"
#include "kernels/editable/launch_detail.h"
#include "kernels/editable/shipped_table.h"
#include "kernels/editable/worker.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/fault.h"

namespace kl::editable {

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
    case DType::U32: return 4;
    case DType::U8: return 1;
  }
  return 0;
}

Arg tensor(std::string name, DType t, void* data, int64_t size, bool output, int32_t* writer, uint32_t* count) {
  Arg a;
  a.is_tensor = true;
  a.tensor.name = std::move(name);
  a.tensor.dtype = t;
  a.tensor.data = data;
  a.tensor.size = size;
  a.tensor.output = output;
  a.tensor.writer = writer;
  a.tensor.count = count;
  return a;
}
Arg absent(std::string name, DType t) { return tensor(std::move(name), t, nullptr, 0, false); }
static Arg scalar(std::string name, ScalarArg::Kind k, int64_t i, double f) {
  Arg a;
  a.scalar.kind = k;
  a.scalar.name = std::move(name);
  a.scalar.i = i;
  a.scalar.f = f;
  return a;
}
Arg i32(std::string name, int32_t v) { return scalar(std::move(name), ScalarArg::I32, v, 0); }
Arg i64(std::string name, int64_t v) { return scalar(std::move(name), ScalarArg::I64, v, 0); }
Arg f32(std::string name, float v) { return scalar(std::move(name), ScalarArg::F32, 0, v); }

std::string Fault::text() const {
  char b[512];
  switch (kind) {
    case None: return "ran cleanly";
    case OutOfBounds:
      std::snprintf(b, sizeof b, "out-of-bounds %s %s %s[%" PRId64 "] (size %" PRId64 ") by program %" PRId64
                    ", lane %" PRId64, store ? "store" : "load", store ? "to" : "from", tensor.c_str(), index, size,
                    program, lane);
      return b;
    case Deadlock: return "deadlock: " + detail;
    case DeviceFault: return "device fault: " + detail;
    case TimeLimit: return "time limit: " + detail;
    case Crash: return "crash: " + detail;
  }
  return detail;
}

namespace detail {

char code_of(const Arg& a) {
  if (a.is_tensor) {
    switch (a.tensor.dtype) {
      case DType::F32: return 'F';
      case DType::I32: return 'I';
      case DType::U32: return 'U';
      case DType::U8: return 'B';
    }
  }
  switch (a.scalar.kind) {
    case ScalarArg::I32: return 'i';
    case ScalarArg::I64: return 'l';
    case ScalarArg::F32: return 'f';
  }
  return '?';
}

std::string type_of_code(char c) {
  switch (c) {
    case 'F': return "kl::Tensor<float>";
    case 'I': return "kl::Tensor<int32_t>";
    case 'U': return "kl::Tensor<uint32_t>";
    case 'B': return "kl::Tensor<uint8_t>";
    case 'i': return "int";
    case 'l': return "int64_t";
    case 'f': return "float";
  }
  return "an unsupported type";
}

std::string signature_text(const Launch& l) {
  std::string s = l.kernel + "(";
  for (size_t i = 0; i < l.args.size(); ++i) {
    const Arg& a = l.args[i];
    s += (i ? ", " : "") + type_of_code(code_of(a)) + " " + (a.is_tensor ? a.tensor.name : a.scalar.name);
  }
  return s + ")";
}

std::string check_params(const std::string& have, const Launch& l) {
  std::string want;
  for (const Arg& a : l.args) want += code_of(a);
  if (have == want) return "";
  return l.kernel + " takes " + std::to_string(have.size()) + " parameters (" + [&] {
    std::string t;
    for (size_t i = 0; i < have.size(); ++i) t += (i ? ", " : "") + type_of_code(have[i]);
    return t;
  }() + "); the " + (l.rung.empty() ? std::string("rung") : l.rung) + " rung launches " + signature_text(l);
}

void check_shape(const Launch& l) {
  const uint64_t threads = uint64_t(l.block.x) * l.block.y * l.block.z;
  if (threads == 0 || threads > 1024)
    throw InputError(l.kernel + ": " + std::to_string(threads) + " threads per block is out of range: allowed [1, 1024]");
  if (l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0 || l.grid.y > 65535 || l.grid.z > 65535 ||
      uint64_t(l.grid.x) > 2147483647ull)
    throw InputError(l.kernel + ": grid (" + std::to_string(l.grid.x) + ", " + std::to_string(l.grid.y) + ", " +
                     std::to_string(l.grid.z) + ") is out of range: x in [1, 2^31-1], y and z in [1, 65535]");
  if (l.shared_bytes > kMaxDynamicShared)
    throw InputError(l.kernel + ": " + std::to_string(l.shared_bytes) +
                     " bytes of dynamic shared memory is out of range: allowed [0, " +
                     std::to_string(kMaxDynamicShared) + "]");
}

Packed pack(const Launch& l) {
  Packed p;
  p.tensors.reserve(l.args.size());
  p.scalars.reserve(l.args.size());
  for (size_t i = 0; i < l.args.size(); ++i) {
    const Arg& a = l.args[i];
    if (a.is_tensor) {
      p.tensors.push_back({a.tensor.data, a.tensor.size, a.tensor.writer, a.tensor.count, a.tensor.access, int32_t(i)});
      p.ptrs.push_back(&p.tensors.back());
      continue;
    }
    int64_t slot = 0;
    if (a.scalar.kind == ScalarArg::I32) {
      const int32_t v = int32_t(a.scalar.i);
      std::memcpy(&slot, &v, 4);
    } else if (a.scalar.kind == ScalarArg::I64) {
      slot = a.scalar.i;
    } else {
      const float v = float(a.scalar.f);
      std::memcpy(&slot, &v, 4);
    }
    p.scalars.push_back(slot);
    p.ptrs.push_back(&p.scalars.back());
  }
  return p;
}

Fault fault_from(const FaultRecord& r, const Launch& l) {
  Fault f;
  if (r.kind != 1 && r.kind != 2) return f;
  f.kind = Fault::OutOfBounds;
  f.store = r.kind == 2;
  const Arg* a = r.tensor >= 0 && size_t(r.tensor) < l.args.size() ? &l.args[size_t(r.tensor)] : nullptr;
  f.tensor = a ? a->tensor.name : "tensor " + std::to_string(r.tensor);
  f.program = r.program;
  f.lane = r.lane;
  f.index = r.index;
  f.size = r.size;
  return f;
}

int cpu_threads() {
  const char* v = std::getenv("KL_CPU_THREADS");
  if (v && *v) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 256)
      throw InputError(
          out_of_range_message("KL_CPU_THREADS", v, "an integer in [1, 256] (CPU threads a launch may use)"));
    return int(n);
  }
  // The CPUs this process may run on (a container's cpuset, as nproc counts them), else the machine's.
  cpu_set_t set;
  const int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const int hw = allowed > 0 ? allowed : int(std::thread::hardware_concurrency());
  return std::clamp(hw, 1, 8);
}

Fault run_cpu_entry(kl_cpu::EntryFn entry, const Launch& l, void** args, int threads) {
  fault::at_launch((l.kernel + " (CPU backend)").c_str());
  kl_cpu::Launch cl{};
  cl.threads = uint32_t(threads);
  cl.grid[0] = l.grid.x, cl.grid[1] = l.grid.y, cl.grid[2] = l.grid.z;
  cl.block[0] = l.block.x, cl.block[1] = l.block.y, cl.block[2] = l.block.z;
  cl.dynamic_shared_bytes = l.shared_bytes;
  entry(&cl, args);
  FaultRecord r{cl.fault_kind, cl.fault_tensor, cl.fault_program, cl.fault_lane, cl.fault_index, cl.fault_size};
  Fault f = fault_from(r, l);
  if (f.kind == Fault::None && cl.deadlock) {
    f.kind = Fault::Deadlock;
    f.detail = cl.deadlock_text;
  }
  return f;
}

}  // namespace detail

namespace {

const shipped::Source* shipped_for(const std::string& rung) {
  for (const shipped::Source* s = shipped::sources(); s->rung; ++s)
    if (rung == s->rung) return s;
  return nullptr;
}

// The shipped source holding `l.kernel` (l.rung's, or the only one that has it).
const shipped::Source& shipped_holding(const Launch& l) {
  if (!l.rung.empty()) {
    const shipped::Source* s = shipped_for(l.rung);
    if (!s) throw RuntimeError("editable::launch: no shipped source for rung " + l.rung);
    return *s;
  }
  const shipped::Source* found = nullptr;
  for (const shipped::Source* s = shipped::sources(); s->rung; ++s)
    for (const shipped::CpuKernel* k = s->cpu; k->name; ++k)
      if (l.kernel == k->name) {
        if (found) throw RuntimeError("editable::launch: kernel " + l.kernel + " is in several sources; set Launch::rung");
        found = s;
      }
  if (!found) throw RuntimeError("editable::launch: no shipped kernel named " + l.kernel);
  return *found;
}

Fault run_shipped(Backend b, const Launch& l) {
  const shipped::Source& s = shipped_holding(l);
  detail::Packed p = detail::pack(l);
  if (b == Backend::Cpu) {
    for (const shipped::CpuKernel* k = s.cpu; k->name; ++k) {
      if (l.kernel != k->name) continue;
      if (std::string e = detail::check_params(k->params, l); !e.empty()) throw RuntimeError("shipped " + std::string(s.file) + ": " + e);
      return detail::run_cpu_entry(k->entry, l, p.ptrs.data(), detail::cpu_threads());
    }
    throw RuntimeError("shipped " + std::string(s.file) + " has no kernel " + l.kernel);
  }
#ifdef KL_HAS_CUDA
  if (!s.cuda) throw RuntimeError("shipped " + std::string(s.file) + " was built without CUDA");
  return detail::run_shipped_cuda(*s.cuda, s.file, l, p.ptrs.data());
#else
  throw RuntimeError("built without CUDA");
#endif
}

}  // namespace

Fault run_in_process(Backend b, const Source* src, const Launch& l) {
  detail::check_shape(l);
  if (!src) return run_shipped(b, l);
  std::shared_ptr<Module> m = compile(b, *src);
  const std::string have = m->params(l.kernel);
  if (std::string e = detail::check_params(have, l); !e.empty())
    throw CompileError({Diagnostic{src->file, m->line_of(l.kernel), 1, e}});
  detail::Packed p = detail::pack(l);
  return m->run(l, p.ptrs.data());
}

Fault launch(Backend b, const Source* src, const Launch& l) {
  if (!src) return run_in_process(b, nullptr, l);
  return worker::run(b, *src, l);
}

void check_compiles(Backend b, const Source& src) { worker::check(b, src); }

std::string shipped_source(const std::string& rung) {
  const shipped::Source* s = shipped_for(rung);
  return s ? std::string(assets::find(s->asset)) : std::string();
}

std::string shipped_file(const std::string& rung) {
  const shipped::Source* s = shipped_for(rung);
  return s ? s->file : "";
}

std::vector<std::string> shipped_rungs() {
  std::vector<std::string> v;
  for (const shipped::Source* s = shipped::sources(); s->rung; ++s) v.push_back(s->rung);
  return v;
}

namespace {
std::mutex g_edits_mutex;
std::map<std::string, Source>& edits() {
  static std::map<std::string, Source> m;
  return m;
}
}  // namespace

void set_edited(const Source& s) {
  std::lock_guard<std::mutex> lock(g_edits_mutex);
  edits()[s.rung] = s;
}

void reset_edited(const std::string& rung) {
  std::lock_guard<std::mutex> lock(g_edits_mutex);
  edits().erase(rung);
}

std::optional<Source> edited(const std::string& rung) {
  std::lock_guard<std::mutex> lock(g_edits_mutex);
  auto it = edits().find(rung);
  if (it == edits().end()) return std::nullopt;
  return it->second;
}

std::vector<GalleryBug> gallery(const std::string& rung) {
  std::string stem = rung;
  for (char& c : stem)
    if (c == '-') c = '_';
  const std::string prefix = "editable/gallery/" + stem + "/";
  std::vector<GalleryBug> v;
  for (std::string_view name : assets::names()) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    GalleryBug b;
    b.file = std::string(name.substr(prefix.size()));
    b.name = b.file.substr(0, b.file.rfind('.'));
    b.edit = std::string(assets::find("editable/gallery-edit/" + stem + "/" + b.name + ".edit"));
    for (char& c : b.name)
      if (c == '_') c = ' ';
    b.text = std::string(assets::find(name));
    const std::string tag = "// Gallery: ";
    if (b.text.rfind(tag, 0) == 0) b.sentence = b.text.substr(tag.size(), b.text.find('\n') - tag.size());
    v.push_back(std::move(b));
  }
  return v;
}

std::string embedded_header(const std::string& name) { return std::string(assets::find("editable/" + name)); }

}  // namespace kl::editable
