// Rung 1½: the warp's view of memory. out = in^T, three ways.
//   in   [rows, cols] row-major floats;   out  [cols, rows]:   out[c][r] = in[r][c]
//
// A transpose does no arithmetic: its speed is how its warps touch memory. A warp is 32 lanes running one
// instruction together; a load or store of the warp is one request, and the hardware moves whole 32-byte
// sectors of device memory for it. 32 lanes reading 32 neighbouring floats (128 bytes) need 4 sectors:
// coalesced. 32 lanes reading down a column, each a row apart, need 32 sectors for the same 128 useful
// bytes. Shared memory is 32 banks of 4-byte words (word w in bank w % 32); a bank serves one word at a
// time, so 32 lanes asking one bank for 32 different words wait 32 turns: a 32-way bank conflict.
//
// Every kernel is launched as (ceil(cols / TILE), ceil(rows / TILE)) programs (CUDA blocks) of
// (TILE, BLOCK_ROWS) = (32, 8) threads; program (bx, by) moves the TILE x TILE tile whose top-left element
// is in[by * TILE][bx * TILE], each thread TILE / BLOCK_ROWS = 4 elements of it, 8 rows apart. Warp w of a
// program is its threads with threadIdx.y = w: lane L is threadIdx.x = L.
//   transpose_naive   lanes read along a row of in (coalesced: 4 sectors a request) and write down a
//                     column of out (strided: rows * 4 bytes apart, 32 sectors a request).
//   transpose_tiled   the tile goes through shared memory: read along rows of in, written along rows of
//                     out, both coalesced; but the lanes then read the tile down a column, 32 floats that
//                     are 32 words apart: all in one bank, a 32-way conflict on every such request.
//   transpose_padded  the same with each tile row padded to TILE + 1 floats: a column's 32 words are 33
//                     apart, in 32 different banks, so no conflict.
// Parameters:
//   in, out     the matrices; out's trace records which program stored each element
//   tile_log    an access log of the tile's loads and stores (kl::Shared, kl.cuh), when the host wants one
//   rows, cols  in's shape
// The masks (x < cols, y < rows) switch off the lanes past the matrix's edge in the last tiles.
#include "kl.cuh"

#define TILE 32       // a program moves one TILE x TILE tile
#define BLOCK_ROWS 8  // of TILE x BLOCK_ROWS threads, each moving TILE / BLOCK_ROWS elements

__global__ void transpose_naive(kl::Tensor<float> in, kl::Tensor<float> out, int rows, int cols) {
  const int x = blockIdx.x * TILE + threadIdx.x;  // in's column: lane L of the warp takes column x0 + L
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    const int y = blockIdx.y * TILE + threadIdx.y + j;  // in's row: the same for the whole warp
    const bool inside = x < cols && y < rows;
    const float v = in.load(int64_t(y) * cols + x, inside, 0.0f);  // along a row of in: coalesced
    out.store(int64_t(x) * rows + y, v, inside);                   // down a column of out: rows * 4 bytes apart
  }
}

__global__ void transpose_tiled(kl::Tensor<float> in, kl::Tensor<float> out, kl::Tensor<uint32_t> tile_log,
                                int rows, int cols) {
  __shared__ float tile_mem[TILE][TILE];  // a row is 32 floats: element [r][c] in bank c
  kl::Shared tile(tile_mem, tile_log);
  const int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE;
  // 1. in's tile into shared memory, row by row: lanes read along a row of in and write along a row of the tile.
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    const int y = y0 + threadIdx.y + j, x = x0 + threadIdx.x;
    tile.store(threadIdx.y + j, threadIdx.x, in.load(int64_t(y) * cols + x, x < cols && y < rows, 0.0f));
  }
  __syncthreads();  // the whole tile is in before any thread reads another thread's element
  // 2. Out's tile, row by row: out's row y is in's column y, so lanes read down a column of the tile.
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    const int y = x0 + threadIdx.y + j, x = y0 + threadIdx.x;  // out's row and column
    const float v = tile.load(threadIdx.x, threadIdx.y + j);  // down a column: 32 words in one bank
    out.store(int64_t(y) * rows + x, v, x < rows && y < cols);  // along a row of out: coalesced
  }
}

__global__ void transpose_padded(kl::Tensor<float> in, kl::Tensor<float> out, kl::Tensor<uint32_t> tile_log,
                                 int rows, int cols) {
  __shared__ float tile_mem[TILE][TILE + 1];  // a row is 33 floats: element [r][c] in bank (r + c) % 32
  kl::Shared tile(tile_mem, tile_log);
  const int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE;
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    const int y = y0 + threadIdx.y + j, x = x0 + threadIdx.x;
    tile.store(threadIdx.y + j, threadIdx.x, in.load(int64_t(y) * cols + x, x < cols && y < rows, 0.0f));
  }
  __syncthreads();
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    const int y = x0 + threadIdx.y + j, x = y0 + threadIdx.x;
    const float v = tile.load(threadIdx.x, threadIdx.y + j);  // down a column: 33 words apart, 32 banks
    out.store(int64_t(y) * rows + x, v, x < rows && y < cols);
  }
}
