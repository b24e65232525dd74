// kl_cpu.h: the CPU prelude, force-included (-include) before an editable CUDA source is compiled by the
// host compiler. It runs CUDA's execution model on the CPU: the blocks of the grid in order on one thread
// (or, for the shipped build of a source without atomics, spread over several: launch()), and
// the threads of a block as fibers that switch at __syncthreads, __syncwarp and the warp shuffles, or as
// plain calls, one after the other, when the source uses none of them (the generated entry says which).
// It provides: __global__/__device__/__host__/__forceinline__, __shared__ (per block) and `extern
// __shared__` dynamic shared memory (its definition is generated beside the entry), threadIdx/blockIdx/
// blockDim/gridDim, the barriers and shuffles, atomics, the float math CUDA code uses, float2/float4.
// Threads of a block that wait at different barriers end the launch with a deadlock fault. Constructs it
// does not run (inline asm, wmma, cooperative groups, __nanosleep, cuda::) are compile errors at their line.
// The fibers carry the sanitizer annotations, so an AddressSanitizer build of the host runs them.
#pragma once
// Where the fibers switch stacks with glibc's _setjmp/_longjmp (KL_CPU_SETJMP below): with _FORTIFY_SOURCE
// (on by default in some distributions' GCC, Ubuntu's among them) glibc's longjmp checks that it jumps up
// its own stack and aborts a switch to another fiber's ("longjmp causes uninitialized stack frame"): this
// file comes first in its translation unit, so undefining it here turns that check off before any system
// header reads it.
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif
#include <stdint.h>

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// The part of a launch the host fills and reads back. The host includes this file with
// KL_CPU_ABI_ONLY defined to get this struct and nothing else.
namespace kl_cpu {
struct Launch {
  uint32_t grid[3], block[3];
  uint64_t dynamic_shared_bytes;  // asked for by the launch (at most kDynamicShared)
  uint32_t threads;    // CPU threads the blocks may be spread over (0 or 1: in order on the caller's);
                       // taken only by kernels whose blocks are independent (entry<..., true>)
  int32_t fault_kind;  // kl::detail::FaultRecord's fields: 1 out-of-bounds load, 2 store
  int32_t fault_tensor;
  int64_t fault_program, fault_lane, fault_index, fault_size;
  int32_t deadlock;    // 1: the threads of a block waited at different barriers (deadlock_text says where)
  int64_t deadlock_program;  // the block that deadlocked
  char deadlock_text[240];
};
// The generated entry of one __global__ function: runs the grid and returns 0.
typedef int (*EntryFn)(Launch* launch, void** args);
}  // namespace kl_cpu

#ifndef KL_CPU_ABI_ONLY
// ---- keywords --------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ thread_local  // one copy per CPU thread; the blocks a thread runs take turns on it
#define __constant__ static const
#define __grid_constant__
#define __align__(n) alignas(n)
#define KL_CPU_PRELUDE 1

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef dim3 uint3;
struct float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
constexpr int warpSize = 32;

// The fibers' jump buffers. On x86-64 GCC's and Clang's __builtin_setjmp/__builtin_longjmp: five words (frame,
// resume address, stack), the compiler saving the other registers around the call; glibc's _longjmp also
// walks the thread's cleanup handlers on every switch, which took a fifth of a shuffle-heavy kernel's time
// (rung 4 at Lq = 4096). glibc's _setjmp/_longjmp elsewhere and under AddressSanitizer, whose interceptors
// see them.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KL_CPU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(KL_CPU_ASAN)
#define KL_CPU_ASAN 1
#endif
#if defined(__x86_64__) && !defined(KL_CPU_ASAN)
#define KL_CPU_SETJMP(b) __builtin_setjmp(b)
namespace kl_cpu {
typedef void* JumpBuf[5];
// __builtin_longjmp may not be called from the function that called __builtin_setjmp: never inlined.
[[noreturn]] __attribute__((noinline)) inline void long_jump(JumpBuf b) { __builtin_longjmp(b, 1); }
}  // namespace kl_cpu
#define KL_CPU_LONGJMP(b) ::kl_cpu::long_jump(b)
#else
#define KL_CPU_SETJMP(b) _setjmp(b)
#define KL_CPU_LONGJMP(b) _longjmp(b, 1)
namespace kl_cpu { typedef jmp_buf JumpBuf; }
#endif

namespace kl_cpu {

// ---- the state of the launch running on this CPU thread ----------------------------------------------
enum FiberState : uint8_t { kReady, kAtBlockBarrier, kAtWarpBarrier, kDone };

struct Fiber {
  JumpBuf jb;
  ucontext_t uc;
  char* stack = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;  // the sanitizer's save slot while this fiber is switched out
  bool started = false;
  FiberState state = kReady;
  int site = 0;                // which barrier (one number per place in the source: __COUNTER__)
  int line = 0;                // its source line, for the message
  unsigned mask = 0;           // a warp barrier's member mask
  int parity = 0;              // which shuffle slot the next exchange uses
  uint64_t slot[2] = {0, 0};   // the values a warp exchange publishes
  uint64_t published = 0;      // exchanges this fiber has published in this block (a lane that has
                               // returned still answers for the ones it took part in)
  dim3 tid;
};

struct Grid {
  Launch* l = nullptr;
  dim3 grid, block;
  dim3 bid, tid;
  int64_t program = 0;
  int64_t nthreads = 0;
  bool fibers = false;
  Fiber* fiber = nullptr;   // [nthreads] in fiber mode
  Fiber* current = nullptr;
  JumpBuf sched_jb;
  bool from_scheduler = false;  // the switch into a fiber came from the scheduler (else from a fiber)
  void* sched_fake = nullptr;
  const void* sched_bottom = nullptr;
  size_t sched_size = 0;
  void (*body)(void*) = nullptr;
  void* body_arg = nullptr;
};

inline thread_local Grid* g_grid = nullptr;

inline const dim3& thread_idx() { return g_grid->tid; }
inline const dim3& block_idx() { return g_grid->bid; }
inline const dim3& block_dim() { return g_grid->block; }
inline const dim3& grid_dim() { return g_grid->grid; }
inline int64_t linear_thread() {
  const Grid& g = *g_grid;
  return int64_t(g.tid.x) + int64_t(g.block.x) * (int64_t(g.tid.y) + int64_t(g.block.y) * g.tid.z);
}

}  // namespace kl_cpu

#define threadIdx (::kl_cpu::thread_idx())
#define blockIdx (::kl_cpu::block_idx())
#define blockDim (::kl_cpu::block_dim())
#define gridDim (::kl_cpu::grid_dim())

// ---- the tracing API's CPU hooks (kl.cuh calls these) ------------------------------------------------
namespace kl::detail {
inline int64_t program_id() { return kl_cpu::g_grid->program; }
inline int64_t lane() { return kl_cpu::linear_thread(); }
inline void record_fault(int32_t kind, int32_t tensor, int64_t index, int64_t size) {
  kl_cpu::Launch& l = *kl_cpu::g_grid->l;
  if (l.fault_kind != 0) return;  // the first fault wins
  l.fault_kind = kind;
  l.fault_tensor = tensor;
  l.fault_program = kl_cpu::g_grid->program;
  l.fault_lane = kl_cpu::linear_thread();
  l.fault_index = index;
  l.fault_size = size;
}
template <class T>
inline void add_to(T* p, T v) { *p += v; }
inline void count_store(uint32_t* c) { *c += 1; }
}  // namespace kl::detail

// ---- fibers ----------------------------------------------------------------------------------------
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size) __attribute__((weak));
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old)
    __attribute__((weak));
}

namespace kl_cpu {

inline void start_switch(void** save, const void* bottom, size_t size) {
  if (&__sanitizer_start_switch_fiber) __sanitizer_start_switch_fiber(save, bottom, size);
}
inline void finish_switch(void* save, const void** bottom, size_t* size) {
  if (&__sanitizer_finish_switch_fiber) __sanitizer_finish_switch_fiber(save, bottom, size);
}

// Into fiber f (from the scheduler or from another fiber, whose own switch-out is done): started at
// fiber_main the first time, else where it last yielded. Does not return.
[[noreturn]] inline void enter(Grid& g, Fiber& f) {
  g.current = &f;
  g.tid = f.tid;
  if (!f.started) {
    f.started = true;
    setcontext(&f.uc);
  }
  KL_CPU_LONGJMP(f.jb);
}

// The fiber the pass runs after `from`: the next ready one in index order (nullptr: the pass is over). Only
// the scheduler's release() makes fibers ready, between passes, so the pass runs exactly the fibers that
// were ready when it began, in index order, whether they are entered from the scheduler or from each other.
inline Fiber* next_ready(Grid& g, Fiber* from) {
  for (Fiber* f = from + 1; f < g.fiber + g.nthreads; ++f)
    if (f->state == kReady) return f;
  return nullptr;
}

// Fiber -> the next ready fiber of the pass, or the scheduler when there is none (one switch per wait, not
// two). Returns when something switches back.
__attribute__((noinline)) inline void yield() {
  Grid& g = *g_grid;
  Fiber* me = g.current;
  if (!KL_CPU_SETJMP(me->jb)) {
    Fiber* next = next_ready(g, me);
    if (next) {
      start_switch(&me->fake_stack, next->stack, next->stack_size);
      g.from_scheduler = false;
      enter(g, *next);
    }
    start_switch(&me->fake_stack, g.sched_bottom, g.sched_size);
    KL_CPU_LONGJMP(g.sched_jb);
  }
  finish_switch(me->fake_stack, nullptr, nullptr);
  g_grid->tid = me->tid;
}

inline void fiber_main() {
  Grid* g = g_grid;
  // The stack switched from: the scheduler's (kept: fibers switch back to it) or another fiber's.
  const void* other_bottom = nullptr;
  size_t other_size = 0;
  if (g->from_scheduler)
    finish_switch(nullptr, &g->sched_bottom, &g->sched_size);
  else
    finish_switch(nullptr, &other_bottom, &other_size);
  for (;;) {
    g_grid->tid = g_grid->current->tid;
    g_grid->body(g_grid->body_arg);
    g_grid->current->state = kDone;
    yield();
  }
}

// Scheduler -> fiber f, and on through the pass's other ready fibers; returns when the last of them yields.
inline void resume(Grid& g, Fiber& f) {
  if (!KL_CPU_SETJMP(g.sched_jb)) {
    start_switch(&g.sched_fake, f.stack, f.stack_size);
    g.from_scheduler = true;
    enter(g, f);
  }
  finish_switch(g.sched_fake, nullptr, nullptr);
}

constexpr size_t kFiberStack = 256 * 1024;

inline bool make_fibers(Grid& g) {
  g.fiber = new (std::nothrow) Fiber[size_t(g.nthreads)];
  if (!g.fiber) return false;
  const size_t page = 4096, each = kFiberStack + page;
  char* base = static_cast<char*>(mmap(nullptr, each * size_t(g.nthreads), PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0));
  if (base == MAP_FAILED) return false;
  for (int64_t i = 0; i < g.nthreads; ++i) {
    Fiber& f = g.fiber[i];
    char* lo = base + size_t(i) * each;
    mprotect(lo, page, PROT_NONE);  // a guard page: a fiber that overflows its stack faults, not corrupts
    f.stack = lo + page;
    f.stack_size = kFiberStack;
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = f.stack;
    f.uc.uc_stack.ss_size = f.stack_size;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, fiber_main, 0);
    const int64_t x = i % g.block.x, y = (i / g.block.x) % g.block.y, z = i / (int64_t(g.block.x) * g.block.y);
    f.tid = dim3(unsigned(x), unsigned(y), unsigned(z));
  }
  return true;
}

inline void free_fibers(Grid& g) {
  if (!g.fiber) return;
  if (g.fiber[0].stack) munmap(g.fiber[0].stack - 4096, (kFiberStack + 4096) * size_t(g.nthreads));
  delete[] g.fiber;
  g.fiber = nullptr;
}

inline void set_deadlock(Grid& g, const char* what) {
  if (g.l->deadlock) return;
  g.l->deadlock = 1;
  g.l->deadlock_program = g.program;
  std::snprintf(g.l->deadlock_text, sizeof g.l->deadlock_text, "program %lld: %s", (long long)g.program, what);
}

// Releases the lanes of one warp waiting at a warp barrier once every live lane of its mask is there.
inline bool release_warp(Grid& g, int64_t base, int64_t end) {
  const Fiber* first = nullptr;
  for (int64_t i = base; i < end; ++i)
    if (g.fiber[i].state == kAtWarpBarrier) { first = &g.fiber[i]; break; }
  if (!first) return false;
  for (int64_t i = base; i < end; ++i) {
    const Fiber& f = g.fiber[i];
    if (!((first->mask >> (i - base)) & 1u) || f.state == kDone) continue;
    if (f.state != kAtWarpBarrier || f.site != first->site) return false;
  }
  for (int64_t i = base; i < end; ++i)
    if (g.fiber[i].state == kAtWarpBarrier && ((first->mask >> (i - base)) & 1u)) g.fiber[i].state = kReady;
  return true;
}

// Every fiber is waiting or done: release a barrier whose members are all there, or report the deadlock.
inline bool release(Grid& g) {
  bool any = false;
  for (int64_t base = 0; base < g.nthreads; base += 32)
    any = release_warp(g, base, std::min<int64_t>(base + 32, g.nthreads)) || any;
  if (any) return true;
  int site = -1;
  int64_t other = -1, first = -1;
  for (int64_t i = 0; i < g.nthreads; ++i) {
    const Fiber& f = g.fiber[i];
    if (f.state == kDone) continue;
    if (f.state == kAtBlockBarrier && (site < 0 || f.site == site)) {
      if (site < 0) first = i;
      site = f.site;
      continue;
    }
    other = i;
    break;
  }
  if (other < 0 && site >= 0) {
    for (int64_t i = 0; i < g.nthreads; ++i)
      if (g.fiber[i].state == kAtBlockBarrier) g.fiber[i].state = kReady;
    return true;
  }
  char what[200];
  const Fiber& o = g.fiber[other];
  if (first >= 0)
    std::snprintf(what, sizeof what, "threads wait at different barriers: thread %lld at line %d, thread %lld at %sline %d",
                  (long long)first, g.fiber[first].line, (long long)other,
                  o.state == kAtWarpBarrier ? "a warp barrier or shuffle at " : "", o.line);
  else
    std::snprintf(what, sizeof what, "threads of one warp wait at different warp barriers or shuffles (thread %lld at line %d)",
                  (long long)other, o.line);
  set_deadlock(g, what);
  return false;
}

inline bool run_block_fibers(Grid& g) {
  for (int64_t i = 0; i < g.nthreads; ++i) g.fiber[i].state = kReady, g.fiber[i].published = 0, g.fiber[i].parity = 0;
  for (;;) {
    // One pass: every fiber ready now runs until it waits or ends, in index order (after it no fiber is
    // ready: a fiber leaves the ready state when it runs, and only release() below sets it again).
    Fiber* first = g.fiber[0].state == kReady ? &g.fiber[0] : next_ready(g, &g.fiber[0]);
    if (first) resume(g, *first);
    bool live = false;
    for (int64_t i = 0; i < g.nthreads && !live; ++i) live = g.fiber[i].state != kDone;
    if (!live) return true;
    if (!release(g)) return false;
  }
}

// ---- barriers and warp exchanges (called from kernel code) ------------------------------------------
inline void wait_block(int line, int site) {
  Grid& g = *g_grid;
  if (g.nthreads == 1) return;
  if (!g.fibers) {
    set_deadlock(g, "__syncthreads reached in a kernel run without fibers");
    return;
  }
  g.current->state = kAtBlockBarrier;
  g.current->site = site;
  g.current->line = line;
  yield();
}

inline void wait_warp(unsigned mask, int line, int site) {
  Grid& g = *g_grid;
  if (!g.fibers) {
    if (g.nthreads > 1) set_deadlock(g, "a warp barrier or shuffle reached in a kernel run without fibers");
    return;
  }
  g.current->state = kAtWarpBarrier;
  g.current->site = site;
  g.current->line = line;
  g.current->mask = mask;
  yield();
}

// Publishes `bits`, waits for the warp, returns lane `src`'s published value (own value if src did not
// take part in this exchange). A lane released with the others may have run on and returned before this
// one resumes: its value for this exchange is still in its slot (it published at least as many).
inline uint64_t exchange(unsigned mask, uint64_t bits, int64_t src, int line, int site) {
  Grid& g = *g_grid;
  if (!g.fibers) {
    wait_warp(mask, line, site);
    return bits;
  }
  Fiber* me = g.current;
  const int p = me->parity;
  me->slot[p] = bits;
  const uint64_t n = ++me->published;
  wait_warp(mask, line, site);
  me->parity ^= 1;
  if (src < 0 || src >= g.nthreads || g.fiber[src].published < n) return bits;
  return g.fiber[src].slot[p];
}

inline unsigned ballot(unsigned mask, bool pred, int line, int site) {
  Grid& g = *g_grid;
  if (!g.fibers) return pred ? 1u : 0u;
  Fiber* me = g.current;
  const int p = me->parity;
  me->slot[p] = pred ? 1 : 0;
  wait_warp(mask, line, site);
  me->parity ^= 1;
  const int64_t self = me - g.fiber, base = self - self % 32;
  unsigned out = 0;
  for (int64_t i = base; i < std::min<int64_t>(base + 32, g.nthreads); ++i)
    if (((mask >> (i - base)) & 1u) && g.fiber[i].slot[p]) out |= 1u << (i - base);
  return out;
}

template <class T>
inline T shfl(unsigned mask, T v, int64_t src_in_warp, int line, int site) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move values of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const int64_t self = linear_thread(), base = self - self % 32;
  bits = exchange(mask, bits, src_in_warp < 0 ? -1 : base + src_in_warp, line, site);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
inline int64_t lane_in_warp() { return linear_thread() % 32; }
inline void syncwarp_at(int line, int site, unsigned mask = 0xffffffffu) { wait_warp(mask, line, site); }
template <class T>
inline T shfl_idx(int line, int site, unsigned mask, T v, int src, int width = 32) {
  const int64_t l = lane_in_warp();
  return shfl(mask, v, (l & ~int64_t(width - 1)) + (src & (width - 1)), line, site);
}
template <class T>
inline T shfl_xor(int line, int site, unsigned mask, T v, int m, int width = 32) {
  const int64_t l = lane_in_warp(), s = l ^ m;
  return shfl(mask, v, (s & ~int64_t(width - 1)) == (l & ~int64_t(width - 1)) ? s : l, line, site);
}
template <class T>
inline T shfl_down(int line, int site, unsigned mask, T v, unsigned d, int width = 32) {
  const int64_t l = lane_in_warp();
  return shfl(mask, v, (l % width) + int64_t(d) < width ? l + int64_t(d) : l, line, site);
}
template <class T>
inline T shfl_up(int line, int site, unsigned mask, T v, unsigned d, int width = 32) {
  const int64_t l = lane_in_warp();
  return shfl(mask, v, (l % width) >= int64_t(d) ? l - int64_t(d) : l, line, site);
}

// ---- the entry the host calls: every block of the grid, in order ------------------------------------
template <class... P, size_t... I>
void call_with(void (*f)(P...), void** args, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}

template <class... P>
struct Bound {
  void (*f)(P...);
  void** args;
  static void run(void* self) {
    Bound* b = static_cast<Bound*>(self);
    call_with(b->f, b->args, std::index_sequence_for<P...>{});
  }
};

// Runs blocks of the grid on this CPU thread, each to its end, in the order `next` hands out their linear
// indices (program = x + gx (y + gy z)), until it hands out one past the last or a block deadlocks.
template <class... P, class Next>
void run_blocks(void (*f)(P...), Launch* l, void** args, bool fibers, Next next) {
  Bound<P...> bound{f, args};
  Grid grid;
  Grid* g = &grid;
  g->l = l;
  g->grid = dim3(l->grid[0], l->grid[1], l->grid[2]);
  g->block = dim3(l->block[0], l->block[1], l->block[2]);
  g->fibers = fibers;
  g->nthreads = int64_t(g->block.x) * g->block.y * g->block.z;
  g->body = &Bound<P...>::run;
  g->body_arg = &bound;
  Grid* saved = g_grid;
  g_grid = g;
  if (fibers && !make_fibers(*g)) {
    set_deadlock(*g, "could not allocate the fibers' stacks");
    free_fibers(*g);
    g_grid = saved;
    return;
  }
  const int64_t gx = g->grid.x, gxy = gx * g->grid.y, total = gxy * g->grid.z;
  for (int64_t program = next(); program < total && !l->deadlock; program = next()) {
    g->bid = dim3(unsigned(program % gx), unsigned(program / gx % g->grid.y), unsigned(program / gxy));
    g->program = program;
    if (fibers) {
      if (!run_block_fibers(*g)) break;
      continue;
    }
    for (int64_t t = 0; t < g->nthreads; ++t) {
      g->tid = dim3(unsigned(t % g->block.x), unsigned((t / g->block.x) % g->block.y),
                    unsigned(t / (int64_t(g->block.x) * g->block.y)));
      Bound<P...>::run(&bound);
    }
  }
  free_fibers(*g);
  g_grid = saved;
}

// In order on this CPU thread.
template <class... P>
void launch_in_order(void (*f)(P...), Launch* l, void** args, bool fibers) {
  int64_t next = 0;
  run_blocks(f, l, args, fibers, [&] { return next++; });
}

// Over n CPU threads (this one among them) taking the blocks in increasing order, each recording into its
// own copy of the launch's fault fields; the launch keeps the fault (then the deadlock) of the lowest
// program, which is the one the in-order run records first.
template <class... P>
void launch_over_threads(void (*f)(P...), Launch* l, void** args, bool fibers, int64_t n) {
  std::atomic<int64_t> next{0};
  auto take = [&] { return next++; };
  std::vector<Launch> part(size_t(n), *l);
  std::vector<std::thread> threads;
  for (int64_t i = 1; i < n; ++i) {
    try {
      threads.emplace_back([&, i] { run_blocks(f, &part[size_t(i)], args, fibers, take); });
    } catch (...) {  // no thread to be had: the ones running (this one at least) take the remaining blocks
      break;
    }
  }
  run_blocks(f, &part[0], args, fibers, take);
  for (std::thread& t : threads) t.join();
  const Launch* fault = nullptr;
  const Launch* deadlock = nullptr;
  for (const Launch& p : part) {
    if (p.fault_kind != 0 && (!fault || p.fault_program < fault->fault_program)) fault = &p;
    if (p.deadlock && (!deadlock || p.deadlock_program < deadlock->deadlock_program)) deadlock = &p;
  }
  if (fault) {
    l->fault_kind = fault->fault_kind, l->fault_tensor = fault->fault_tensor, l->fault_program = fault->fault_program;
    l->fault_lane = fault->fault_lane, l->fault_index = fault->fault_index, l->fault_size = fault->fault_size;
  }
  if (deadlock) {
    l->deadlock = 1, l->deadlock_program = deadlock->deadlock_program;
    std::memcpy(l->deadlock_text, deadlock->deadlock_text, sizeof l->deadlock_text);
  }
}

// Runs every block of the grid: in order, or, for a kernel whose blocks are independent (`parallel`: its
// source uses no atomics, so no block reads what another writes) with l->threads > 1, over that many
// threads. The result is the same either way.
template <bool parallel, class... P>
int launch(void (*f)(P...), Launch* l, void** args, bool fibers) {
  if constexpr (parallel) {
    const int64_t total = int64_t(l->grid[0]) * l->grid[1] * l->grid[2];
    const int64_t n = std::min<int64_t>(l->threads, total);
    if (n > 1) {
      launch_over_threads(f, l, args, fibers, n);
      return 0;
    }
  }
  launch_in_order(f, l, args, fibers);
  return 0;
}

// The generated entry of `kernel` (the kernel's address as a template argument); `parallel`: its blocks are
// independent (launch above).
template <auto kernel, bool fibers, bool parallel = false>
int entry(Launch* l, void** args) {
  return launch<parallel>(kernel, l, args, fibers);
}

// Dynamic shared memory: `extern __shared__ T name[];` resolves to a generated definition of this size.
constexpr size_t kDynamicShared = 227 * 1024;

}  // namespace kl_cpu

// ---- CUDA's device functions -----------------------------------------------------------------------
// Each textual use is its own barrier (__COUNTER__); __LINE__ names it in a deadlock's message.
#define __syncthreads() ::kl_cpu::wait_block(__LINE__, __COUNTER__)
#define __syncwarp(...) ::kl_cpu::syncwarp_at(__LINE__, __COUNTER__, ##__VA_ARGS__)
#define __shfl_sync(...) ::kl_cpu::shfl_idx(__LINE__, __COUNTER__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::kl_cpu::shfl_xor(__LINE__, __COUNTER__, __VA_ARGS__)
#define __shfl_down_sync(...) ::kl_cpu::shfl_down(__LINE__, __COUNTER__, __VA_ARGS__)
#define __shfl_up_sync(...) ::kl_cpu::shfl_up(__LINE__, __COUNTER__, __VA_ARGS__)
#define __ballot_sync(mask, pred) ::kl_cpu::ballot((mask), bool(pred), __LINE__, __COUNTER__)
#define __any_sync(mask, pred) (::kl_cpu::ballot((mask), bool(pred), __LINE__, __COUNTER__) != 0u)
#define __all_sync(mask, pred) (::kl_cpu::ballot((mask), !(pred), __LINE__, __COUNTER__) == 0u)
#define __activemask() 0xffffffffu
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)

template <class T> struct same_ { using type = T; };  // the value's type follows the pointer's, as in CUDA
template <class T> inline T atomicAdd(T* p, typename same_<T>::type v) { T old = *p; *p = old + v; return old; }
template <class T> inline T atomicSub(T* p, typename same_<T>::type v) { T old = *p; *p = old - v; return old; }
template <class T> inline T atomicMax(T* p, typename same_<T>::type v) { T old = *p; if (v > old) *p = v; return old; }
template <class T> inline T atomicMin(T* p, typename same_<T>::type v) { T old = *p; if (v < old) *p = v; return old; }
template <class T> inline T atomicExch(T* p, typename same_<T>::type v) { T old = *p; *p = v; return old; }
template <class T> inline T atomicCAS(T* p, typename same_<T>::type cmp, typename same_<T>::type v) {
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}

inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(unsigned(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// ---- what the prelude does not run: compile errors at the line that uses it --------------------------
// (The run-time compile also names these in its own words; kernels/editable/compile.cpp.)
#pragma GCC poison asm __asm__ __nanosleep wmma cooperative_groups __syncthreads_count __syncthreads_and __syncthreads_or

#endif  // KL_CPU_ABI_ONLY
