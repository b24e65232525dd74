// The CUDA backend's run-time build of an edited source: NVRTC, loaded at run time (dlopen of
// libnvrtc.so.<major>, as cuBLAS is: the binary starts without it), compiling for the current device's
// architecture (sm_90 where there is none, so compile errors work on every machine with the toolkit);
// the cubin loaded with the driver API (its entry points through the CUDA runtime, which loads the
// driver) and launched with the same shape checks as kl::cuda::launch. Every driver call is checked.
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <map>
#include <mutex>
#include <vector>

#include "editable/build_flags.h"  // generated: KL_EDITABLE_CUDA_FLAGS
#include "kernels/editable/compile.h"
#include "kernels/editable/launch_detail.h"
#include "kernels/editable/scan.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::editable::detail {

std::vector<Diagnostic> parse_diagnostics(const std::string& out, const std::string& user_base,
                                          const std::string& user_file);
int line_in(const scan::Result& r, const std::string& kernel);
CompileError no_kernel(const Source& src, const scan::Result& r, const std::string& kernel);

namespace {

struct Nvrtc {
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcAddNameExpression) add_name = nullptr;
  decltype(&nvrtcGetLoweredName) lowered_name = nullptr;
  std::string why_not;
};

const Nvrtc& nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc r;
    const std::string major = std::to_string(CUDART_VERSION / 1000);
    void* lib = nullptr;
    for (std::string name : {"libnvrtc.so." + major, "/usr/local/cuda/lib64/libnvrtc.so." + major, std::string("libnvrtc.so")}) {
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept loaded for the process's life
      if (lib) break;
    }
    if (!lib) {
      r.why_not = "the CUDA backend compiles edited kernels with NVRTC (libnvrtc.so." + major +
                  ", part of the CUDA toolkit), which could not be loaded";
      return r;
    }
    auto get = [&](auto& f, const char* name) { f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name)); };
    get(r.create, "nvrtcCreateProgram");
    get(r.compile, "nvrtcCompileProgram");
    get(r.log_size, "nvrtcGetProgramLogSize");
    get(r.log, "nvrtcGetProgramLog");
    get(r.cubin_size, "nvrtcGetCUBINSize");
    get(r.cubin, "nvrtcGetCUBIN");
    get(r.destroy, "nvrtcDestroyProgram");
    get(r.error_string, "nvrtcGetErrorString");
    get(r.add_name, "nvrtcAddNameExpression");
    get(r.lowered_name, "nvrtcGetLoweredName");
    if (!r.create || !r.compile || !r.log_size || !r.log || !r.cubin_size || !r.cubin || !r.destroy || !r.error_string ||
        !r.add_name || !r.lowered_name)
      r.why_not = "libnvrtc.so." + major + " lacks a function this build uses";
    return r;
  }();
  if (!n.why_not.empty()) throw RuntimeError("editable: " + n.why_not);
  return n;
}

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw RuntimeError(std::string("NVRTC error: ") + nvrtc().error_string(r) + " in " + what);
}

// The driver's functions, through the runtime (which has loaded libcuda.so.1).
struct Driver {
  decltype(&cuModuleLoadData) load = nullptr;
  decltype(&cuModuleUnload) unload = nullptr;
  decltype(&cuModuleGetFunction) function = nullptr;
  decltype(&cuModuleGetGlobal) global = nullptr;
  decltype(&cuMemcpyHtoD) to_device = nullptr;
  decltype(&cuMemcpyDtoH) to_host = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuCtxSynchronize) sync = nullptr;
  decltype(&cuFuncSetAttribute) set_attribute = nullptr;
  decltype(&cuGetErrorString) error_string = nullptr;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    KL_CUDA_CHECK(cudaFree(nullptr));  // the runtime's primary context, current on this thread
    auto get = [&](auto& f, const char* name) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult q{};
      KL_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
      if (q != cudaDriverEntryPointSuccess || !p) throw RuntimeError(std::string("CUDA driver: no entry point ") + name);
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(p);
    };
    get(r.load, "cuModuleLoadData");
    get(r.unload, "cuModuleUnload");
    get(r.function, "cuModuleGetFunction");
    get(r.global, "cuModuleGetGlobal");
    get(r.to_device, "cuMemcpyHtoD");
    get(r.to_host, "cuMemcpyDtoH");
    get(r.launch, "cuLaunchKernel");
    get(r.sync, "cuCtxSynchronize");
    get(r.set_attribute, "cuFuncSetAttribute");
    get(r.error_string, "cuGetErrorString");
    return r;
  }();
  return d;
}

std::string cu_text(CUresult r) {
  const char* s = nullptr;
  driver().error_string(r, &s);
  return s ? s : "CUDA driver error " + std::to_string(int(r));
}

#define KL_CU_CHECK(expr)                                                                                  \
  do {                                                                                                     \
    const CUresult kl_cu_r = (expr);                                                                       \
    if (kl_cu_r != CUDA_SUCCESS)                                                                           \
      throw RuntimeError("CUDA driver error: " + cu_text(kl_cu_r) + " in " #expr " at " __FILE__ ":" +     \
                         std::to_string(__LINE__));                                                        \
  } while (0)

std::string arch() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return "sm_90";
  }
  int dev = 0, major = 9, minor = 0;
  KL_CUDA_CHECK(cudaGetDevice(&dev));
  KL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  KL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

std::string base_name(const std::string& path) {
  const size_t s = path.find_last_of('/');
  std::string b = s == std::string::npos ? path : path.substr(s + 1);
  return b.empty() || b == "kl.cuh" ? "edited.cu" : b;
}

class NvrtcModule : public Module {
 public:
  NvrtcModule(std::string cubin, scan::Result r, Source src, std::map<std::string, std::string> lowered)
      : cubin_(std::move(cubin)), scan_(std::move(r)), src_(std::move(src)), lowered_(std::move(lowered)) {}
  ~NvrtcModule() override {
    if (mod_) driver().unload(mod_);  // unchecked: a dead context has nothing left to unload
  }
  std::string params(const std::string& kernel) const override {
    load();
    CUdeviceptr p = 0;
    size_t bytes = 0;
    if (driver().global(&p, &bytes, mod_, lowered("&kl_params_" + kernel).c_str()) != CUDA_SUCCESS)
      throw no_kernel(src_, scan_, kernel);
    ::kl::editable::detail::Signature sig{};
    KL_CU_CHECK(driver().to_host(&sig, p, sizeof sig));
    sig.text[sizeof sig.text - 1] = 0;
    return sig.text;
  }
  int line_of(const std::string& kernel) const override { return line_in(scan_, kernel); }
  Fault run(const Launch& l, void** args) override {
    load();
    CUfunction f = nullptr;
    if (driver().function(&f, mod_, lowered(l.kernel).c_str()) != CUDA_SUCCESS) throw no_kernel(src_, scan_, l.kernel);
    CUdeviceptr rec = 0;
    size_t bytes = 0;
    KL_CU_CHECK(driver().global(&rec, &bytes, mod_, "kl_fault_record"));
    const FaultRecord zero{};
    KL_CU_CHECK(driver().to_device(rec, &zero, sizeof zero));
    const char* name = l.kernel.c_str();
    fault::at_launch(name);
    cuda::check_shape(name, dim3(l.grid.x, l.grid.y, l.grid.z), dim3(l.block.x, l.block.y, l.block.z));
    if (l.shared_bytes > 48 * 1024) {
      cuda::check_shared(name, l.shared_bytes);
      KL_CU_CHECK(driver().set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(l.shared_bytes)));
    }
    KL_CU_CHECK(driver().launch(f, l.grid.x, l.grid.y, l.grid.z, l.block.x, l.block.y, l.block.z,
                                unsigned(l.shared_bytes), nullptr, args, nullptr));
    const CUresult done = driver().sync();
    if (done != CUDA_SUCCESS) {  // sticky: this process's context is gone (the worker ends after this)
      Fault fault;
      fault.kind = Fault::DeviceFault;
      fault.detail = cu_text(done) + " in " + l.kernel;
      return fault;
    }
    FaultRecord r{};
    KL_CU_CHECK(driver().to_host(&r, rec, sizeof r));
    return fault_from(r, l);
  }

 private:
  // The symbol NVRTC gave a name expression (a kernel's C++-mangled name; the expression itself if none).
  std::string lowered(const std::string& expr) const {
    const auto it = lowered_.find(expr);
    return it == lowered_.end() ? expr : it->second;
  }
  void load() const {
    if (!mod_) KL_CU_CHECK(driver().load(&mod_, cubin_.data()));
  }
  std::string cubin_;
  scan::Result scan_;
  Source src_;
  std::map<std::string, std::string> lowered_;
  mutable CUmodule mod_ = nullptr;
};

}  // namespace

// Compiles to a cubin; loading waits for the first use (so compile errors need no device).
std::shared_ptr<Module> compile_nvrtc(const Source& src, const scan::Result& r) {
  const Nvrtc& n = nvrtc();
  const std::string header = embedded_header("kl.cuh");
  const char* headers[] = {header.c_str()};
  const char* names[] = {"kl.cuh"};
  const std::string base = base_name(src.file);
  const std::string text = src.text + scan::nvrtc_suffix(r);
  nvrtcProgram prog = nullptr;
  check_nvrtc(n.create(&prog, text.c_str(), base.c_str(), 1, headers, names), "nvrtcCreateProgram");
  // Name expressions: the kernels' mangled names come back, and the signature records, which nothing in
  // the module uses, are kept (whole-program compilation drops unused __device__ variables otherwise).
  std::vector<std::string> exprs;
  for (const scan::Kernel& k : r.kernels) exprs.push_back(k.name), exprs.push_back("&kl_params_" + k.name);
  for (const std::string& e : exprs) check_nvrtc(n.add_name(prog, e.c_str()), "nvrtcAddNameExpression");
  // The shipped nvcc build's code-generation flags (CMakeLists.txt, KL_EDITABLE_CUDA_FLAGS: the same
  // spelling in both), for the device's architecture, as the shipped build is for the H100/H200's.
  const std::string arch_opt = "--gpu-architecture=" + arch();
  std::vector<const char*> opts = {arch_opt.c_str(), KL_EDITABLE_CUDA_FLAGS "--device-as-default-execution-space"};
  const nvrtcResult cr = n.compile(prog, int(opts.size()), opts.data());
  size_t log_bytes = 0;
  n.log_size(prog, &log_bytes);
  std::string log(log_bytes, '\0');
  if (log_bytes) n.log(prog, log.data());
  if (cr != NVRTC_SUCCESS) {
    n.destroy(&prog);
    if (cr != NVRTC_ERROR_COMPILATION) check_nvrtc(cr, "nvrtcCompileProgram");
    throw CompileError(parse_diagnostics(log, base, src.file));
  }
  size_t bytes = 0;
  check_nvrtc(n.cubin_size(prog, &bytes), "nvrtcGetCUBINSize");
  std::string cubin(bytes, '\0');
  check_nvrtc(n.cubin(prog, cubin.data()), "nvrtcGetCUBIN");
  std::map<std::string, std::string> lowered;
  for (const std::string& e : exprs) {
    const char* name = nullptr;
    if (n.lowered_name(prog, e.c_str(), &name) == NVRTC_SUCCESS && name) lowered[e] = name;
  }
  n.destroy(&prog);
  return std::make_shared<NvrtcModule>(std::move(cubin), r, src, std::move(lowered));
}

}  // namespace kl::editable::detail
