// The GEMM ceiling on the CUDA backend: one large bf16 cuBLAS GEMM (fp32 accumulate), timed with the
// same CUDA-event harness as every benchmark (kernels/measure/bench.h). Every cuBLAS status is checked.
// cuBLAS is loaded when the ceiling is first measured (dlopen of libcublas.so.<major>), not linked: the
// binary (and its .deb) then starts, and runs every kernel, on a machine with the NVIDIA driver and no
// cuBLAS; only the ceiling is refused there, with a line that says what to install.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/measure/bench.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/measure/gemm_ceiling.h"

namespace kl::gemm::detail {
namespace {

#define KL_STR2(x) #x
#define KL_STR(x) KL_STR2(x)
constexpr const char* kCublasSoname = "libcublas.so." KL_STR(CUBLAS_VER_MAJOR);

// The six cuBLAS entry points the ceiling uses, looked up once by name in the loaded library.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx's C signature, written out: the header also declares a C++ overload of the name.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be loaded; empty when every pointer is set
};

template <class F>
void lookup(void* lib, const char* name, F& f, std::string& error) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f && error.empty()) error = std::string(kCublasSoname) + " has no symbol " + name;
}

Cublas load_cublas() {
  Cublas c;
  void* lib = dlopen(kCublasSoname, RTLD_NOW | RTLD_LOCAL);  // kept loaded for the process's life
  if (!lib) {
    const char* why = dlerror();
    c.error = std::string("cuBLAS is not installed (") + (why ? why : kCublasSoname) +
              "): the GEMM ceiling needs NVIDIA's cuBLAS " KL_STR(CUBLAS_VER_MAJOR) " (package libcublas-" KL_STR(
                  CUBLAS_VER_MAJOR) "-* from NVIDIA's repository, or the CUDA toolkit's lib64 on the loader path)";
    return c;
  }
  lookup(lib, "cublasCreate_v2", c.create, c.error);
  lookup(lib, "cublasDestroy_v2", c.destroy, c.error);
  lookup(lib, "cublasSetStream_v2", c.set_stream, c.error);
  lookup(lib, "cublasGemmEx", c.gemm_ex, c.error);
  lookup(lib, "cublasGetStatusName", c.status_name, c.error);
  lookup(lib, "cublasGetStatusString", c.status_string, c.error);
  return c;
}

const Cublas& cublas() {
  static const Cublas c = load_cublas();
  if (!c.error.empty()) throw RuntimeError(c.error);
  return c;
}

void cublas_check(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw RuntimeError(std::string("cuBLAS error: ") + cublas().status_name(s) + " (" + cublas().status_string(s) +
                     ") in " + expr + " at " + file + ":" + std::to_string(line));
}
#define KL_CUBLAS_CHECK(expr) cublas_check((expr), #expr, __FILE__, __LINE__)

struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { KL_CUBLAS_CHECK(cublas().create(&h)); }
  ~Handle() {
    if (h) cublas().destroy(h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// Uniform values in [-1, 1) from a hash of (seed, index), rounded to bf16.
__global__ void fill_bf16(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ seed * 0x85EBCA77u ^ uint32_t(i >> 32) * 0xC2B2AE3Du;
    h ^= h >> 16, h *= 0x7FEB352Du, h ^= h >> 15, h *= 0x846CA68Bu, h ^= h >> 16;
    p[i] = __float2bfloat16_rn(float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

Ceiling measure_cuda(int n, int iterations) {
  cublas();  // refuse before allocating when cuBLAS cannot be loaded
  const int64_t nn = int64_t(n) * n;
  Buffer<__nv_bfloat16> a(Backend::Cuda, size_t(nn)), b(Backend::Cuda, size_t(nn));
  Buffer<float> c(Backend::Cuda, size_t(nn));
  const dim3 grid(unsigned(std::min<int64_t>((nn + 255) / 256, 4096)));
  cuda::launch("gemm_fill_bf16", fill_bf16, grid, dim3(256), 0, 0, a.data(), nn, 1u);
  cuda::launch("gemm_fill_bf16", fill_bf16, grid, dim3(256), 0, 0, b.data(), nn, 2u);
  c.fill_bytes(0xFF);  // poison: a GEMM that writes nothing fails the check below

  Handle handle;
  KL_CUBLAS_CHECK(cublas().set_stream(handle.h, 0));
  const float alpha = 1.0f, beta = 0.0f;
  // Column-major, as cuBLAS sees it: C[n, n] = A[n, n] B[n, n], leading dimensions n.
  auto gemm = [&] {
    KL_CUBLAS_CHECK(cublas().gemm_ex(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16BF, n,
                                 b.data(), CUDA_R_16BF, n, &beta, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
  };
  gemm();
  KL_CUDA_CHECK(cudaDeviceSynchronize());

  // The check first: 16 sampled entries against float64 sums of the same bf16 inputs.
  std::vector<uint16_t> ha(static_cast<size_t>(nn)), hb(static_cast<size_t>(nn));
  KL_CUDA_CHECK(cudaMemcpy(ha.data(), a.data(), size_t(nn) * 2, cudaMemcpyDeviceToHost));
  KL_CUDA_CHECK(cudaMemcpy(hb.data(), b.data(), size_t(nn) * 2, cudaMemcpyDeviceToHost));
  Ceiling r;
  r.n = n;
  for (int s = 0; s < 16; ++s) {
    const int i = (s * 7919) % n, j = (s * 104729 + 13) % n;
    float got = 0;
    KL_CUDA_CHECK(cudaMemcpy(&got, c.data() + int64_t(j) * n + i, 4, cudaMemcpyDeviceToHost));
    double ref = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      const double p = double(bf16_to_float(ha[size_t(int64_t(k) * n + i)])) * bf16_to_float(hb[size_t(int64_t(j) * n + k)]);
      ref += p, mag += std::fabs(p);
    }
    const double err = std::isfinite(got) ? std::fabs(got - ref) / std::max(mag, 1e-30) : INFINITY;
    r.max_rel_err = std::max(r.max_rel_err, err);
  }

  const bench::Timing t = bench::time(Backend::Cuda, gemm, 3, iterations);
  r.ms = t.median_ms;
  r.tflops = 2.0 * double(n) * n * n / (t.median_ms * 1e-3) / 1e12;
  r.what = "cuBLAS bf16 GEMM " + std::to_string(n) + "^3, fp32 accumulate";
  return r;
}

}  // namespace kl::gemm::detail
