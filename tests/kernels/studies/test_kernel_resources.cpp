// kernels/studies/kernel_resources.*: the registers and stack frame the studies state. The record ptxas gave
// at build time (asset ptxas/sm90.txt) equals the checked-in kernels/studies/ptxas_sm90.txt, so the CPU
// backend's sentences hold where the build found no nvcc too; on a GPU the running build's figures
// (cudaFuncGetAttributes) equal the record's; the parser refuses malformed records.
#include <gtest/gtest.h>

#include <string>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/kernel_resources.h"
#include "test_util.h"

namespace kl::study {
namespace {

TEST(KernelResources, ParsesARecordAndRefusesAMalformedOne) {
  const PtxasRecord r = parse_ptxas_record("# origin: ptxas -v at sm_90, recorded at build time\n"
                                           "attention_smem registers=48 stack=0\nsoftmax_traced registers=88 stack=256\n");
  EXPECT_TRUE(r.from_ptxas);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels.at("softmax_traced"), (std::pair<int, int64_t>{88, 256}));
  const PtxasRecord f = parse_ptxas_record("# origin: the checked-in record (no nvcc found)\nk registers=1 stack=0\n");
  EXPECT_FALSE(f.from_ptxas);
  EXPECT_THROW(parse_ptxas_record("# origin: x\nattention_smem 48 0\n"), RuntimeError);
  EXPECT_THROW(parse_ptxas_record("attention_smem registers=48 stack=0\n"), RuntimeError);  // no origin
}

// The build's record against the checked-in one: equal, kernel by kernel. Where the build found no nvcc the
// record is the checked-in file itself and there is nothing to compare.
TEST(KernelResources, BuildRecordEqualsTheCheckedInRecord) {
  const PtxasRecord& built = ptxas_record();
  const PtxasRecord checked_in = parse_ptxas_record("# origin: checked in\n" +
                                                     std::string(assets::find("ptxas/sm90-checked-in.txt")));
  if (!built.from_ptxas) GTEST_SKIP() << "this build found no nvcc: " << built.origin;
  EXPECT_EQ(built.kernels, checked_in.kernels)
      << "ptxas gives other figures than kernels/studies/ptxas_sm90.txt: copy the build's ptxas/sm90.txt into it";
}

TEST(KernelResources, CpuBackendStatesTheRecord) {
  const KernelResources k = kernel_resources(Backend::Cpu, "attention.cu", "attention_smem");
  EXPECT_EQ(k.registers, ptxas_record().kernels.at("attention_smem").first);
  EXPECT_EQ(k.origin, ptxas_record().origin);
  const KernelResources s = kernel_resources(Backend::Cpu, "softmax.cu", "softmax_traced");
  EXPECT_GT(s.stack_bytes, 0);  // float v[64] indexed at run time: local memory
  EXPECT_THROW(kernel_resources(Backend::Cpu, "attention.cu", "no_such_kernel"), RuntimeError);
}

// On a GPU: the running build's registers (cudaFuncGetAttributes) are the ones the record states.
TEST(KernelResources, GpuBuildMatchesTheRecord) {
  KL_REQUIRE_CUDA();
  for (const char* k : {"attention_smem", "softmax_traced"}) {
    SCOPED_TRACE(k);
    const std::string file = std::string(k).rfind("attention", 0) == 0 ? "attention.cu" : "softmax.cu";
    const KernelResources g = kernel_resources(Backend::Cuda, file, k);
    EXPECT_EQ(g.origin, "cudaFuncGetAttributes on this device");
    EXPECT_EQ(g.registers, ptxas_record().kernels.at(k).first);
    EXPECT_EQ(g.stack_bytes, ptxas_record().kernels.at(k).second);
  }
}

}  // namespace
}  // namespace kl::study
