// kernels/runtime/warp_access.*: the sectors, lines, banks and conflict degree of a warp-wide request,
// against values worked out by hand for the patterns the transpose rung teaches (unit stride, stride 2,
// stride 32, a broadcast, a tile read down a column with and without padding), and the decoding of an
// access log laid out as kl.cuh writes it.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/trace.h"
#include "kernels/runtime/warp_access.h"

namespace kl {
namespace {

using namespace warp_access;

// 32 lanes, lane L at byte offset base + L * stride_bytes.
Request strided(int64_t stride_bytes, int bytes = 4, int64_t base = 0) {
  std::vector<int64_t> o;
  for (int l = 0; l < 32; ++l) o.push_back(base + l * stride_bytes);
  return make_request(o, bytes);
}

TEST(WarpAccessGlobal, UnitStrideFloatsAreFourSectorsOneLine) {
  const GlobalCost c = global_cost(strided(4));  // bytes 0..127
  EXPECT_EQ(c.sectors, 4);
  EXPECT_EQ(c.lines, 1);
  EXPECT_EQ(c.bytes_used, 128);
  EXPECT_EQ(ideal_sectors(32, 4), 4);
}

TEST(WarpAccessGlobal, StrideTwoTouchesEightSectorsTwoLines) {
  const GlobalCost c = global_cost(strided(8));  // bytes 0, 8, ..., 248: two lines, eight sectors, half used
  EXPECT_EQ(c.sectors, 8);
  EXPECT_EQ(c.lines, 2);
  EXPECT_EQ(c.bytes_used, 128);
}

TEST(WarpAccessGlobal, StrideThirtyTwoIsOneSectorPerLane) {
  const GlobalCost c = global_cost(strided(128));  // a column of a 32-float-wide matrix
  EXPECT_EQ(c.sectors, 32);
  EXPECT_EQ(c.lines, 32);
  // A transpose's strided side: rows * 4 bytes apart, here rows = 64.
  EXPECT_EQ(global_cost(strided(256)).sectors, 32);
  // Rows of 2 floats: 8 bytes apart, so the 32 lanes span 256 bytes: 8 sectors.
  EXPECT_EQ(global_cost(strided(8)).sectors, 8);
}

TEST(WarpAccessGlobal, BroadcastIsOneSector) {
  const GlobalCost c = global_cost(strided(0, 4, 64));
  EXPECT_EQ(c.sectors, 1);
  EXPECT_EQ(c.lines, 1);
  EXPECT_EQ(c.bytes_used, 4);
}

TEST(WarpAccessGlobal, MisalignedRowCrossesOneMoreSectorAndLine) {
  const GlobalCost c = global_cost(strided(4, 4, 4));  // bytes 4..131
  EXPECT_EQ(c.sectors, 5);
  EXPECT_EQ(c.lines, 2);
}

TEST(WarpAccessGlobal, MaskedLanesCostNothingWideAccessesSpanTheirBytes) {
  Request r = strided(4);
  r.active = 0x000000FFu;  // lanes 0..7: bytes 0..31
  EXPECT_EQ(global_cost(r).sectors, 1);
  r.active = 0;
  EXPECT_FALSE(r.issued());
  EXPECT_EQ(global_cost(r).sectors, 0);
  // float4 per lane: 32 x 16 = 512 contiguous bytes, 16 sectors, 4 lines.
  const GlobalCost w = global_cost(strided(16, 16));
  EXPECT_EQ(w.sectors, 16);
  EXPECT_EQ(w.lines, 4);
}

TEST(WarpAccessShared, UnitStrideHasNoConflict) {
  const SharedCost c = shared_cost(strided(4));
  EXPECT_EQ(c.degree, 1);
  EXPECT_EQ(c.wavefronts, 1);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(c.bank[l], l);
}

TEST(WarpAccessShared, StrideTwoIsATwoWayConflict) {
  const SharedCost c = shared_cost(strided(8));  // words 0, 2, ..., 62: even banks, two words each
  EXPECT_EQ(c.degree, 2);
  EXPECT_EQ(c.bank[16], 0);
  EXPECT_EQ(c.words_in_bank[0], 2);
  EXPECT_EQ(c.words_in_bank[1], 0);
}

TEST(WarpAccessShared, StrideThirtyTwoIsAThirtyTwoWayConflict) {
  // The tiled transpose's tile read: a column of float tile[32][32], words 32 apart, all in bank 0.
  const SharedCost c = shared_cost(strided(32 * 4));
  EXPECT_EQ(c.degree, 32);
  EXPECT_EQ(c.wavefronts, 32);
  EXPECT_EQ(c.words_in_bank[0], 32);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(c.bank[l], 0);
  // Column 5 of the same tile: bank 5.
  EXPECT_EQ(shared_cost(strided(32 * 4, 4, 5 * 4)).bank[31], 5);
}

TEST(WarpAccessShared, BroadcastIsNotAConflict) {
  const SharedCost c = shared_cost(strided(0, 4, 12));
  EXPECT_EQ(c.degree, 1);
  EXPECT_EQ(c.distinct_words, 1);
  // Two words, each read by 16 lanes, in two banks: still one pass.
  std::vector<int64_t> o;
  for (int l = 0; l < 32; ++l) o.push_back(l % 2 ? 4 : 0);
  EXPECT_EQ(shared_cost(make_request(o, 4)).degree, 1);
  // Two words of one bank, 16 lanes each: two passes.
  for (int l = 0; l < 32; ++l) o[size_t(l)] = l % 2 ? 128 : 0;
  EXPECT_EQ(shared_cost(make_request(o, 4)).degree, 2);
}

TEST(WarpAccessShared, PaddedTileColumnHasNoConflict) {
  // float tile[32][33]: lane L reads [L][c], word 33 L + c, bank (L + c) % 32.
  for (int c = 0; c < 32; ++c) {
    const SharedCost s = shared_cost(strided(33 * 4, 4, c * 4));
    EXPECT_EQ(s.degree, 1) << c;
    for (int l = 0; l < 32; ++l) EXPECT_EQ(s.bank[l], (l + c) % 32);
  }
}

TEST(WarpAccessShared, WideAccessesAreServedAGroupOfLanesAtATime) {
  // float2 per lane, unit stride: each half-warp reads 128 bytes, one pass each: degree 1, 2 wavefronts.
  const SharedCost c = shared_cost(strided(8, 8));
  EXPECT_EQ(c.degree, 1);
  EXPECT_EQ(c.wavefronts, 2);
  // float4, unit stride: quarter-warps, 4 wavefronts.
  EXPECT_EQ(shared_cost(strided(16, 16)).wavefronts, 4);
}

// A log as kl.cuh lays it out: header, counts, records (bit 0 recorded, 1 active, 2 store, 3-5 log2 bytes,
// 8.. offset).
uint64_t record(int64_t offset, bool active, bool store = false, int log2_bytes = 2, bool atomic = false) {
  return 1u | (active ? 2u : 0u) | (store ? 4u : 0u) | (atomic ? 64u : 0u) | (uint64_t(log2_bytes) << 3) |
         (uint64_t(active ? offset : 0) << 8);
}

TEST(WarpAccessLog, DecodesRequestsPerWarpInEachLanesOrder) {
  const int64_t threads = 40, per_lane = 3;  // two warps: 32 lanes and 8
  std::vector<uint64_t> w(size_t(access_log_words(1, threads, per_lane)), 0);
  w[0] = 5, w[1] = 1, w[2] = uint64_t(threads), w[3] = uint64_t(per_lane);
  uint64_t* counts = w.data() + kAccessHeaderWords;
  uint64_t* recs = counts + threads;
  for (int t = 0; t < threads; ++t) {
    counts[t] = t < 36 ? 2 : 1;  // lanes 4..7 of warp 1 make one access only
    recs[t * per_lane + 0] = record(4 * t, t != 3);          // lane 3 masked off
    if (t < 36) recs[t * per_lane + 1] = record(128 * t, true, true, 2, t >= 32);  // warp 1's: atomic adds
  }
  const Log log = decode(w);
  EXPECT_EQ(log.program, 5);
  EXPECT_FALSE(log.overflow);
  ASSERT_EQ(log.requests.size(), 4u);  // warp 0: two, warp 1: two
  const Request& a = log.requests[0];
  EXPECT_EQ(a.program, 5);
  EXPECT_EQ(a.warp, 0);
  EXPECT_FALSE(a.store);
  EXPECT_EQ(a.bytes, 4);
  EXPECT_EQ(a.active, ~(1u << 3));
  EXPECT_EQ(global_cost(a).sectors, 4);
  const Request& b = log.requests[1];
  EXPECT_TRUE(b.store);
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(global_cost(b).sectors, 32);
  const Request& d = log.requests[3];  // warp 1's second: lanes 0..3 (threads 32..35) only
  EXPECT_EQ(d.warp, 1);
  EXPECT_EQ(d.active, 0xFu);
  EXPECT_EQ(d.offset[2], 128 * 34);
  EXPECT_TRUE(d.atomic && d.store);
  EXPECT_FALSE(b.atomic);
  const Totals loads = global_totals(log.requests, Kind::Load), stores = global_totals(log.requests, Kind::Store);
  EXPECT_EQ(loads.requests, 2);
  EXPECT_EQ(loads.sectors, 4 + 1);  // warp 1's 8 lanes: bytes 128..159, one sector
  EXPECT_EQ(stores.requests, 2);
  EXPECT_EQ(stores.sectors, 32 + 4);
  EXPECT_DOUBLE_EQ(stores.sectors_per_request(), 18.0);
}

TEST(WarpAccessLog, LanesThatDisagreeAreFlaggedAndAShortLogIsRefused) {
  const int64_t threads = 32, per_lane = 1;
  std::vector<uint64_t> w(size_t(access_log_words(1, threads, per_lane)), 0);
  w[1] = 1, w[2] = uint64_t(threads), w[3] = uint64_t(per_lane), w[4] = 1;
  for (int t = 0; t < threads; ++t) {
    w[size_t(kAccessHeaderWords + t)] = 1;
    w[size_t(kAccessHeaderWords + threads + t)] = record(4 * t, true, t == 7);
  }
  const Log log = decode(w);
  EXPECT_TRUE(log.overflow);
  ASSERT_EQ(log.requests.size(), 1u);
  EXPECT_TRUE(log.requests[0].mixed);
  EXPECT_EQ(global_totals(log.requests, Kind::Load).mixed, 1);
  w.pop_back();
  EXPECT_THROW(decode(w), RuntimeError);
}

}  // namespace
}  // namespace kl
