// What an instrumented fast kernel writes (issue 30, "Inside the fast kernel"): the phases its warp roles go
// through and the layout of the trace buffer. Shared by the kernels (kernels/rungs/sm90_device.cuh's
// LaneRecorder), the launch that records them (kernels/measure/timeline_record.cu) and the data model that
// reads the buffer back (kernels/measure/timeline.h). Plain C++, no standard library: device code includes it.
//
// The buffer: for every recorded CTA (slot s) and every lane of it (one recording thread per warp role: each
// consumer warpgroup's first thread, and the producer warp's issuing lane), a region of kHeaderRecords +
// capacity records of 16 bytes (four 32-bit words):
//   record 0: {events written (may exceed capacity: the excess was dropped), SM id, kLaneMagic, lane}
//   record 1: {%globaltimer low, high, clock64 low, high} when the lane started
//   record 2: the same when it finished
//   record 2 + i (i >= 1): event i - 1: {clock64 low, high, phase | (K/V step & 0xFFFFFF) << 8, work tile}
// An event marks the moment its phase begins; the phase ends where the lane's next event begins. Every lane's
// last event is Phase::Done. Slot s's lane l region starts at record (s * lanes + l) * (kHeaderRecords +
// capacity).
//
// Why clock64 with the SM id and not %globaltimer alone: the phases last 50-500 ns, and %globaltimer's update
// interval is not documented (on recent GPUs it has been seen to step in about a microsecond); clock64 counts
// the SM's cycles (about 0.5 ns on the H200). It is local to the SM, so each lane also takes %globaltimer with
// clock64 at its start and end: the host aligns each CTA to the common timer and converts cycles to ns with
// the rate the lanes measured (kernels/measure/timeline.cpp, decode).
#pragma once
#include <stdint.h>

namespace kl::timeline {

// The phases, in the kernels' words. Keep the numbering: the kernels write it, decode() reads it.
enum class Phase : uint8_t {
  Setup = 0,    // the CTA's start: mbarrier init, register hand-over (setmaxnreg), the first barrier
  Schedule,     // taking the next work tile (persistent kernels): the tile index is the events' tile
  WaitQ,        // consumer: waiting for Q's bulk copy (its "full" mbarrier)
  WaitK,        // consumer: waiting for a K tile's bulk copy
  WaitV,        // consumer: waiting for a V tile's bulk copy
  WaitTurn,     // consumer: waiting for its turn on the tensor cores (the named barrier of the ping-pong)
  IssueS,       // issuing S = Q K^T (wgmma, asynchronous)
  IssuePV,      // issuing O += P V
  WaitS,        // waiting for S to complete (wgmma.wait_group)
  Softmax,      // mask, row max, exp2, row sum
  WaitPV,       // waiting for P V to complete
  Rescale,      // O <- alpha O (and, without the late rescale, P packed into the A fragments)
  Pack,         // P rounded into the A fragments (the late rescale's kernels: rescale apart)
  Epilogue,     // O / l written (or zeros for rows that see no key); backward: dK, dV written
  WaitQFree,    // producer: waiting until the consumers released a Q buffer
  LoadQ,        // producer: issuing Q's bulk tensor copy
  WaitKFree,    // producer: waiting until a K stage is free
  LoadK,        // producer: issuing a K tile's copy
  WaitVFree,    // producer: waiting until a V stage is free
  LoadV,        // producer: issuing a V tile's copy
  WaitTiles,    // backward: waiting for the step's Q, dO (cp.async) and the CTA barrier
  LoadTiles,    // backward: issuing the next step's cp.async copies (Q, dO, L, D)
  IssueDP,      // backward: issuing dP^T = V dO^T
  WaitDP,       // backward: waiting for dP^T
  DS,           // backward: dS = P (dP - D), P and dS packed as A fragments
  IssueDVDK,    // backward: issuing dV += P^T dO and dK += dS^T Q
  StoreDS,      // backward: dS^T into shared memory (the A operand of dQ = dS K)
  WaitDS,       // backward: the CTA barrier after the dS store
  IssueDQ,      // backward: issuing dQ_i = dS K
  WaitDQ,       // backward: waiting for dV, dK and dQ (one wait retires the three)
  AddDQ,        // backward: dQ into the fp32 accumulator (atomics, or the bulk path's staging and adds)
  WaitDVDK,     // backward, deterministic mode (no dQ here): waiting for dV and dK
  WaitOFree,    // consumer, O by bulk stores: waiting until the last tile's stores have read the O tile
  StoreO,       // consumer, O by bulk stores: the warpgroup's barrier, then its rows' bulk tensor stores issued
  Done,         // the lane finished: the end of its last phase
  Count
};

constexpr uint32_t kLaneMagic = 0x544C4E31u;  // "TLN1": the lane's header was written
constexpr int kHeaderRecords = 3;
constexpr int kMaxTracedCtas = 32;  // CTAs a launch records by index; `all` records every CTA
constexpr int kNoStep = -1;         // an event's step where no K/V (forward) or query (backward) tile applies

// The instrumented kernels' extra argument (by value).
struct TraceArgs {
  void* buf;                     // 16-byte records, zeroed by the host before the launch
  int ctas[kMaxTracedCtas];      // linear CTA indices recorded (blockIdx.x + gridDim.x (y + gridDim.y z))
  int n_ctas;                    // entries of ctas used; -1: every CTA, slot = its linear index
  int lanes;                     // lanes per CTA
  int capacity;                  // events per lane
};

}  // namespace kl::timeline
