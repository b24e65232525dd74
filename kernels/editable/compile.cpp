// Run-time builds of an edited source. CPU: the source written beside the embedded kl.cuh and kl_cpu.h
// into a private temporary folder, wrapped (kernels/editable/scan.cpp), compiled by the system C++
// compiler into a shared object with the flags of the build-time CPU build, and loaded with dlopen; each
// kernel found by name (kl_entry_NAME, kl_params_NAME). CUDA: NVRTC (kernels/editable/nvrtc.cu).
#include "kernels/editable/compile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "editable/build_flags.h"  // generated: KL_EDITABLE_CPU_FLAGS, KL_EDITABLE_CXX
#include "kernels/editable/launch_detail.h"
#include "kernels/editable/scan.h"

extern char** environ;

namespace kl::editable {

std::string Diagnostic::text() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": error: " + message;
}

static std::string joined_text(const std::vector<Diagnostic>& d) {
  std::string s;
  for (const Diagnostic& x : d) s += (s.empty() ? "" : "\n") + x.text();
  return s;
}

CompileError::CompileError(std::vector<Diagnostic> d) : InputError(joined_text(d)), diagnostics(std::move(d)) {}

namespace detail {
#ifdef KL_HAS_CUDA
std::shared_ptr<Module> compile_nvrtc(const Source& src, const scan::Result& r);  // nvrtc.cu
#else
static std::shared_ptr<Module> compile_nvrtc(const Source&, const scan::Result&) {
  throw RuntimeError("editable: built without CUDA: edited kernels compile for the CPU backend only");
}
#endif
}  // namespace detail

namespace {

// The shipped build's code-generation flags (CMakeLists.txt, KL_EDITABLE_CPU_FLAGS), then what a run-time
// build adds that changes no code: a shared object, no warnings, plain diagnostics.
const char* const kCpuFlags[] = {KL_EDITABLE_CPU_FLAGS "-shared", "-w", "-fdiagnostics-plain-output",
                                 "-fno-diagnostics-show-caret"};

// The compiler of the shipped build where this machine has it (an installed binary may run where it does
// not), else the system's `c++`.
std::string cpu_compiler() {
  static const std::string c = ::access(KL_EDITABLE_CXX, X_OK) == 0 ? KL_EDITABLE_CXX : "c++";
  return c;
}

std::string base_name(const std::string& path) {
  const size_t s = path.find_last_of('/');
  std::string b = s == std::string::npos ? path : path.substr(s + 1);
  std::string clean;
  for (char c : b) clean += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (clean.empty() || clean == "kl.cuh" || clean == "kl_cpu.h" || clean == "wrapper.cpp") clean = "edited_" + clean + ".cu";
  return clean;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw RuntimeError("editable: cannot write " + path);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct TempDir {
  std::string path;
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/kernel-ladder-edit-XXXXXX";
    std::vector<char> b(tmpl.begin(), tmpl.end());
    b.push_back('\0');
    if (!mkdtemp(b.data())) throw RuntimeError("editable: cannot create a temporary folder in " + tmpl);
    path = b.data();
  }
  ~TempDir() {
    std::string cmd;
    for (const char* f : {"kl.cuh", "kl_cpu.h", "wrapper.cpp", "kernel.so", "errors.txt"}) ::unlink((path + "/" + f).c_str());
    for (const std::string& f : extra) ::unlink((path + "/" + f).c_str());
    ::rmdir(path.c_str());
  }
  std::vector<std::string> extra;
};

// Runs argv with stderr into `err_file`; returns the exit status (-1: could not start).
int run_command(const std::vector<std::string>& argv, const std::string& err_file) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> a;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  // The compiler's messages in plain ASCII (no localised quotes), whatever the user's locale.
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LC_ALL=", 7) != 0 && std::strncmp(*e, "LANG=", 5) != 0) env_s.push_back(*e);
  env_s.push_back("LC_ALL=C");
  std::vector<char*> env;
  for (std::string& e : env_s) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string friendly(std::string m) {
  static const std::regex poisoned(R"re(attempt to use poisoned "([A-Za-z_:]+)")re");
  std::smatch s;
  if (std::regex_search(m, s, poisoned)) return s[1].str() + " is not supported by the CPU prelude (kl_cpu.h)";
  return m;
}

}  // namespace

namespace detail {

// "PATH:LINE:COL: error: MESSAGE" lines of a compiler's output, PATH ending in `user_base` mapped to
// `user_file`; other files keep their base name (kl.cuh, kl_cpu.h). No such line: one diagnostic with
// the output's first lines.
std::vector<Diagnostic> parse_diagnostics(const std::string& out, const std::string& user_base,
                                          const std::string& user_file) {
  static const std::regex re(R"(^(.*?):(\d+):(\d+): (?:fatal )?error: (.*)$)");
  static const std::regex re_nvrtc(R"(^(.*?)\((\d+)\): (?:catastrophic )?error: (.*)$)");
  std::vector<Diagnostic> d;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    Diagnostic x;
    std::string path;
    if (std::regex_match(line, m, re)) {
      path = m[1].str();
      x.line = std::stoi(m[2].str());
      x.col = std::stoi(m[3].str());
      x.message = friendly(m[4].str());
    } else if (std::regex_match(line, m, re_nvrtc)) {
      path = m[1].str();
      x.line = std::stoi(m[2].str());
      x.col = 1;
      x.message = m[3].str();
    } else {
      continue;
    }
    const bool user = path.size() >= user_base.size() && path.compare(path.size() - user_base.size(), user_base.size(), user_base) == 0;
    x.file = user ? user_file : base_name(path);
    d.push_back(x);
  }
  if (d.empty()) {
    std::string head = out.substr(0, 600);
    while (!head.empty() && (head.back() == '\n' || head.back() == ' ')) head.pop_back();
    for (char& c : head)
      if (c == '\n') c = ' ';
    d.push_back({user_file, 1, 1, head.empty() ? std::string("the compiler failed without a message") : head});
  }
  return d;
}

int line_in(const scan::Result& r, const std::string& kernel) {
  for (const scan::Kernel& k : r.kernels)
    if (k.name == kernel) return k.line;
  return 1;
}

CompileError no_kernel(const Source& src, const scan::Result& r, const std::string& kernel) {
  std::string names;
  for (const scan::Kernel& k : r.kernels) names += (names.empty() ? "" : ", ") + k.name;
  return CompileError({Diagnostic{src.file, 1, 1,
                                  "no __global__ function named " + kernel + " (the rung launches " + kernel + ")" +
                                      (names.empty() ? std::string("; the source defines none")
                                                     : "; the source defines " + names)}});
}

}  // namespace detail

namespace {

class CpuModule : public Module {
 public:
  CpuModule(void* lib, scan::Result r, Source src) : lib_(lib), scan_(std::move(r)), src_(std::move(src)) {}
  ~CpuModule() override { dlclose(lib_); }
  std::string params(const std::string& kernel) const override {
    auto fn = reinterpret_cast<const char* (*)()>(dlsym(lib_, ("kl_params_" + kernel).c_str()));
    if (!fn) throw detail::no_kernel(src_, scan_, kernel);
    return fn();
  }
  int line_of(const std::string& kernel) const override { return detail::line_in(scan_, kernel); }
  Fault run(const Launch& l, void** args) override {
    auto fn = reinterpret_cast<kl_cpu::EntryFn>(dlsym(lib_, ("kl_entry_" + l.kernel).c_str()));
    if (!fn) throw detail::no_kernel(src_, scan_, l.kernel);
    return detail::run_cpu_entry(fn, l, args);
  }

 private:
  void* lib_;
  scan::Result scan_;
  Source src_;
};

std::shared_ptr<Module> compile_cpu(const Source& src, const scan::Result& r) {
  if (!r.unsupported.empty()) {
    std::vector<Diagnostic> d;
    for (const scan::Unsupported& u : r.unsupported) d.push_back({src.file, u.line, u.col, u.message});
    throw CompileError(d);
  }
  TempDir dir;
  const std::string base = base_name(src.file);
  dir.extra.push_back(base);
  write_file(dir.path + "/kl.cuh", embedded_header("kl.cuh"));
  write_file(dir.path + "/kl_cpu.h", embedded_header("kl_cpu.h"));
  write_file(dir.path + "/" + base, src.text);
  write_file(dir.path + "/wrapper.cpp", scan::cpu_wrapper(r, base, "", ""));
  std::vector<std::string> argv = {cpu_compiler()};
  for (const char* f : kCpuFlags) argv.push_back(f);
  argv.insert(argv.end(), {"-include", dir.path + "/kl_cpu.h", "-I", dir.path, dir.path + "/wrapper.cpp", "-o",
                           dir.path + "/kernel.so"});
  const int rc = run_command(argv, dir.path + "/errors.txt");
  if (rc == -1)
    throw RuntimeError("editable: the CPU backend compiles edited kernels with the system C++ compiler (" +
                       cpu_compiler() + "), which could not be started; install g++");
  if (rc != 0) throw CompileError(detail::parse_diagnostics(read_file(dir.path + "/errors.txt"), base, src.file));
  void* lib = dlopen((dir.path + "/kernel.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw RuntimeError(std::string("editable: cannot load the compiled kernel: ") + dlerror());
  return std::make_shared<CpuModule>(lib, r, src);
}

}  // namespace

std::string cpu_compiler_command() {
  std::string s = cpu_compiler();
  for (const char* f : kCpuFlags) s += std::string(" ") + f;
  return s + " -include kl_cpu.h";
}

std::shared_ptr<Module> compile(Backend b, const Source& src) {
  static std::mutex mu;
  static std::map<std::pair<int, std::string>, std::shared_ptr<Module>> cache;
  const auto key = std::make_pair(int(b), src.text);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const scan::Result r = scan::scan(src.text);
  std::shared_ptr<Module> m;
  if (b == Backend::Cpu) m = compile_cpu(src, r);
  else m = detail::compile_nvrtc(src, r);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 32) cache.erase(cache.begin());
  cache[key] = m;
  return m;
}

}  // namespace kl::editable
