// kernels/params.*: every --set value is validated with one wording, on both sides of each bound.
#include <gtest/gtest.h>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

namespace kl {
namespace {

ParamValues make() {
  return ParamValues({pow2_param("block_size", 32, 4096, 1024, "BLOCK_SIZE"), int_param("n", 1, 100, 10, "n"),
                      float_param("p", 0.0, 1.0, 0.5, "drop probability", true), bool_param("causal", false, "c"),
                      choice_param("variant", {"buggy", "fixed"}, "fixed", "v")});
}

std::string refusal(ParamValues& p, const std::string& kv) {
  try {
    p.set(kv);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Params, DefaultsApply) {
  ParamValues p = make();
  EXPECT_EQ(p.get_int("block_size"), 1024);
  EXPECT_DOUBLE_EQ(p.get_float("p"), 0.5);
  EXPECT_FALSE(p.get_bool("causal"));
  EXPECT_EQ(p.get_text("variant"), "fixed");
  EXPECT_FALSE(p.was_set("n"));
}

TEST(Params, BoundsBothSides) {
  ParamValues p = make();
  EXPECT_EQ(refusal(p, "block_size=32"), "");
  EXPECT_EQ(refusal(p, "block_size=4096"), "");
  EXPECT_EQ(refusal(p, "block_size=16"), "--set block_size=16: must be powers of two in [32, 4096]");
  EXPECT_NE(refusal(p, "block_size=8192"), "");
  EXPECT_NE(refusal(p, "block_size=100"), "");
  EXPECT_EQ(refusal(p, "n=1"), "");
  EXPECT_EQ(refusal(p, "n=100"), "");
  EXPECT_EQ(refusal(p, "n=0"), "--set n=0: must be integers in [1, 100]");
  EXPECT_NE(refusal(p, "n=101"), "");
  EXPECT_NE(refusal(p, "n=1.5"), "");
  EXPECT_NE(refusal(p, "n="), "");
  EXPECT_EQ(refusal(p, "p=0"), "");
  EXPECT_EQ(refusal(p, "p=0.999"), "");
  EXPECT_EQ(refusal(p, "p=1"), "--set p=1: must be numbers in [0, 1)");
  EXPECT_NE(refusal(p, "p=-0.01"), "");
  EXPECT_NE(refusal(p, "p=nan"), "");
  EXPECT_NE(refusal(p, "p=inf"), "");
  EXPECT_EQ(refusal(p, "causal=1"), "");
  EXPECT_NE(refusal(p, "causal=2"), "");
  EXPECT_EQ(refusal(p, "variant=buggy"), "");
  EXPECT_EQ(refusal(p, "variant=online"), "--set variant=online: must be one of buggy|fixed");
}

TEST(Params, UnknownKeyAndSyntax) {
  ParamValues p = make();
  EXPECT_NE(refusal(p, "blocksize=32").find("unknown parameter"), std::string::npos);
  EXPECT_NE(refusal(p, "blocksize=32").find("block_size"), std::string::npos);  // names the known ones
  EXPECT_EQ(refusal(p, "block_size"), "--set block_size: expected key=value");
  EXPECT_EQ(refusal(p, "=3"), "--set =3: expected key=value");
}

TEST(Params, FailedSetKeepsOldValue) {
  ParamValues p = make();
  p.set("n=7");
  EXPECT_NE(refusal(p, "n=700"), "");
  EXPECT_EQ(p.get_int("n"), 7);
  EXPECT_TRUE(p.was_set("n"));
}

TEST(Params, PowerOfTwoHelpers) {
  EXPECT_EQ(next_power_of_2(1), 1);
  EXPECT_EQ(next_power_of_2(1023), 1024);
  EXPECT_EQ(next_power_of_2(1024), 1024);
  EXPECT_EQ(next_power_of_2(1025), 2048);
  EXPECT_EQ(next_power_of_2(2000), 2048);
  EXPECT_TRUE(is_power_of_2(4096));
  EXPECT_FALSE(is_power_of_2(0));
  EXPECT_FALSE(is_power_of_2(12));
}

}  // namespace
}  // namespace kl
