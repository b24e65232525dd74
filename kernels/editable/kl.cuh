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
  int32_t id;

  __device__ bool present() const { return data != nullptr; }
  __device__ bool in_bounds(int64_t i, bool store) const {
    if (i >= 0 && i < size) return true;
    detail::record_fault(store ? 2 : 1, id, i, size);
    return false;
  }
  __device__ T load(int64_t i) const {
    if (!present() || !in_bounds(i, false)) return T(0);
    return data[i];
  }
  __device__ T load(int64_t i, bool mask, T other) const { return mask ? load(i) : other; }
  __device__ void record(int64_t i) const {
    if (writer) writer[i] = int32_t(program_id());
    if (count) detail::count_store(count + i);
  }
  __device__ void store(int64_t i, T v) const {
    if (!present() || !in_bounds(i, true)) return;
    data[i] = v;
    record(i);
  }
  __device__ void store(int64_t i, T v, bool mask) const {
    if (mask) store(i, v);
  }
  __device__ void atomic_add(int64_t i, T v) const {
    if (!present() || !in_bounds(i, true)) return;
    detail::add_to(data + i, v);
    record(i);
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
