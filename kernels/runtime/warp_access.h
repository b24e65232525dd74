// The warp's view of memory (issue 31): what one warp-wide load or store costs, from its 32 lanes'
// addresses. Pure functions, no backend: the access logs the kernels record (kernels/runtime/trace.h:
// AccessLog) are decoded here into requests, and each request's cost computed as the hardware counts it:
//   global memory  the 32-byte sectors and 128-byte lines the active lanes' bytes fall in. A warp reading
//                  32 consecutive floats from a 128-byte boundary needs 4 sectors, 1 line (coalesced); 32
//                  floats 128 bytes apart need 32 sectors, 32 lines. Offsets are bytes from the tensor's
//                  start, which cudaMalloc aligns to 256 bytes, so the sectors are the GPU's.
//   shared memory  32 banks of 4-byte words, word w in bank w % 32. A bank serves one word per pass, so
//                  the request takes as many passes as the most distinct words any one bank is asked for:
//                  its conflict degree (1: none; lanes reading the same word share it, a broadcast). An
//                  access wider than 4 bytes is served a group of lanes at a time (8 bytes: half-warps, 16:
//                  quarter-warps), each group its own passes; the request's wavefronts are their sum.
#pragma once
#include <cstdint>
#include <set>
#include <vector>

namespace kl::warp_access {

constexpr int kWarpSize = 32;
constexpr int kSectorBytes = 32;
constexpr int kLineBytes = 128;
constexpr int kBanks = 32;
constexpr int kBankBytes = 4;

// One warp-wide load or store: the k-th access each lane of the warp made through one tensor or array.
struct Request {
  int64_t program = 0;    // the program (block) whose warp made it
  int warp = 0;           // the warp within the block: threads 32 warp .. 32 warp + 31
  int64_t index = 0;      // the warp's requests to this tensor or array, counted from 0
  bool store = false;
  bool atomic = false;    // an atomic add (a store too)
  int bytes = 4;          // each lane's access
  uint32_t active = 0;    // the lanes that took part (bit i: lane i)
  int64_t offset[kWarpSize] = {};  // byte offsets, where active
  bool mixed = false;     // its lanes' records disagree (load, store or atomic, or sizes): lanes that diverged
  bool issued() const { return active != 0; }  // a request no lane takes part in moves nothing
  int lanes() const;      // active lanes
};

// Convenience for tests and for building requests: lanes 0..n-1 active at offsets[i] (n <= 32).
Request make_request(const std::vector<int64_t>& offsets, int bytes, bool store = false);

struct GlobalCost {
  int sectors = 0;        // distinct 32-byte sectors the active lanes' bytes fall in
  int lines = 0;          // distinct 128-byte lines
  int64_t bytes_used = 0; // distinct bytes the lanes asked for
};
GlobalCost global_cost(const Request& r);
// The 32-byte sectors (byte / 32) the active lanes' bytes fall in: global_cost's count, the warp view's outlines.
std::set<int64_t> sectors_of(const Request& r);

struct SharedCost {
  int bank[kWarpSize];    // each lane's bank (of its first word); -1 where the lane did not take part
  int degree = 0;         // the most distinct words one bank serves in one group's passes (1: no conflict)
  int wavefronts = 0;     // passes over all groups (32 lanes of 4 bytes: = degree)
  int distinct_words = 0;
  int words_in_bank[kBanks] = {};  // distinct words asked of each bank (over all groups)
};
SharedCost shared_cost(const Request& r);

// A decoded log: its header and its requests, slot by slot, warp by warp, in each warp's order.
struct Log {
  int64_t program = -1;   // the program recorded (-1: every program)
  int64_t slots = 0, threads = 0, per_lane = 0;
  bool overflow = false;  // some thread had more accesses than room: later ones are missing
  std::vector<Request> requests;
};
// `words`: the whole log as the kernel left it (trace.h's layout). A malformed log (too short for its
// header's sizes) is a RuntimeError.
Log decode(const std::vector<uint64_t>& words);

// Sums over requests (issued ones only), loads and stores apart.
struct Totals {
  int64_t requests = 0;
  int64_t sectors = 0, lines = 0, bytes_used = 0;  // global
  int64_t wavefronts = 0;                          // shared
  int max_degree = 0;                              // shared: the worst request's conflict degree
  int64_t mixed = 0;                               // requests whose lanes diverged
  double sectors_per_request() const { return requests ? double(sectors) / double(requests) : 0.0; }
  double lines_per_request() const { return requests ? double(lines) / double(requests) : 0.0; }
  double wavefronts_per_request() const { return requests ? double(wavefronts) / double(requests) : 0.0; }
  // Bytes the lanes asked for over the bytes the sectors moved (1: every byte fetched was used).
  double efficiency() const { return sectors ? double(bytes_used) / double(sectors * kSectorBytes) : 0.0; }
};
enum class Kind { Load, Store };
Totals global_totals(const std::vector<Request>& rs, Kind k);
Totals shared_totals(const std::vector<Request>& rs, Kind k);

// The sectors an ideal (coalesced) request of `lanes` lanes of `bytes` each needs from an aligned start:
// ceil(lanes * bytes / 32) (4 for 32 floats).
int ideal_sectors(int lanes, int bytes);

}  // namespace kl::warp_access
