// KL_TRACE_STARTUP=1: one line on stderr per start-up step of a process (the binary loaded, the CUDA
// driver loaded and initialised, the device query, the CUDA context, the EGL display or GLFW window and
// its GL context, ImGui and its fonts, the first CUDA-GL interop registration, the first frame), so a
// machine where starting takes seconds is recognised as such and the slow step is named:
//   startup    612.4 ms  step    580.1 ms  CUDA driver loaded and initialised (cudaGetDeviceCount): 1 device
// The first figure is the time since the process started (its start time in /proc/self/stat, so loading
// the binary and its libraries counts), the second the step's own. Off (every call a no-op) otherwise.
#pragma once
#include <string>

namespace kl::startup {

bool enabled();  // KL_TRACE_STARTUP=1 (read at each call: cheap, and tests can set it)

// A line whose step is the time since the previous line (or since the process started).
void mark(const std::string& what);

// A line for the scope it lives in, printed when it ends: its own duration. `what` can be completed once
// the step's result is known (set()). `active` false: no line (a step traced only the first time).
class Step {
 public:
  explicit Step(std::string what, bool active = true);
  ~Step();
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
  void set(std::string what) { what_ = std::move(what); }

 private:
  std::string what_;
  double start_ = -1;  // ms since the process started; < 0: tracing off
};

// Milliseconds since the process started.
double since_start_ms();

}  // namespace kl::startup
