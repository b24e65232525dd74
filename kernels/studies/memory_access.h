// The warp's view of memory on every rung (issue 31): sectors per request of a rung's main loads and stores,
// from its own traced kernel. For a panel's settings, the rung's editable kernel (the shipped build, or the
// edited copy the app holds for the rung) runs once more with access logs attached to its main tensors
// (kernels/runtime/trace.h), recording program 0, on inputs cut to what program 0 touches (vector add, ReLU
// + dropout: one program's elements; softmax: one row; attention: one query block; FlashAttention: one query
// block and at most 8 K/V tiles; the backward: one K/V tile), so the panel's own run is not repeated; every
// request's addresses are program 0's at the panel's settings but for the tiles cut off. The requests then
// become sectors per request (kernels/runtime/warp_access.h), against the sectors the same lanes would need
// coalesced. Rungs 5 and 6 also say how their fast kernels load: rung 5's wgmma kernel (the default on an
// H100/H200) through TMA, the copy engine moving whole tiles with no per-lane requests to count; rung 6's
// fast kernels through cp.async (kernels/rungs/flash_attention_fast.h, flash_attention_backward_fast.h).
#pragma once
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/params.h"

namespace kl::study::memory_access {

struct TensorAccess {
  std::string tensor;          // "x", "k"
  bool store = false;          // stores
  bool atomic = false;         // atomic adds (store is true too)
  int64_t requests = 0;        // warp-wide requests of program 0 with at least one lane taking part
  double sectors_per_request = 0;
  double ideal_per_request = 0;  // the same lanes coalesced from an aligned start: 4 for 32 floats
  bool overflow = false;       // the log ran out of room: the first requests only
};

struct Summary {
  std::string panel;           // the panel's id
  std::string kernel;          // the traced kernel that ran ("softmax_traced")
  std::string shape;           // what ran: "program 0 of 1 row of 2000 columns"
  std::vector<TensorAccess> accesses;
  std::string line;            // "sectors per request, program 0 (...): x loads 4, out stores 4, dq adds 4 (coalesced: 4)"
  std::string tma;             // rungs 5 and 6: how their fast kernels load (TMA or cp.async), one sentence; else empty
  std::string error;           // why nothing ran (an InputError: settings past the rung's limits); else empty
};

// The panels it knows: vector-add, relu-dropout, softmax, attention, flash-attention, backward. Any other
// panel: an empty summary (no accesses, no line). A refusal (InputError: settings past the rung's limits, an
// edited source that does not compile) becomes `error`; a failure (RuntimeError: a launch that failed) is thrown.
Summary summarize(const std::string& panel, Backend b, const ParamValues& settings);

}  // namespace kl::study::memory_access
