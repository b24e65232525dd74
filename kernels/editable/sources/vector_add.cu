// Rung 1: vector add, the execution model. out = x + y.
//
// Kernel: vector_add_traced, launched as ceil(n / BLOCK_SIZE) programs (CUDA blocks) of
// min(BLOCK_SIZE, 1024) threads: one thread per element, this build's choice. Triton would run the same
// program on num_warps x 32 threads (4 x 32 = 128 by default), each holding BLOCK_SIZE / 128 elements:
// BLOCK_SIZE counts elements, not threads. Its parameters:
//   x, y        the inputs, n elements each
//   out         the output, n elements; its trace records which program stored each element, and how often
//   lane_state  one entry per (program, offset): 1 when the offset's mask is on, 0 when masked off
//   n           the number of elements
//   BLOCK_SIZE  elements per program (a power of two in [32, 4096]); when it exceeds the 1024 threads a
//               block may have, thread t takes offsets t, t + blockDim.x, ... of its program
//
// Program `pid` covers offsets pid * BLOCK_SIZE + arange(BLOCK_SIZE); the mask offsets < n switches off
// the last program's offsets past n. Without the mask those lanes load and store past the end.
#include "kl.cuh"

__global__ void vector_add_traced(kl::Tensor<float> x, kl::Tensor<float> y, kl::Tensor<float> out,
                                  kl::Tensor<uint8_t> lane_state, int64_t n, int BLOCK_SIZE) {
  const int64_t pid = kl::program_id();
  for (int64_t lane = threadIdx.x; lane < BLOCK_SIZE; lane += blockDim.x) {
    const int64_t offset = pid * BLOCK_SIZE + lane;
    const bool mask = offset < n;
    lane_state.store(pid * BLOCK_SIZE + lane, mask ? 1 : 0);
    const float a = x.load(offset, mask, 0.0f);
    const float b = y.load(offset, mask, 0.0f);
    out.store(offset, a + b, mask);
  }
}
