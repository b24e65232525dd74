// app/run_outputs.*: `run --out NAME=FILE` for kernels with several outputs, `--out FILE` for the first;
// through the binary with flash-attention-backward (dq, dk, dv) and a one-output kernel.
#include <gtest/gtest.h>

#include <algorithm>

#include "app/run_outputs.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/npy.h"
#include "kernels/runtime/registry.h"
#include "test_util.h"

namespace kl {
namespace {

const KernelEntry& backward() { return *find_kernel("flash-attention-backward"); }

TEST(RunOutputs, ParsesNamedAndPlainItems) {
  const auto outs = app::parse_outputs(backward(), {"dk=a/K.npy", "dq=Q.npy", "dv=V.npy"});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0], (std::pair<std::string, std::string>{"dk", "a/K.npy"}));
  EXPECT_EQ(outs[1].first, "dq");
  EXPECT_EQ(app::parse_outputs(backward(), {"out/DQ.npy"})[0], (std::pair<std::string, std::string>{"dq", "out/DQ.npy"}));
  EXPECT_EQ(app::parse_outputs(*find_kernel("softmax"), {"Y.npy"})[0].first, "out");
  EXPECT_EQ(app::parse_outputs(*find_kernel("softmax"), {"out=Y.npy"})[0].second, "Y.npy");
  EXPECT_EQ(app::parse_outputs(backward(), {"./a=b.npy"})[0].second, "./a=b.npy");  // a path, not a name
}

TEST(RunOutputs, RefusesUnknownDuplicateAndEmpty) {
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"dz=Z.npy"}, {"dq=A.npy", "dq=B.npy"}, {"A.npy", "B.npy"}, {"dq="}, {}}) {
    try {
      app::parse_outputs(backward(), bad);
      ADD_FAILURE() << "accepted " << (bad.empty() ? "nothing" : bad[0]);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--out"), std::string::npos) << e.what();
    }
  }
}

// Files are named after the running test (test::test_file): ctest runs each test as its own process.
using test::test_file;
using test::write_npy;

struct Files {
  std::string args;
  std::vector<float> q, k, v, dout;
};

Files inputs(int64_t lq, int64_t lk, int d) {
  Files f{"", test::random_floats(size_t(lq * d)), test::random_floats(size_t(lk * d)),
          test::random_floats(size_t(lk * d)), test::random_floats(size_t(lq * d))};
  f.args = " --in q=" + write_npy("bw_q.npy", {lq, d}, f.q) + " --in k=" + write_npy("bw_k.npy", {lk, d}, f.k) +
           " --in v=" + write_npy("bw_v.npy", {lk, d}, f.v) + " --in do=" + write_npy("bw_do.npy", {lq, d}, f.dout);
  return f;
}

TEST(RunOutputs, BackwardWritesAllThreeNamedAndTheFirstAlone) {
  const int64_t lq = 20, lk = 33;
  const int d = 16;
  const Files f = inputs(lq, lk, d);
  // what the library computes on the CPU for the same inputs
  attention::Shape s;
  s.lq = lq;
  s.lk = lk;
  s.d = d;
  attention::Options o;
  o.causal = true;
  std::vector<float> dq(f.q.size()), dk(f.k.size()), dv(f.v.size());
  flash_attention_backward::run_teaching(Backend::Cpu, f.q.data(), f.k.data(), f.v.data(), nullptr, nullptr,
                                         f.dout.data(), dq.data(), dk.data(), dv.data(), s, o);
  std::string out;
  ASSERT_EQ(test::run_cli("run flash-attention-backward --backend cpu --set causal=1" + f.args + " --out dq=" + test_file("bw_dq.npy") +
                              " --out dk=" + test_file("bw_dk.npy") + " --out dv=" + test_file("bw_dv.npy"),
                          &out),
            0)
      << out;
  EXPECT_NE(out.find("(teaching, cpu backend)"), std::string::npos) << out;
  const Array gq = npy::read(test_file("bw_dq.npy")), gk = npy::read(test_file("bw_dk.npy")), gv = npy::read(test_file("bw_dv.npy"));
  EXPECT_EQ(gq.shape, (std::vector<int64_t>{lq, d}));
  EXPECT_EQ(gk.shape, (std::vector<int64_t>{lk, d}));
  EXPECT_EQ(gq.data, dq);
  EXPECT_EQ(gk.data, dk);
  EXPECT_EQ(gv.data, dv);
  // --out FILE alone: the first output, dQ
  ASSERT_EQ(test::run_cli("run flash-attention-backward --backend cpu --set causal=1" + f.args + " --out " + test_file("bw_first.npy"),
                          &out),
            0)
      << out;
  EXPECT_EQ(npy::read(test_file("bw_first.npy")).data, dq);
  // the naive variant writes the same gradients to float32 rounding
  ASSERT_EQ(test::run_cli("run flash-attention-backward --variant naive --backend cpu --set causal=1" + f.args +
                              " --out dv=" + test_file("bw_naive_dv.npy"),
                          &out),
            0)
      << out;
  EXPECT_LT(test::rel_err(npy::read(test_file("bw_naive_dv.npy")).data, std::vector<double>(dv.begin(), dv.end())), 1e-5);
}

TEST(RunOutputs, BackwardRefusalsExitTwoWithOneLine) {
  const Files f = inputs(8, 8, 16);
  const std::string t = test::tmp_dir();
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {f.args + " --out dz=" + t + "/x.npy", "dz is not an output"},
           {f.args + " --in o=" + write_npy("bw_o.npy", {8, 16}, f.q) + " --out " + t + "/x.npy", "--in o, --in lse"},
           {f.args + " --in lse=" + write_npy("bw_l.npy", {8, 16}, f.q) + " --in o=" + test_file("bw_o.npy") + " --out " + t +
                "/x.npy",
            "--in lse: shape (8, 16) must be (8,)"}}) {
    std::string out;
    EXPECT_EQ(test::run_cli("run flash-attention-backward --backend cpu" + args, &out), 2) << out;
    EXPECT_NE(out.find(needle), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

// Grouped-query attention through the binary: q, do [2, 4, 9, 16] with k, v [2, 2, 13, 16] gives dk and
// dv of k's shape, the library's numbers; Hkv not dividing Hq exits 2 with one line naming Hkv; --variant
// fast takes the grouped shape, and on the CPU backend exits 2 with the backend's line, not Hkv's.
TEST(RunOutputs, BackwardGroupedQuery) {
  const std::vector<float> q = test::random_floats(2 * 4 * 9 * 16), k = test::random_floats(2 * 2 * 13 * 16),
                           v = test::random_floats(k.size()), dout = test::random_floats(q.size());
  const std::string args = " --in q=" + write_npy("gq_q.npy", {2, 4, 9, 16}, q) +
                           " --in k=" + write_npy("gq_k.npy", {2, 2, 13, 16}, k) +
                           " --in v=" + write_npy("gq_v.npy", {2, 2, 13, 16}, v) +
                           " --in do=" + write_npy("gq_do.npy", {2, 4, 9, 16}, dout);
  flash_attention_backward::Shape s;
  s.batch = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.lq = 9;
  s.lk = 13;
  s.d = 16;
  attention::Options o;
  o.causal = true;
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  flash_attention_backward::run_teaching(Backend::Cpu, q.data(), k.data(), v.data(), nullptr, nullptr, dout.data(),
                                         dq.data(), dk.data(), dv.data(), s, o);
  std::string out;
  ASSERT_EQ(test::run_cli("run flash-attention-backward --backend cpu --set causal=1" + args + " --out dq=" +
                              test_file("gq_dq.npy") + " --out dk=" + test_file("gq_dk.npy"),
                          &out),
            0)
      << out;
  const Array gk = npy::read(test_file("gq_dk.npy"));
  EXPECT_EQ(gk.shape, (std::vector<int64_t>{2, 2, 13, 16}));
  EXPECT_EQ(gk.data, dk);
  EXPECT_EQ(npy::read(test_file("gq_dq.npy")).data, dq);
  const std::string k3 = " --in k=" + write_npy("gq_k3.npy", {2, 3, 13, 16}, test::random_floats(2 * 3 * 13 * 16));
  const std::string v3 = " --in v=" + write_npy("gq_v3.npy", {2, 3, 13, 16}, test::random_floats(2 * 3 * 13 * 16));
  const std::string qd = " --in q=" + test_file("gq_q.npy") + " --in do=" + test_file("gq_do.npy");
  for (const auto& [a, needle] : std::vector<std::pair<std::string, std::string>>{
           {qd + k3 + v3, "Hkv (heads of k and v)=3 is out of range: allowed a divisor of Hq=4"},
           {args + " --variant fast", "--variant fast: flash-attention-backward runs it on the CUDA backend only"}}) {
    EXPECT_EQ(test::run_cli("run flash-attention-backward --backend cpu" + a + " --out " + test::tmp_dir() + "/x.npy",
                            &out),
              2)
        << out;
    EXPECT_NE(out.find(needle), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

TEST(RunOutputs, OneOutputKernelsKeepTheirForm) {
  const std::vector<float> x = test::random_floats(12);
  const std::string in = write_npy("ro_x.npy", {3, 4}, x), t = test::tmp_dir();
  std::string out;
  ASSERT_EQ(test::run_cli("run softmax --backend cpu --in x=" + in + " --out " + t + "/ro_y.npy", &out), 0) << out;
  EXPECT_EQ(npy::read(t + "/ro_y.npy").shape, (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(test::run_cli("run softmax --backend cpu --in x=" + in + " --out out=" + t + "/ro_y2.npy", &out), 0) << out;
  EXPECT_EQ(npy::read(t + "/ro_y2.npy").data, npy::read(t + "/ro_y.npy").data);
}

}  // namespace
}  // namespace kl
