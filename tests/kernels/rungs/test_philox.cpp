// kernels/rungs/philox.h: Philox-4x32-10 against Random123's known-answer vectors (kat_vectors,
// philox4x32_10), on the host and compiled by nvcc; the project's keying; the uniform and the drop test.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "kernels/runtime/buffer.h"
#include "kernels/rungs/philox.h"
#include "test_util.h"

namespace kl {
namespace {

using philox::U32x2;
using philox::U32x4;

struct Kat {
  U32x4 ctr;
  U32x2 key;
  U32x4 expect;
};
// Random123 1.09, examples/kat_vectors: "philox4x32 10 ..." lines.
const Kat kKats[] = {
    {{{0u, 0u, 0u, 0u}}, {{0u, 0u}}, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
    {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
     {{0xffffffffu, 0xffffffffu}},
     {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
    {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
     {{0xa4093822u, 0x299f31d0u}},
     {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
};

TEST(Philox, KnownAnswerVectorsOnHost) {
  for (const Kat& k : kKats) {
    const U32x4 r = philox::philox4x32_10(k.ctr, k.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.expect.v[i]) << "word " << i;
  }
}

// The same function compiled for the device gives the same bits: the known answers, then 100000 random
// (counter, key) pairs compared word for word with the host.
TEST(Philox, DeviceMatchesHostBitForBit) {
  KL_REQUIRE_CUDA();
  const uint64_t s = test::next_seed();
  std::mt19937_64 rng(s);
  const size_t n = 100000;
  std::vector<U32x4> ctr(n);
  std::vector<U32x2> key(n);
  for (size_t i = 0; i < 3; ++i) ctr[i] = kKats[i].ctr, key[i] = kKats[i].key;
  for (size_t i = 3; i < n; ++i) {
    for (uint32_t& w : ctr[i].v) w = uint32_t(rng());
    for (uint32_t& w : key[i].v) w = uint32_t(rng());
  }
  Buffer<U32x4> dctr(Backend::Cuda, n), dout(Backend::Cuda, n);
  Buffer<U32x2> dkey(Backend::Cuda, n);
  dctr.upload(ctr);
  dkey.upload(key);
  dout.fill_bytes(0);
  philox::run_batch(Backend::Cuda, dctr.data(), dkey.data(), dout.data(), int64_t(n));
  const std::vector<U32x4> got = dout.to_host();
  for (size_t i = 0; i < 3; ++i)
    for (int w = 0; w < 4; ++w) ASSERT_EQ(got[i].v[w], kKats[i].expect.v[w]) << "kat " << i;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const U32x4 h = philox::philox4x32_10(ctr[i], key[i]);
    for (int w = 0; w < 4; ++w) bad += got[i].v[w] != h.v[w];
  }
  EXPECT_EQ(bad, 0u) << "seed " << s;
}

TEST(Philox, KeyingIsByGroupOfFourAndSeed) {
  const uint64_t seed = test::next_seed();
  for (uint64_t i : {0ull, 1ull, 2ull, 3ull, 4ull, 1023ull, 1024ull, 4294967295ull, 4294967296ull * 4 + 7}) {
    const U32x4 g = philox::philox4x32_10(U32x4{{uint32_t(i / 4), uint32_t((i / 4) >> 32), 0, 0}},
                                          U32x2{{uint32_t(seed), uint32_t(seed >> 32)}});
    EXPECT_EQ(philox::element_word(seed, i), g.v[i % 4]) << "element " << i;
  }
  // Another seed, other words; neighbouring elements, other words.
  std::set<uint32_t> seen;
  for (uint64_t i = 0; i < 4096; ++i) seen.insert(philox::element_word(seed, i));
  EXPECT_GT(seen.size(), 4090u);
  int same = 0;
  for (uint64_t i = 0; i < 4096; ++i) same += philox::element_word(seed, i) == philox::element_word(seed + 1, i);
  EXPECT_LT(same, 3);
}

TEST(Philox, UniformIsExactAndInUnitInterval) {
  EXPECT_EQ(philox::uniform(0u), 0.0f);
  EXPECT_EQ(philox::uniform(0xFFu), 0.0f);
  EXPECT_EQ(philox::uniform(0x100u), std::ldexp(1.0f, -24));
  EXPECT_EQ(philox::uniform(0xFFFFFFFFu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_LT(philox::uniform(0xFFFFFFFFu), 1.0f);
  EXPECT_EQ(philox::uniform(0x80000000u), 0.5f);
  // Mean and variance of 2^20 uniforms from the project's keying: 1/2 and 1/12 within 5 sigma.
  const uint64_t seed = test::next_seed();
  const int n = 1 << 20;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = philox::uniform(philox::element_word(seed, uint64_t(i)));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum2 += u * u;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n)) << "seed " << seed;
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt(1.0 / 180 / n)) << "seed " << seed;
}

// The integer drop test is exactly "uniform(word) < p", for p on and between the 2^-24 levels.
TEST(Philox, DropThresholdIsExactlyUniformBelowP) {
  std::mt19937_64 rng(test::next_seed());
  std::vector<double> ps = {0.0, 0.1, 0.5, 0.9, std::ldexp(1.0, -24), std::ldexp(3.0, -24), 1.0 - std::ldexp(1.0, -24),
                            std::nextafter(0.5, 1.0), std::nextafter(0.5, 0.0)};
  for (int i = 0; i < 50; ++i) ps.push_back(std::uniform_real_distribution<double>(0.0, 1.0)(rng));
  for (double p : ps) {
    const uint32_t thr = philox::drop_threshold(p);
    EXPECT_EQ(thr, uint32_t(std::ceil(p * 16777216.0))) << p;
    for (int j = 0; j < 2000; ++j) {
      uint32_t w = uint32_t(rng());
      if (j < 4) w = (thr << 8) - (j < 2 ? 1u : 0u) + uint32_t(j % 2);  // the words around the threshold
      ASSERT_EQ(philox::dropped(w, thr), double(philox::uniform(w)) < p) << "p " << p << " word " << w;
    }
  }
}

}  // namespace
}  // namespace kl
