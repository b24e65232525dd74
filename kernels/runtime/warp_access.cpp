#include "kernels/runtime/warp_access.h"

#include <algorithm>
#include <set>
#include <string>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/trace.h"

namespace kl::warp_access {

int Request::lanes() const { return __builtin_popcount(active); }

Request make_request(const std::vector<int64_t>& offsets, int bytes, bool store) {
  if (offsets.size() > size_t(kWarpSize)) throw InputError("make_request: more than 32 lanes");
  Request r;
  r.bytes = bytes;
  r.store = store;
  for (size_t i = 0; i < offsets.size(); ++i) {
    r.offset[i] = offsets[i];
    r.active |= 1u << i;
  }
  return r;
}

namespace {

bool lane_on(const Request& r, int lane) { return (r.active >> lane) & 1u; }

// Distinct values of floor(byte / unit) over every byte the active lanes touch.
std::set<int64_t> units_of(const Request& r, int unit) {
  std::set<int64_t> s;
  for (int i = 0; i < kWarpSize; ++i)
    if (lane_on(r, i))
      for (int64_t u = r.offset[i] / unit; u <= (r.offset[i] + r.bytes - 1) / unit; ++u) s.insert(u);
  return s;
}

}  // namespace

std::set<int64_t> sectors_of(const Request& r) { return units_of(r, kSectorBytes); }

GlobalCost global_cost(const Request& r) {
  GlobalCost c;
  c.sectors = int(sectors_of(r).size());
  c.lines = int(units_of(r, kLineBytes).size());
  std::set<int64_t> bytes;
  for (int i = 0; i < kWarpSize; ++i)
    if (lane_on(r, i))
      for (int b = 0; b < r.bytes; ++b) bytes.insert(r.offset[i] + b);
  c.bytes_used = int64_t(bytes.size());
  return c;
}

SharedCost shared_cost(const Request& r) {
  SharedCost c;
  std::fill(c.bank, c.bank + kWarpSize, -1);
  // Lanes served together: the whole warp up to 4 bytes, half-warps at 8, quarter-warps at 16.
  const int group = r.bytes <= kBankBytes ? kWarpSize : std::max(1, kWarpSize * kBankBytes / r.bytes);
  std::set<int64_t> all_words;
  std::set<int64_t> bank_words[kBanks];
  for (int g0 = 0; g0 < kWarpSize; g0 += group) {
    std::set<int64_t> words[kBanks];
    for (int i = g0; i < g0 + group; ++i) {
      if (!lane_on(r, i)) continue;
      c.bank[i] = int((r.offset[i] / kBankBytes) % kBanks);
      for (int64_t w = r.offset[i] / kBankBytes; w <= (r.offset[i] + r.bytes - 1) / kBankBytes; ++w) {
        words[w % kBanks].insert(w);
        bank_words[w % kBanks].insert(w);
        all_words.insert(w);
      }
    }
    int passes = 0;
    for (const std::set<int64_t>& b : words) passes = std::max(passes, int(b.size()));
    c.degree = std::max(c.degree, passes);
    c.wavefronts += passes;
  }
  for (int b = 0; b < kBanks; ++b) c.words_in_bank[b] = int(bank_words[b].size());
  c.distinct_words = int(all_words.size());
  return c;
}

Log decode(const std::vector<uint64_t>& words) {
  if (words.size() < size_t(kAccessHeaderWords)) throw RuntimeError("access log: shorter than its header");
  const auto word = [&](int i) { return int64_t(words[size_t(i)]); };
  Log log;
  log.program = word(0), log.slots = word(1), log.threads = word(2), log.per_lane = word(3);
  log.overflow = word(4) != 0;
  if (log.slots < 0 || log.threads < 0 || log.per_lane < 0 ||
      words.size() != size_t(access_log_words(log.slots, log.threads, log.per_lane)))
    throw RuntimeError("access log: " + std::to_string(words.size()) + " words do not hold its header's " +
                       std::to_string(log.slots) + " slots of " + std::to_string(log.threads) + " threads x " +
                       std::to_string(log.per_lane) + " records");
  const uint64_t* counts = words.data() + kAccessHeaderWords;
  const uint64_t* records = counts + log.slots * log.threads;
  for (int64_t s = 0; s < log.slots; ++s) {
    for (int64_t w0 = 0; w0 < log.threads; w0 += kWarpSize) {
      const int64_t lanes = std::min<int64_t>(kWarpSize, log.threads - w0);
      uint64_t most = 0;
      for (int64_t l = 0; l < lanes; ++l) most = std::max(most, counts[s * log.threads + w0 + l]);
      for (uint64_t k = 0; k < most; ++k) {
        Request r;
        r.program = log.program >= 0 ? log.program : s;
        r.warp = int(w0 / kWarpSize);
        r.index = int64_t(k);
        bool first = true;
        for (int64_t l = 0; l < lanes; ++l) {
          const int64_t t = s * log.threads + w0 + l;
          if (counts[t] <= k) continue;  // this lane made fewer accesses: not part of this one
          const uint64_t rec = records[t * log.per_lane + int64_t(k)];
          const bool store = (rec & 4u) != 0, atomic = (rec & 64u) != 0;
          const int bytes = 1 << ((rec >> 3) & 7u);
          if (first) r.store = store, r.atomic = atomic, r.bytes = bytes, first = false;
          else if (store != r.store || atomic != r.atomic || bytes != r.bytes) r.mixed = true;
          if (rec & 2u) {
            r.active |= 1u << l;
            r.offset[l] = int64_t(rec >> 8);
          }
        }
        log.requests.push_back(r);
      }
    }
  }
  return log;
}

namespace {
bool wanted(const Request& r, Kind k) { return r.issued() && r.store == (k == Kind::Store); }
}  // namespace

Totals global_totals(const std::vector<Request>& rs, Kind k) {
  Totals t;
  for (const Request& r : rs) {
    if (!wanted(r, k)) continue;
    const GlobalCost c = global_cost(r);
    ++t.requests;
    t.sectors += c.sectors;
    t.lines += c.lines;
    t.bytes_used += c.bytes_used;
    t.mixed += r.mixed;
  }
  return t;
}

Totals shared_totals(const std::vector<Request>& rs, Kind k) {
  Totals t;
  for (const Request& r : rs) {
    if (!wanted(r, k)) continue;
    const SharedCost c = shared_cost(r);
    ++t.requests;
    t.wavefronts += c.wavefronts;
    t.max_degree = std::max(t.max_degree, c.degree);
    t.mixed += r.mixed;
  }
  return t;
}

int ideal_sectors(int lanes, int bytes) { return (lanes * bytes + kSectorBytes - 1) / kSectorBytes; }

}  // namespace kl::warp_access
