// The unedited editable source equals the shipped kernel bit for bit, on both backends, for every rung
// (issue 26). Each case goes through the registry's `run` twice on fresh random inputs: the shipped build
// (`kernel-ladder run RUNG`) and the unedited source as an edited copy (`run RUNG --source FILE.cu`, the
// text `source RUNG` prints; compiled at run time in the worker, once per source per test process), and
// every output the run returns (traces included: relu-dropout's keep mask, flash attention's m, l and
// alpha) must have the same bytes. The CPU tests run in CI; the Cuda ones (nvcc's build against NVRTC's)
// skip without a device. One exception, on CUDA only: backward's dQ is summed with atomic adds that land
// in any order there (two shipped runs differ in the last bits too), so it is held to float tolerance;
// its dK and dV stay bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/registry.h"
#include "test_util.h"

namespace kl {
namespace {

const void* const kEnv = test::use_worker_binary();

struct Case {
  std::string variant;
  std::map<std::string, std::vector<int64_t>> inputs;  // name -> shape, uniform in [lo, hi]
  std::vector<std::string> sets;                       // --set key=value
  float lo = -1.0f, hi = 1.0f;
};

// Small shapes that still reach each rung's edges: a masked tail, a row past the buggy BLOCK_SIZE, causal
// rows, ragged tiles, the backward's grouped-query attention.
std::map<std::string, std::vector<Case>> cases() {
  const std::vector<int64_t> q{40, 32}, kv{56, 32};
  return {
      {"vector-add",
       {{"traced", {{"x", {3000}}, {"y", {3000}}}, {}}, {"traced", {{"x", {777}}, {"y", {777}}}, {"block_size=256"}}}},
      {"relu-dropout",
       {{"traced", {{"x", {5000}}}, {"p=0.3", "seed=SEED"}},
        {"traced", {{"x", {1500}}}, {"p=0.7", "seed=SEED", "block_size=256"}}}},
      {"softmax",
       {{"buggy", {{"x", {6, 2000}}}, {}, -3.0f, 3.0f},
        {"fixed", {{"x", {6, 2000}}}, {}, -3.0f, 3.0f},
        {"online", {{"x", {6, 2000}}}, {}, -3.0f, 3.0f},
        {"online", {{"x", {3, 700}}}, {"chunk=128"}, -8.0f, 8.0f}}},
      {"attention",
       {{"smem", {{"q", {12, 32}}, {"k", {20, 32}}, {"v", {20, 32}}}, {}, -2.0f, 2.0f},
        {"smem", {{"q", {12, 32}}, {"k", {20, 32}}, {"v", {20, 32}}}, {"causal=1"}, -2.0f, 2.0f}}},
      {"flash-attention",
       {{"teaching", {{"q", {48, 32}}, {"k", {96, 32}}, {"v", {96, 32}}}, {"block_m=16", "block_n=32"}, -2.0f, 2.0f},
        {"teaching", {{"q", {40, 32}}, {"k", {72, 32}}, {"v", {72, 32}}}, {"causal=1", "block_m=16", "block_n=16"},
         -2.0f, 2.0f}}},
      {"transpose",  // a ragged matrix: partial tiles on both edges
       {{"naive", {{"x", {45, 70}}}, {}},
        {"tiled", {{"x", {45, 70}}}, {}},
        {"padded", {{"x", {45, 70}}}, {}},
        {"padded", {{"x", {7, 33}}}, {}}}},
      {"flash-attention-backward",
       {{"teaching", {{"q", q}, {"k", kv}, {"v", kv}, {"do", q}}, {"block_m=16", "block_n=16"}},
        {"teaching", {{"q", q}, {"k", kv}, {"v", kv}, {"do", q}}, {"causal=1", "block_m=16", "block_n=32"}},
        // grouped-query attention: 4 query heads over 2 kv heads, dK and dV summed over each pair
        {"teaching", {{"q", {2, 4, 40, 16}}, {"k", {2, 2, 56, 16}}, {"v", {2, 2, 56, 16}}, {"do", {2, 4, 40, 16}}},
         {"causal=1", "block_m=16", "block_n=16"}}}},
  };
}

KernelRunResult run_once(const KernelEntry& e, Backend b, const Case& c, const std::map<std::string, Array>& in,
                         const std::vector<std::string>& sets, const editable::Source* src) {
  KernelRunRequest r;
  r.backend = b;
  r.variant = c.variant;
  r.params = ParamValues(e.params);
  for (const std::string& s : sets) r.params.set(s);
  r.inputs = in;
  r.source = src;
  return e.run(r);
}

std::string case_name(const std::string& rung, const Case& c, const std::vector<std::string>& sets) {
  std::string s = rung + " --variant " + c.variant;
  for (const auto& [name, shape] : c.inputs) {
    s += " " + name + "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    s += "]";
  }
  for (const std::string& x : sets) s += " " + x;
  return s;
}

void expect_unedited_equals_shipped(Backend b, const std::string& rung) {
  const KernelEntry* e = find_kernel(rung);
  ASSERT_NE(e, nullptr) << rung;
  const editable::Source src = test::shipped_copy(rung, editable::shipped_file(rung));
  const auto all = cases();
  ASSERT_TRUE(all.count(rung)) << rung << ": no cases (EveryRungAndEditableVariantHasACase)";
  for (const Case& c : all.at(rung)) {
    std::map<std::string, Array> in;
    for (const auto& [name, shape] : c.inputs) {
      Array a;
      a.shape = shape;
      a.data = test::random_floats(size_t(a.size()), c.lo, c.hi);
      in[name] = std::move(a);
    }
    std::vector<std::string> sets = c.sets;
    for (std::string& s : sets)
      if (s == "seed=SEED") s = "seed=" + std::to_string(test::next_seed() % 4294967296u);  // Philox key
    const std::string what = case_name(rung, c, sets) + " on " + backend_name(b);
    const KernelRunResult shipped = run_once(*e, b, c, in, sets, nullptr);
    const KernelRunResult edited = run_once(*e, b, c, in, sets, &src);
    std::set<std::string> names_s, names_e;
    for (const auto& o : shipped.outputs) names_s.insert(o.first);
    for (const auto& o : edited.outputs) names_e.insert(o.first);
    EXPECT_EQ(names_s, names_e) << what;
    for (const auto& [name, a] : shipped.outputs) {
      const auto it = edited.outputs.find(name);
      if (it == edited.outputs.end()) continue;
      const Array& x = it->second;
      EXPECT_EQ(a.shape, x.shape) << what << ": " << name;
      if (b == Backend::Cuda && rung == "flash-attention-backward" && name == "dq") {
        ASSERT_EQ(a.data.size(), x.data.size()) << what;
        std::vector<double> ref(a.data.begin(), a.data.end());
        EXPECT_LE(test::rel_err(x.data, ref), 1e-5) << what << ": dq (atomic adds, any order on CUDA)";
        continue;
      }
      size_t differ = 0, first = a.data.size();
      for (size_t i = 0; i < a.data.size() && i < x.data.size(); ++i)
        if (std::memcmp(&a.data[i], &x.data[i], 4) != 0) differ += 1, first = std::min(first, i);
      EXPECT_TRUE(test::same_bits(a.data, x.data))
          << what << ": " << name << ": " << differ << " of " << a.data.size() << " elements differ; the first, ["
          << first << "]: shipped " << (first < a.data.size() ? a.data[first] : NAN) << ", unedited source "
          << (first < x.data.size() ? x.data[first] : NAN);
    }
  }
}

// Every rung with an editable source has cases here, and they cover each of its editable variants.
TEST(UneditedEqualsShippedCases, EveryRungAndEditableVariantHasACase) {
  const auto all = cases();
  std::set<std::string> rungs;
  for (const auto& [rung, list] : all) rungs.insert(rung);
  const std::vector<std::string> shipped = editable::shipped_rungs();
  EXPECT_EQ(rungs, std::set<std::string>(shipped.begin(), shipped.end()));
  for (const std::string& rung : shipped) {
    const KernelEntry* e = find_kernel(rung);
    ASSERT_NE(e, nullptr) << rung << " has an editable source but no registry entry";
    std::set<std::string> want, have;
    for (const std::string& v : e->variants)
      if (!e->untraced(v)) want.insert(v);
    if (all.count(rung))
      for (const Case& c : all.at(rung)) have.insert(c.variant);
    EXPECT_EQ(want, have) << rung;
  }
}

// One test per rung with an editable source (the shipped build's list), per backend.
class UneditedEqualsShipped : public ::testing::TestWithParam<std::string> {};

TEST_P(UneditedEqualsShipped, OnCpu) { expect_unedited_equals_shipped(Backend::Cpu, GetParam()); }

TEST_P(UneditedEqualsShipped, OnCuda) {
  KL_REQUIRE_CUDA();
  expect_unedited_equals_shipped(Backend::Cuda, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Rung, UneditedEqualsShipped, ::testing::ValuesIn(editable::shipped_rungs()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace kl
