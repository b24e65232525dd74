// `kernel-ladder soak`: the long-run check. The headless host renders `frames` frames, cycling through
// every panel and moving to new settings every `every` frames: the defaults, every parameter at its
// minimum, every one at its maximum, then the two alternations of minimum and maximum. The cycle (5
// settings per panel, `every` frames each) repeats, so the memory after the first cycle is the
// high-water mark and any growth after it is a leak. At the end it prints host RSS and device memory
// in use after the first 100 frames, after the first cycle and at the end, GL errors, the CUDA error
// state and the failures panels showed, and returns 1 when memory grew past the first cycle's by more
// than `max_growth_mib` or anything failed.
// On the CPU backend integer parameters are capped at kCpuSoakCap (the largest vector-add n would
// take seconds per change there); the CUDA backend takes every range whole.
#pragma once
#include <cstdint>
#include <string>

namespace kl::app {

constexpr int64_t kCpuSoakCap = int64_t(1) << 16;

struct SoakOptions {
  long frames = 10000;
  int width = 1280, height = 800;
  std::string backend = "auto";
  int every = 4;              // frames between parameter changes
  long early = 100;           // memory is also reported after this many frames
  double max_growth_mib = 64; // allowed growth of host RSS and device memory in use after the first cycle
};

int soak_command(const SoakOptions& o);

}  // namespace kl::app
