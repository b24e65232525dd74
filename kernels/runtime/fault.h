// Fault injection for testing the error paths a real GPU rarely takes on demand.
//   KL_INJECT_FAULT=launch:N   the Nth kernel launch of the process (counted from 1) throws the
//                              RuntimeError a failed CUDA launch throws; every other launch runs.
// Launches counted: every kl::cuda::launch / launch_packed (kernels/runtime/cuda_launch.cuh) and, on the
// CPU backend, every launch of an editable kernel (kernels/editable/launch.cpp: rung 1's traced kernel and
// every rung converted to an editable source).
// Unset, the cost is one load of a flag read once from the environment and a not-taken branch.
#pragma once
#include <atomic>
#include <string>

namespace kl::fault {

namespace detail {
extern std::atomic<bool> g_armed;
void count_launch(const char* name);  // throws RuntimeError at the armed launch
}  // namespace detail

// Call at the point a launch happens, before it happens. `name` is the kernel's name.
inline void at_launch(const char* name) {
  if (detail::g_armed.load(std::memory_order_relaxed)) detail::count_launch(name);
}

// Arms (or with "" disarms) the hook as KL_INJECT_FAULT would, and restarts the count; tests use it.
// Throws InputError for anything but "" or "launch:N" with N >= 1.
void arm(const std::string& spec);
// Launches counted since the hook was last armed (0 when it is not armed).
long launches_counted();

}  // namespace kl::fault
