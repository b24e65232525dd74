#include "kernels/editable/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "kernels/editable/compile.h"
#include "kernels/editable/launch_detail.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"

extern char** environ;

namespace kl::editable::worker {

using nlohmann::json;

namespace {

// ---- messages: an 8-byte length, then that many bytes of JSON; a job's first message carries the
// shared-memory file descriptor -------------------------------------------------------------------------
bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w, n -= size_t(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    const ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= size_t(r);
  }
  return true;
}

bool send_message(int fd, const json& j, int pass_fd = -1) {
  const std::string body = j.dump();
  uint64_t len = body.size();
  msghdr m{};
  iovec iov{&len, sizeof len};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t w;
  do w = ::sendmsg(fd, &m, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w != ssize_t(sizeof len)) return false;
  return write_all(fd, body.data(), body.size());
}

// false on end of stream. *got_fd: the descriptor passed with it, or -1.
bool receive_message(int fd, json* j, int* got_fd) {
  uint64_t len = 0;
  msghdr m{};
  iovec iov{&len, sizeof len};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  ssize_t r;
  do r = ::recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  while (r < 0 && errno == EINTR);
  if (r != ssize_t(sizeof len) || len > (uint64_t(1) << 32)) return false;
  if (got_fd) {
    *got_fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(got_fd, CMSG_DATA(c), sizeof(int));
  }
  std::string body(len, '\0');
  if (!read_all(fd, body.data(), body.size())) return false;
  *j = json::parse(body, nullptr, false);
  return !j->is_discarded();
}

// ---- the layout of a launch's tensors in the shared file -----------------------------------------------
struct Slot {
  int64_t data = -1, writer = -1, count = -1, access = -1;  // byte offsets; -1: none
};

size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

std::vector<Slot> layout(const Launch& l, size_t* total) {
  std::vector<Slot> s(l.args.size());
  size_t at = 0;
  for (size_t i = 0; i < l.args.size(); ++i) {
    if (!l.args[i].is_tensor) continue;
    const TensorArg& t = l.args[i].tensor;
    const size_t n = size_t(t.size);
    if (t.data) s[i].data = int64_t(at), at = align64(at + n * dtype_bytes(t.dtype));
    if (t.writer) s[i].writer = int64_t(at), at = align64(at + n * 4);
    if (t.count) s[i].count = int64_t(at), at = align64(at + n * 4);
    if (t.access) s[i].access = int64_t(at), at = align64(at + size_t(t.access_words) * 8);
  }
  *total = at ? at : 64;
  return s;
}

json launch_json(const Launch& l, const std::vector<Slot>& slots) {
  json a = json::array();
  for (size_t i = 0; i < l.args.size(); ++i) {
    const Arg& x = l.args[i];
    if (x.is_tensor)
      a.push_back({{"tensor", x.tensor.name}, {"dtype", int(x.tensor.dtype)}, {"size", x.tensor.size},
                   {"output", x.tensor.output}, {"data", slots[i].data}, {"writer", slots[i].writer},
                   {"count", slots[i].count}, {"access", slots[i].access}, {"access_words", x.tensor.access_words}});
    else
      a.push_back({{"scalar", x.scalar.name}, {"kind", int(x.scalar.kind)}, {"i", x.scalar.i}, {"f", x.scalar.f}});
  }
  return {{"rung", l.rung}, {"kernel", l.kernel}, {"grid", {l.grid.x, l.grid.y, l.grid.z}},
          {"block", {l.block.x, l.block.y, l.block.z}}, {"shared", l.shared_bytes}, {"args", a}};
}

json fault_json(const Fault& f) {
  return {{"kind", int(f.kind)}, {"tensor", f.tensor}, {"store", f.store}, {"program", f.program}, {"lane", f.lane},
          {"index", f.index}, {"size", f.size}, {"detail", f.detail}};
}

Fault fault_of(const json& j) {
  Fault f;
  f.kind = Fault::Kind(j.at("kind").get<int>());
  f.tensor = j.at("tensor").get<std::string>();
  f.store = j.at("store").get<bool>();
  f.program = j.at("program").get<int64_t>();
  f.lane = j.at("lane").get<int64_t>();
  f.index = j.at("index").get<int64_t>();
  f.size = j.at("size").get<int64_t>();
  f.detail = j.at("detail").get<std::string>();
  return f;
}

json error_json(const std::exception& e) {
  if (auto* c = dynamic_cast<const CompileError*>(&e)) {
    json d = json::array();
    for (const Diagnostic& x : c->diagnostics)
      d.push_back({{"file", x.file}, {"line", x.line}, {"col", x.col}, {"message", x.message}});
    return {{"stage", "compile_error"}, {"diagnostics", d}};
  }
  return {{"stage", "error"}, {"input", dynamic_cast<const InputError*>(&e) != nullptr}, {"message", e.what()}};
}

[[noreturn]] void rethrow(const json& j) {
  if (j.value("stage", "") == "compile_error") {
    std::vector<Diagnostic> d;
    for (const json& x : j.at("diagnostics"))
      d.push_back({x.at("file").get<std::string>(), x.at("line").get<int>(), x.at("col").get<int>(),
                   x.at("message").get<std::string>()});
    throw CompileError(d);
  }
  const std::string m = j.value("message", std::string("the worker failed"));
  if (j.value("input", false)) throw InputError(m);
  throw RuntimeError(m);
}

// ---- the app's side ------------------------------------------------------------------------------------
std::mutex g_mutex;  // one launch at a time
double g_limit = [] {
  const char* v = std::getenv("KL_EDIT_TIME_LIMIT");
  const double s = v ? std::atof(v) : 0;
  return s > 0 ? s : 10.0;
}();
std::string g_program = [] {
  const char* v = std::getenv("KL_WORKER");
  return std::string(v && *v ? v : "/proc/self/exe");
}();

struct Process {
  pid_t pid = 0;
  int fd = -1;
  ~Process() { end(false); }
  // Ends it (SIGKILL when `kill`, else by closing its socket) and returns how it ended, in words.
  std::string end(bool kill) {
    if (!pid) return "";
    if (kill) ::kill(pid, SIGKILL);
    if (fd >= 0) ::close(fd);
    fd = -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = 0;
    if (WIFSIGNALED(status))
      return std::string("the worker was ended by signal ") + std::to_string(WTERMSIG(status)) + " (" +
             strsignal(WTERMSIG(status)) + ")";
    return "the worker exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
};
Process g_worker;

void start() {
  if (g_program == "/proc/self/exe") {  // only kernel-ladder itself serves as a worker (not a test binary)
    char self[4096] = {0};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const std::string path(self, n > 0 ? size_t(n) : 0);
    const std::string base = path.substr(path.find_last_of('/') + 1);
    if (base.rfind("kernel-ladder", 0) != 0)
      throw RuntimeError("editable worker: " + path + " is not kernel-ladder; set KL_WORKER to the kernel-ladder binary");
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw RuntimeError(std::string("editable worker: socketpair: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 3);  // dup2 clears close-on-exec on the copy
  std::vector<std::string> args = {"kernel-ladder", "worker"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, g_program.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    throw RuntimeError("editable worker: cannot start " + g_program + " worker: " + std::strerror(rc));
  }
  g_worker.pid = pid;
  g_worker.fd = sv[0];
}

// The next message within `seconds`; false when the worker ended or the time ran out (*timed_out).
bool await(json* reply, double seconds, bool* timed_out) {
  *timed_out = false;
  pollfd p{g_worker.fd, POLLIN, 0};
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *timed_out = true;
      return false;
    }
    const int r = ::poll(&p, 1, int(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    return receive_message(g_worker.fd, reply, nullptr);
  }
}

Fault ended(Fault::Kind k, const std::string& detail) {
  Fault f;
  f.kind = k;
  f.detail = detail;
  return f;
}

struct Shared {
  int fd = -1;
  void* p = MAP_FAILED;
  size_t bytes = 0;
  explicit Shared(size_t n) : bytes(n) {
    fd = memfd_create("kernel-ladder-tensors", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, off_t(n)) != 0) throw RuntimeError(std::string("editable worker: memfd: ") + std::strerror(errno));
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw RuntimeError(std::string("editable worker: mmap: ") + std::strerror(errno));
  }
  ~Shared() {
    if (p != MAP_FAILED) munmap(p, bytes);
    if (fd >= 0) ::close(fd);
  }
  char* at(int64_t off) const { return static_cast<char*>(p) + off; }
};

void stage_in(Backend b, const Launch& l, const std::vector<Slot>& s, const Shared& m) {
  for (size_t i = 0; i < l.args.size(); ++i) {
    if (!l.args[i].is_tensor) continue;
    const TensorArg& t = l.args[i].tensor;
    const size_t n = size_t(t.size);
    if (s[i].data >= 0) mem::to_host(b, m.at(s[i].data), t.data, n * dtype_bytes(t.dtype));
    if (s[i].writer >= 0) mem::to_host(b, m.at(s[i].writer), t.writer, n * 4);
    if (s[i].count >= 0) mem::to_host(b, m.at(s[i].count), t.count, n * 4);
    if (s[i].access >= 0) mem::to_host(b, m.at(s[i].access), t.access, size_t(t.access_words) * 8);
  }
}

void stage_out(Backend b, const Launch& l, const std::vector<Slot>& s, const Shared& m) {
  for (size_t i = 0; i < l.args.size(); ++i) {
    if (!l.args[i].is_tensor) continue;
    const TensorArg& t = l.args[i].tensor;
    const size_t n = size_t(t.size);
    if (s[i].data >= 0 && t.output) mem::to_backend(b, t.data, m.at(s[i].data), n * dtype_bytes(t.dtype));
    if (s[i].writer >= 0) mem::to_backend(b, t.writer, m.at(s[i].writer), n * 4);
    if (s[i].count >= 0) mem::to_backend(b, t.count, m.at(s[i].count), n * 4);
    if (s[i].access >= 0) mem::to_backend(b, t.access, m.at(s[i].access), size_t(t.access_words) * 8);
  }
}

// ---- the worker's side ---------------------------------------------------------------------------------
struct Device {  // a tensor's device copy in the worker (CUDA backend)
  Backend b;
  void* p = nullptr;
  Device(Backend be, size_t bytes) : b(be) { p = bytes ? mem::alloc(b, bytes) : nullptr; }
  ~Device() {
    if (p) mem::free(b, p);
  }
  Device(const Device&) = delete;
};

// The launch the app described, its tensors in the mapping (CPU) or copied to device memory (CUDA).
Launch rebuild(const json& j, Backend b, char* base, std::vector<std::unique_ptr<Device>>& dev) {
  Launch l;
  l.rung = j.at("rung").get<std::string>();
  l.kernel = j.at("kernel").get<std::string>();
  l.grid = {j.at("grid")[0].get<uint32_t>(), j.at("grid")[1].get<uint32_t>(), j.at("grid")[2].get<uint32_t>()};
  l.block = {j.at("block")[0].get<uint32_t>(), j.at("block")[1].get<uint32_t>(), j.at("block")[2].get<uint32_t>()};
  l.shared_bytes = j.at("shared").get<size_t>();
  auto place = [&](int64_t off, size_t bytes) -> void* {
    if (off < 0) return nullptr;
    if (b == Backend::Cpu) return base + off;
    dev.push_back(std::make_unique<Device>(b, bytes));
    mem::to_backend(b, dev.back()->p, base + off, bytes);
    return dev.back()->p;
  };
  for (const json& a : j.at("args")) {
    if (a.contains("scalar")) {
      Arg x;
      x.scalar.name = a.at("scalar").get<std::string>();
      x.scalar.kind = ScalarArg::Kind(a.at("kind").get<int>());
      x.scalar.i = a.at("i").get<int64_t>();
      x.scalar.f = a.at("f").get<double>();
      l.args.push_back(x);
      continue;
    }
    const DType t = DType(a.at("dtype").get<int>());
    const int64_t n = a.at("size").get<int64_t>();
    void* data = place(a.at("data").get<int64_t>(), size_t(n) * dtype_bytes(t));
    auto* w = static_cast<int32_t*>(place(a.at("writer").get<int64_t>(), size_t(n) * 4));
    auto* c = static_cast<uint32_t*>(place(a.at("count").get<int64_t>(), size_t(n) * 4));
    l.args.push_back(tensor(a.at("tensor").get<std::string>(), t, data, data ? n : 0, a.at("output").get<bool>(), w, c));
    const int64_t words = a.value("access_words", int64_t(0));
    l.args.back().tensor.access = static_cast<uint64_t*>(place(a.value("access", int64_t(-1)), size_t(words) * 8));
    l.args.back().tensor.access_words = l.args.back().tensor.access ? words : 0;
  }
  return l;
}

void copy_back(const json& j, Backend b, char* base, const Launch& l) {
  if (b == Backend::Cpu) return;
  size_t i = 0;
  for (const json& a : j.at("args")) {
    const Arg& x = l.args[i++];
    if (!x.is_tensor) continue;
    const size_t n = size_t(x.tensor.size);
    if (x.tensor.data && x.tensor.output)
      mem::to_host(b, base + a.at("data").get<int64_t>(), x.tensor.data, n * dtype_bytes(x.tensor.dtype));
    if (x.tensor.writer) mem::to_host(b, base + a.at("writer").get<int64_t>(), x.tensor.writer, n * 4);
    if (x.tensor.count) mem::to_host(b, base + a.at("count").get<int64_t>(), x.tensor.count, n * 4);
    if (x.tensor.access) mem::to_host(b, base + a.at("access").get<int64_t>(), x.tensor.access, size_t(x.tensor.access_words) * 8);
  }
}

// One job: compile (answering "compiled"), run, copy back, answer the fault. false: end the worker.
bool serve_one(int fd, const json& job, int shm) {
  const Backend b = job.at("backend").get<std::string>() == "cuda" ? Backend::Cuda : Backend::Cpu;
  Source src;
  src.rung = job.at("source").at("rung").get<std::string>();
  src.file = job.at("source").at("file").get<std::string>();
  src.text = job.at("source").at("text").get<std::string>();
  try {
    compile(b, src);
  } catch (const std::exception& e) {
    return send_message(fd, error_json(e));
  }
  if (!send_message(fd, {{"stage", "compiled"}})) return false;
  if (job.at("launch").at("kernel").get<std::string>().empty())  // a compile check only
    return send_message(fd, {{"stage", "result"}, {"fault", fault_json(Fault{})}});
  const size_t bytes = job.at("bytes").get<size_t>();
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
  if (map == MAP_FAILED) return send_message(fd, {{"stage", "error"}, {"input", false}, {"message", "worker: mmap failed"}});
  bool go_on = true;
  try {
    std::vector<std::unique_ptr<Device>> dev;
    const Launch l = rebuild(job.at("launch"), b, static_cast<char*>(map), dev);
    const Fault f = run_in_process(b, &src, l);
    if (f.kind != Fault::DeviceFault) copy_back(job.at("launch"), b, static_cast<char*>(map), l);
    else dev.clear(), go_on = false;  // the context is gone: answer, then end
    go_on = send_message(fd, {{"stage", "result"}, {"fault", fault_json(f)}}) && go_on;
  } catch (const std::exception& e) {
    go_on = send_message(fd, error_json(e)) && b == Backend::Cpu;
  }
  munmap(map, bytes);
  return go_on;
}

}  // namespace

double time_limit() { return g_limit; }
void set_time_limit(double seconds) { g_limit = seconds > 0 ? seconds : 10.0; }
void set_program(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_program = path;
}
bool stop() {
  std::lock_guard<std::mutex> lock(g_mutex);
  const bool ran = g_worker.pid != 0;
  g_worker.end(true);
  return ran;
}
int pid() { return int(g_worker.pid); }

void check(Backend b, const Source& src) {
  Launch none;  // no kernel: the worker compiles and answers
  none.block.x = 1;
  run(b, src, none);
}

Fault run(Backend b, const Source& src, const Launch& l) {
  if (!l.kernel.empty()) detail::check_shape(l);
  std::lock_guard<std::mutex> lock(g_mutex);
  size_t bytes = 0;
  const std::vector<Slot> slots = layout(l, &bytes);
  Shared m(bytes);
  stage_in(b, l, slots, m);
  const json job = {{"backend", backend_name(b)}, {"bytes", bytes},
                    {"source", {{"rung", src.rung}, {"file", src.file}, {"text", src.text}}},
                    {"launch", launch_json(l, slots)}};
  json reply;
  bool timed_out = false;
  // A worker kept from an earlier launch may have died since (killed from outside): one fresh try.
  for (int attempt = 0;; ++attempt) {
    const bool fresh = g_worker.pid == 0;
    if (fresh) start();
    if (send_message(g_worker.fd, job, m.fd) && await(&reply, 120.0, &timed_out)) break;
    const std::string how = g_worker.end(true);
    if (timed_out) throw RuntimeError("editable worker: compiling " + src.file + " took more than 120 s");
    if (fresh || attempt > 0) return ended(Fault::Crash, how + " while compiling " + src.file);
  }
  if (reply.value("stage", "") != "compiled") rethrow(reply);
  if (!await(&reply, g_limit, &timed_out)) {
    const std::string how = g_worker.end(true);
    if (timed_out) {
      char b[160];
      std::snprintf(b, sizeof b, "%s ran past the %g s limit and was stopped", l.kernel.c_str(), g_limit);
      return ended(Fault::TimeLimit, b);
    }
    return ended(Fault::Crash, how + " while running " + l.kernel);
  }
  if (reply.value("stage", "") != "result") {
    if (b == Backend::Cuda) g_worker.end(true);
    rethrow(reply);
  }
  Fault f = fault_of(reply.at("fault"));
  if (f.kind == Fault::DeviceFault) g_worker.end(true);
  else stage_out(b, l, slots, m);
  return f;
}

int serve(int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // the app gone: so is its worker
  if (getppid() == 1) return 1;
  for (;;) {
    json job;
    int shm = -1;
    if (!receive_message(fd, &job, &shm)) return 0;  // the app closed the socket
    bool go_on = false;
    try {
      go_on = serve_one(fd, job, shm);
    } catch (const std::exception& e) {
      go_on = send_message(fd, error_json(e));
    }
    if (shm >= 0) ::close(shm);
    if (!go_on) return 0;
  }
}

}  // namespace kl::editable::worker
