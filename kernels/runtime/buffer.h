// Memory that lives where the backend runs: host memory for the CPU backend, device memory for the
// CUDA one. Kernels take raw pointers from it; views read it where it lives (the CUDA backend's traces
// go to GL textures without a trip through the host).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/runtime/backend.h"

namespace kl {

namespace mem {
// Allocation failures throw InputError with the bytes asked and the bytes free. Host requests of
// 64 MiB or more are checked against the memory available first (Linux grants more than it has and
// kills the process later; ASan refuses huge sizes by aborting), so they are refused, not attempted.
void* alloc(Backend b, size_t bytes);
// `count` elements of `elem_size` bytes; an InputError when the product does not fit in 64 bits.
void* alloc_n(Backend b, size_t count, size_t elem_size);
void free(Backend b, void* p);
void set(Backend b, void* p, int byte, size_t bytes);
void to_backend(Backend b, void* dst, const void* host_src, size_t bytes);
void to_host(Backend b, void* host_dst, const void* src, size_t bytes);
void synchronize(Backend b);  // waits for the GPU and reports any asynchronous error
std::string bytes_text(uint64_t bytes);  // "1.50 GiB"

// Host memory a new allocation can take: /proc/meminfo's MemAvailable (sysinfo's free RAM where that
// is missing), lowered to the cgroup's limit minus its usage where one is set.
uint64_t host_available_bytes();
// Throws the allocation refusal (InputError) when `bytes` of host memory are more than available;
// `what` names the request ("vector-add panel, n=67108864").
void require_host(uint64_t bytes, const std::string& what);
// The refusal text for a host allocation that failed (std::bad_alloc caught): the bytes available, and
// the bytes asked when known (0: unknown).
std::string host_refusal_text(uint64_t bytes_asked, const std::string& what);
// This process's resident set (VmRSS of /proc/self/status); 0 where it cannot be read.
uint64_t host_rss_bytes();
// cudaMemGetInfo of the current device; false (both 0) without CUDA or without a device.
bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes);
}  // namespace mem

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend b, size_t n) { resize(b, n); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~Buffer() { release(); }

  void resize(Backend b, size_t n) {
    if (b == where_ && n == n_) return;
    release();
    where_ = b;
    if (n) ptr_ = static_cast<T*>(mem::alloc_n(b, n, sizeof(T)));
    n_ = n;
  }
  void release() {
    if (ptr_) mem::free(where_, ptr_);
    ptr_ = nullptr;
    n_ = 0;
  }
  // Every byte set to `byte`: 0xFF poisons floats with NaN, int32 with -1, uint8 with 255.
  void fill_bytes(int byte) {
    if (n_) mem::set(where_, ptr_, byte, n_ * sizeof(T));
  }
  void upload(const T* host, size_t n) {
    resize(where_, n);
    if (n) mem::to_backend(where_, ptr_, host, n * sizeof(T));
  }
  void upload(const std::vector<T>& v) { upload(v.data(), v.size()); }
  std::vector<T> to_host() const {
    std::vector<T> v(n_);
    if (n_) mem::to_host(where_, v.data(), ptr_, n_ * sizeof(T));
    return v;
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return n_; }
  Backend where() const { return where_; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(n_, o.n_);
    std::swap(where_, o.where_);
  }
  T* ptr_ = nullptr;
  size_t n_ = 0;
  Backend where_ = Backend::Cpu;
};

}  // namespace kl
