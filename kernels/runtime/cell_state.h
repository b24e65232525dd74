// The state of one heatmap cell: what kernels (CUDA and the CPU backend) and the views write into a
// cell's second channel, and what shaders/heatmap.frag colours. The values are written once, in
// KL_CELL_STATES below: C++ and CUDA use the enum, and the shader is compiled with the same values as
// generated `#define CELL_NORMAL 0` ... lines (cell_state_glsl_defines(), put after its #version line),
// so no number is written twice.
#pragma once
#include <string>

namespace kl {

// X(name, value, what the heatmap draws)
#define KL_CELL_STATES(X)                                                                        \
  X(Normal, 0, "the value through the colour map")                                               \
  X(Masked, 1, "a masked lane or key (causal, past the end): hatched grey")                      \
  X(Unwritten, 2, "never written (still the NaN it was poisoned with): a red/black checker")     \
  X(Highlight, 3, "a highlighted cell (the hovered row or column): the colour lightened")        \
  X(Outside, 4, "outside the data (a raster's padding past the last cell): the background")

enum CellState : int {
#define KL_CELL_ENUM(name, value, what) kCell##name = value,
  KL_CELL_STATES(KL_CELL_ENUM)
#undef KL_CELL_ENUM
};

// The state as the float a (value, state) cell stores; callable from CUDA kernels too.
#ifdef __CUDACC__
__host__ __device__
#endif
constexpr float cell_value(CellState s) { return float(int(s)); }

// "#define CELL_NORMAL 0\n#define CELL_MASKED 1\n..." for the heatmap shader.
std::string cell_state_glsl_defines();

}  // namespace kl
