// kl.cuh: the tracing API every editable kernel includes (`#include "kl.cuh"`). Valid for nvcc, NVRTC and
// the host compiler with the CPU prelude (kl_cpu.h, force-included there). Embedded in the binary and
// written next to an edited source when it is compiled, so an edited kernel needs nothing else.
//
//   kl::Tensor<T>   a kernel parameter: data, element count and the trace hooks the host passed.
//     load(i)                bounds-checked read (a fault past size; returns T(0) and reads nothing)
//     load(i, mask, other)   tl.load(mask=, other=): a masked-off lane reads nothing and gets `other`
//     store(i, v)            bounds-checked write; records writer[i] = program_id() and count[i] += 1
//     store(i, v, mask)      tl.store(mask=): a masked-off lane stores and records nothing
//     atomic_add(i, v)       bounds-checked atomicAdd, recorded like a store
//     present()              false for a tensor the host left out (an optional trace record): its stores
//                            are dropped, its loads return T(0), neither is a fault
//   kl::program_id()  the linear block index (Triton's pid): blockIdx.x + gridDim.x * (y + gridDim.y * z)
//   kl::lane()        the linear thread index within the block
//   kl::Shared<T, R, C>  a traced view of a `__shared__ T name[R][C]` array (issue 31):
//     kl::Shared tile(name, log)   log: a kl::Tensor<uint32_t> parameter the host fills with an access
//                                  log (absent: nothing is recorded)
//     load(r, c), store(r, c, v)   bounds-checked like a tensor's (a fault names the log's parameter)
//
// The warp's view of memory (issue 31): when the host attaches an access log to a tensor (Tensor::access)
// or passes one to a kl::Shared, every load and store through it by the log's chosen program (or by every
// program) appends one record per lane: the byte offset into the tensor or shared array, the access's size,
// load or store, and whether the lane took part (a masked-off lane records that it did not). A lane's k-th
// record and the other lanes' k-th records of the same warp are one warp-wide request; the host
// (kernels/runtime/warp_access.h) turns each request's 32 offsets into 32-byte sectors, 128-byte lines and
// shared-memory banks. Lanes run in order on the CPU backend and together on a GPU; their records are the
// same either way, so are the numbers. Nothing is recorded, and nothing but one null test is added, where
// no log is attached.
//
// A fault (the first one wins, atomically) records its kind, the tensor, program, lane, index and size;
// the host turns it into editable::Fault. Faulty accesses are not performed: nothing is corrupted.
#pragma once

#if defined(__CUDACC_RTC__)
// NVRTC has no standard headers: the fixed-width types the kernels use.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#elif defined(__CUDACC__)
#include <cstdint>
#include <cmath>
#endif

namespace kl {
namespace detail {

// Where the first fault of a launch is recorded. kind 0: none. Layout shared with the host
// (kernels/editable/launch.cpp reads it back).
struct FaultRecord {
  int32_t kind;    // 1 out-of-bounds load, 2 out-of-bounds store
  int32_t tensor;  // the tensor's id (its position among the kernel's parameters)
  int64_t program, lane, index, size;
};

// An access log (issue 31), as the host lays it out (kernels/runtime/trace.h: AccessLog mirrors it): this
// header, then one record count per (slot, thread), then `per_lane` records per (slot, thread). A slot is
// the chosen program's (program >= 0: one slot) or each program's (program = -1: `slots` = the grid).
struct AccessLogHeader {
  int64_t program;   // the program recorded; -1: every program, slot = program id
  int64_t slots;     // programs there is room for
  int64_t threads;   // threads per block
  int64_t per_lane;  // records each thread has room for
  int64_t overflow;  // set to 1 by a thread that had more accesses than room (it records no more)
  int64_t reserved[3];
};
// One record, 64 bits: bit 0 recorded, bit 1 the lane took part (active), bit 2 a store (else a load),
// bits 3-5 log2 of the access's bytes, bit 6 an atomic add (a store too), bits 8-63 the byte offset into the
// tensor or shared array.
enum : uint64_t { kAccessRecorded = 1, kAccessActive = 2, kAccessStore = 4, kAccessAtomic = 64 };

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#if defined(__CUDACC_RTC__)
}  // namespace detail
}  // namespace kl
extern "C" __device__ kl::detail::FaultRecord kl_fault_record;  // found by name (cuModuleGetGlobal)
__device__ kl::detail::FaultRecord kl_fault_record;
namespace kl {
namespace detail {
#define KL_FAULT_RECORD ::kl_fault_record
#else
static __device__ FaultRecord kl_fault_record_;     // one per translation unit (the shipped build)
#define KL_FAULT_RECORD ::kl::detail::kl_fault_record_
#endif
__device__ inline int64_t program_id() {
  return int64_t(blockIdx.x) + int64_t(gridDim.x) * (int64_t(blockIdx.y) + int64_t(gridDim.y) * blockIdx.z);
}
__device__ inline int64_t lane() {
  return int64_t(threadIdx.x) + int64_t(blockDim.x) * (int64_t(threadIdx.y) + int64_t(blockDim.y) * threadIdx.z);
}
__device__ inline void record_fault(int32_t kind, int32_t tensor, int64_t index, int64_t size) {
  if (atomicCAS(&KL_FAULT_RECORD.kind, 0, -1) != 0) return;  // another access faulted first
  KL_FAULT_RECORD.tensor = tensor;
  KL_FAULT_RECORD.program = program_id();
  KL_FAULT_RECORD.lane = lane();
  KL_FAULT_RECORD.index = index;
  KL_FAULT_RECORD.size = size;
  __threadfence();
  atomicExch(&KL_FAULT_RECORD.kind, kind);
}
template <class T>
__device__ inline void add_to(T* p, T v) {
  atomicAdd(p, v);
}
__device__ inline void count_store(uint32_t* c) { atomicAdd(c, 1u); }
#else
// The CPU prelude (kl_cpu.h) defines program_id(), lane(), record_fault() and count_store().
#endif

template <class T>
struct Log2Bytes {
  static constexpr uint32_t value = sizeof(T) == 1 ? 0 : sizeof(T) == 2 ? 1 : sizeof(T) == 4 ? 2 : sizeof(T) == 8 ? 3 : 4;
};

// Where the access logs are written: inline on a GPU (a call there costs the kernel registers), out of line
// and cold on the CPU, so an untraced access pays one test of its log pointer and nothing else.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KL_ACCESS_LOG_PATH __device__ inline
#else
#define KL_ACCESS_LOG_PATH __attribute__((noinline, cold)) inline
#endif

// Appends the calling thread's next record to `log` when its program is the one recorded (else nothing).
// Only that program's threads write, each to its own count and records: no atomics. (32-bit arithmetic
// where the host's layout allows it: slots x threads x per_lane < 2^31; few registers where it inlines.)
KL_ACCESS_LOG_PATH void log_access(uint64_t* log, int64_t byte_offset, uint32_t log2_bytes, uint32_t kind, bool active) {
  AccessLogHeader* h = reinterpret_cast<AccessLogHeader*>(log);
  const int64_t pid = program_id();
  const int64_t slot = h->program < 0 ? pid : (pid == h->program ? 0 : -1);
  const int32_t threads = int32_t(h->threads), per_lane = int32_t(h->per_lane);
  const int32_t t = int32_t(lane());
  if (slot < 0 || slot >= h->slots || t >= threads) return;
  const int32_t i = int32_t(slot) * threads + t;
  uint64_t* counts = log + sizeof(AccessLogHeader) / 8;
  const int32_t k = int32_t(counts[i]);
  if (k >= per_lane) {
    h->overflow = 1;
    return;
  }
  counts[i] = uint64_t(k + 1);
  counts[int32_t(h->slots) * threads + i * per_lane + k] =
      kAccessRecorded | (active ? kAccessActive : 0) | kind | (uint64_t(log2_bytes) << 3) |
      ((active ? uint64_t(byte_offset) : 0) << 8);
}

}  // namespace detail

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
__device__ inline int64_t program_id() { return detail::program_id(); }
__device__ inline int64_t lane() { return detail::lane(); }
#else
inline int64_t program_id() { return detail::program_id(); }
inline int64_t lane() { return detail::lane(); }
#endif

template <class T>
struct Tensor {
  T* data;
  int64_t size;
  int32_t* writer;
  uint32_t* count;
  uint64_t* access;  // an access log the host attached (issue 31; see the top), or null: nothing recorded
  int32_t id;

  __device__ bool present() const { return data != nullptr; }
  __device__ bool in_bounds(int64_t i, bool store) const {
    if (i >= 0 && i < size) return true;
    detail::record_fault(store ? 2 : 1, id, i, size);
    return false;
  }
  // One record of this lane's access to element i (active) or of its sitting this access out.
  __device__ void log(int64_t i, uint32_t kind, bool active) const {  // kind: 0 load, kAccessStore, or with kAccessAtomic
    detail::log_access(access, active ? i * int64_t(sizeof(T)) : 0, detail::Log2Bytes<T>::value, kind, active);
  }
  __device__ T load(int64_t i) const {
    if (!present() || !in_bounds(i, false)) {
      if (access) log(i, 0, false);
      return T(0);
    }
    if (access) log(i, 0, true);
    return data[i];
  }
  __device__ T load(int64_t i, bool mask, T other) const {
    if (mask) return load(i);
    if (access) log(i, 0, false);
    return other;
  }
  __device__ void record(int64_t i) const {
    if (writer) writer[i] = int32_t(program_id());
    if (count) detail::count_store(count + i);
  }
  __device__ void store(int64_t i, T v) const {
    if (!present() || !in_bounds(i, true)) {
      if (access) log(i, detail::kAccessStore, false);
      return;
    }
    if (access) log(i, detail::kAccessStore, true);
    data[i] = v;
    record(i);
  }
  __device__ void store(int64_t i, T v, bool mask) const {
    if (mask) return store(i, v);
    if (access) log(i, detail::kAccessStore, false);
  }
  __device__ void atomic_add(int64_t i, T v) const {
    if (!present() || !in_bounds(i, true)) {
      if (access) log(i, detail::kAccessStore | detail::kAccessAtomic, false);
      return;
    }
    if (access) log(i, detail::kAccessStore | detail::kAccessAtomic, true);
    detail::add_to(data + i, v);
    record(i);
  }
};

// A traced view of a `__shared__ T name[R][C]` array: kl::Shared tile(name, log) (the template arguments
// come from the array). Its loads and stores are the array's, bounds-checked, and recorded into `log` (a
// kl::Tensor<uint32_t> parameter holding an access log, see the top) when the host passes one; offsets are
// bytes from the array's start, so its banks are (offset / 4) % 32 when the array starts at a bank-0 word.
template <class T, int R, int C>
struct Shared {
  T (*rows)[C];
  uint64_t* log;
  int32_t id;  // the log parameter's: a fault names it

  __device__ Shared(T (&array)[R][C], const Tensor<uint32_t>& log_tensor)
      : rows(array), log(reinterpret_cast<uint64_t*>(log_tensor.data)), id(log_tensor.id) {}
  __device__ bool in_bounds(int64_t r, int64_t c, bool store) const {
    if (r >= 0 && r < R && c >= 0 && c < C) return true;
    detail::record_fault(store ? 2 : 1, id, r * C + c, int64_t(R) * C);
    return false;
  }
  __device__ void note(int64_t r, int64_t c, bool store, bool active) const {
    if (log)
      detail::log_access(log, active ? (r * C + c) * int64_t(sizeof(T)) : 0, detail::Log2Bytes<T>::value,
                         store ? uint32_t(detail::kAccessStore) : 0u, active);
  }
  __device__ T load(int64_t r, int64_t c) const {
    const bool ok = in_bounds(r, c, false);
    note(r, c, false, ok);
    return ok ? rows[r][c] : T(0);
  }
  __device__ void store(int64_t r, int64_t c, T v) const {
    const bool ok = in_bounds(r, c, true);
    note(r, c, true, ok);
    if (ok) rows[r][c] = v;
  }
};

}  // namespace kl

// What the generated entry reports about a kernel's parameters, one character each: a tensor 'F' (float),
// 'I' (int32), 'U' (uint32), 'B' (uint8); a scalar 'i' (int32), 'l' (int64), 'f' (float). The host checks
// a launch's arguments against it, so an edited signature is refused in words, not run on wrong bytes.
namespace kl::detail {
template <class T> struct ParamCode { static constexpr char value = '?'; };
template <> struct ParamCode<Tensor<float>> { static constexpr char value = 'F'; };
template <> struct ParamCode<Tensor<int32_t>> { static constexpr char value = 'I'; };
template <> struct ParamCode<Tensor<uint32_t>> { static constexpr char value = 'U'; };
template <> struct ParamCode<Tensor<uint8_t>> { static constexpr char value = 'B'; };
template <> struct ParamCode<int32_t> { static constexpr char value = 'i'; };
template <> struct ParamCode<uint32_t> { static constexpr char value = 'i'; };
template <> struct ParamCode<int64_t> { static constexpr char value = 'l'; };
template <> struct ParamCode<float> { static constexpr char value = 'f'; };
template <class T> struct ParamCode<const T> : ParamCode<T> {};
struct Signature {
  char text[64];
};
template <class F> struct SignatureOf;
template <class... P> struct SignatureOf<void(P...)> {
  static constexpr Signature value = {{ParamCode<P>::value..., 0}};
};
}  // namespace kl::detail
