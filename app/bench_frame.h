// `kernel-ladder bench-frame [--size L] [--frames N] [--json F] [--png F]`: the app's own frame time on
// the headless host. Every frame recomputes an L x L attention-weight matrix (kernels/rungs/attention_weights.h:
// S = Q K^T / sqrt(64), row softmax; the queries shift by one row per frame, so every frame differs) and
// redraws it through the Heatmap widget, then waits for the GPU (glFinish and a CUDA synchronise), so a
// frame's time is the whole of it. Two paths, measured in the same run, in this order:
//   interop  the kernel writes the DataTexture's CUDA-registered pixel buffer; GL refreshes the texture
//            from it on the GPU.
//   upload   the same kernel writes a device staging buffer, copied to the host and uploaded with
//            glTexSubImage2D (DataTexture's fallback path, forced with force_upload_path()).
// It prints fps and per-frame times of both and the ratio upload / interop (goal on the H200 through EGL:
// L = 4096 at >= 60 fps through interop, interop >= 5x faster per frame). On the CPU backend the weights
// are computed on the CPU and only the upload path exists: it says so and defaults to L = 512.
#pragma once
#include <string>

namespace kl::app {

struct BenchFrameOptions {
  std::string backend = "auto";
  int size = 0;    // L; 0: 4096 on the CUDA backend, 512 on the CPU one
  int frames = 0;  // timed frames per path; 0: 120 (CUDA) or 10 (CPU)
  std::string json, png;  // optional outputs (png: the last frame of the last path)
};

// Returns the exit code (0; 1 on GL errors). Throws InputError for bad options, RuntimeError when no
// headless GL context can be made.
int bench_frame(const BenchFrameOptions& o);

}  // namespace kl::app
