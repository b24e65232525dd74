#include "kernels/runtime/buffer.h"

#include <sys/sysinfo.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <string>

#include "kernels/runtime/errors.h"

#ifdef KL_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace kl::mem {

std::string bytes_text(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 60)) std::snprintf(buf, sizeof buf, "%.2f EiB", double(bytes) / double(1ull << 60));
  else if (bytes >= (1ull << 50)) std::snprintf(buf, sizeof buf, "%.2f PiB", double(bytes) / double(1ull << 50));
  else if (bytes >= (1ull << 40)) std::snprintf(buf, sizeof buf, "%.2f TiB", double(bytes) / double(1ull << 40));
  else if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1ull << 20));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)bytes);
  return buf;
}

namespace {

// A "Key:   123 kB" line of a /proc file, in bytes; false when the key is absent.
bool proc_kb(const char* file, const char* key, uint64_t* bytes) {
  std::ifstream f(file);
  std::string line;
  const size_t klen = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, klen, key) != 0 || line.size() <= klen || line[klen] != ':') continue;
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str() + klen + 1, "%llu", &kb) != 1) return false;
    *bytes = uint64_t(kb) * 1024;
    return true;
  }
  return false;
}

// A file holding one number (cgroup limits and usage); false for "max" or anything unreadable.
bool file_number(const char* file, uint64_t* value) {
  std::ifstream f(file);
  unsigned long long v = 0;
  if (!(f >> v)) return false;
  *value = uint64_t(v);
  return true;
}

constexpr uint64_t kCheckFrom = uint64_t(64) << 20;  // host requests this large are checked first

}  // namespace

uint64_t host_available_bytes() {
  uint64_t avail = 0;
  if (!proc_kb("/proc/meminfo", "MemAvailable", &avail)) {
    struct sysinfo si{};
    if (::sysinfo(&si) == 0) avail = uint64_t(si.freeram) * si.mem_unit;
  }
  uint64_t limit = 0, usage = 0;  // cgroup v2, then v1
  if ((file_number("/sys/fs/cgroup/memory.max", &limit) && file_number("/sys/fs/cgroup/memory.current", &usage)) ||
      (file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", &limit) &&
       file_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", &usage)))
    if (limit > usage && limit - usage < avail) avail = limit - usage;
  return avail;
}

std::string host_refusal_text(uint64_t bytes_asked, const std::string& what) {
  const std::string asked = bytes_asked ? bytes_text(bytes_asked) + " (" + std::to_string(bytes_asked) + " bytes)"
                                        : std::string("more");
  return (what.empty() ? std::string() : what + ": ") + "cannot allocate " + asked + " of host memory: " +
         bytes_text(host_available_bytes()) + " available; ask for a smaller size";
}

void require_host(uint64_t bytes, const std::string& what) {
  if (bytes > host_available_bytes()) throw InputError(host_refusal_text(bytes, what));
}

uint64_t host_rss_bytes() {
  uint64_t rss = 0;
  return proc_kb("/proc/self/status", "VmRSS", &rss) ? rss : 0;
}

bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
#ifdef KL_HAS_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *free_bytes = f;
  *total_bytes = t;
  return true;
#else
  return false;
#endif
}

#ifdef KL_HAS_CUDA
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError(std::string(what) + " failed: " + cudaGetErrorString(e));
  }
}
}  // namespace
#endif

void* alloc_n(Backend b, size_t count, size_t elem_size) {
  if (elem_size && count > std::numeric_limits<size_t>::max() / elem_size)
    throw InputError("cannot allocate " + std::to_string(count) + " elements of " + std::to_string(elem_size) +
                     " bytes: more than 2^64 bytes");
  return alloc(b, count * elem_size);
}

void* alloc(Backend b, size_t bytes) {
  if (b == Backend::Cpu) {
    if (bytes >= kCheckFrom) require_host(bytes, "");
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw InputError(host_refusal_text(bytes, ""));
    return p;
  }
#ifdef KL_HAS_CUDA
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw InputError("cannot allocate " + bytes_text(bytes) + " (" + std::to_string(bytes) + " bytes) on the GPU: " +
                     bytes_text(free_b) + " free of " + bytes_text(total_b) + " (" + cudaGetErrorString(e) +
                     "); ask for a smaller size");
  }
  return p;
#else
  (void)bytes;
  throw RuntimeError("built without CUDA");
#endif
}

void free(Backend b, void* p) {
  if (b == Backend::Cpu) return std::free(p);
#ifdef KL_HAS_CUDA
  cudaFree(p);  // never throws from a destructor; errors surface at the next checked call
#endif
}

void set(Backend b, void* p, int byte, size_t bytes) {
  if (b == Backend::Cpu) {
    std::memset(p, byte, bytes);
    return;
  }
#ifdef KL_HAS_CUDA
  check(cudaMemset(p, byte, bytes), "cudaMemset");
#endif
}

void to_backend(Backend b, void* dst, const void* src, size_t bytes) {
  if (b == Backend::Cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef KL_HAS_CUDA
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
#endif
}

void to_host(Backend b, void* dst, const void* src, size_t bytes) {
  if (b == Backend::Cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef KL_HAS_CUDA
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
#endif
}

void synchronize(Backend b) {
  if (b == Backend::Cpu) return;
#ifdef KL_HAS_CUDA
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
}

}  // namespace kl::mem
