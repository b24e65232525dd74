// kernels/npy.*: round trips, and one clear error for every malformed file, before any allocation of
// the declared size.
#include <gtest/gtest.h>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/npy.h"
#include "test_util.h"

namespace kl {
namespace {

std::string header_file(const std::string& dict, size_t payload_bytes, int version = 1) {
  std::string h = dict;
  const size_t pre = version == 1 ? 10 : 12;
  h.append((64 - (pre + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string f = "\x93NUMPY";
  f += char(version);
  f += char(0);
  f += char(h.size() & 0xff);
  f += char((h.size() >> 8) & 0xff);
  if (version != 1) f += std::string("\0\0", 2);
  f += h;
  f.append(payload_bytes, '\0');
  return f;
}

std::string error_of(const std::string& bytes) {
  try {
    npy::parse(bytes, "x.npy");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, RoundTrip) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{7}, {3, 5}, {2, 3, 4, 5}, {}, {0, 3}}) {
    Array a = Array::zeros(shape);
    const std::vector<float> r = test::random_floats(a.data.size());
    a.data = r;
    Array b = npy::parse(npy::serialize(a), "mem");
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.data, b.data);
  }
  const std::string path = test::tmp_dir() + "/rt.npy";
  Array a = Array::zeros({4, 4});
  a.data[5] = 3.5f;
  npy::write(path, a);
  EXPECT_EQ(npy::read(path).data, a.data);
}

TEST(Npy, Version2And3Headers) {
  EXPECT_EQ(npy::parse(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, 2), "v2").size(), 2);
  EXPECT_EQ(npy::parse(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, 3), "v3").size(), 2);
}

TEST(Npy, MalformedFilesEachGetOneClearError) {
  EXPECT_NE(error_of("hello").find("magic"), std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16)).find("'<f8'"),
            std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16)).find("Fortran"),
            std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 8)).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12)).find("after the data"),
            std::string::npos);
  // Product overflowing 64 bits, and a huge declared size: refused from the header alone.
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 0))
                .find("2^64"),
            std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", 4))
                .find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", 0)).find("not a size"),
            std::string::npos);
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, }", 0)).find("'shape'"), std::string::npos);
  std::string bad_len = header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  bad_len[8] = char(0xff);
  bad_len[9] = char(0xff);
  EXPECT_NE(error_of(bad_len).find("longer than the file"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x93NUMPY\x09\x00\x00\x00", 10)).find("version"), std::string::npos);
}

TEST(Npy, MissingFileNamesThePath) {
  try {
    npy::read("/nonexistent/dir/x.npy");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.npy"), std::string::npos);
  }
}

}  // namespace
}  // namespace kl

namespace kl {
namespace {

// Found by the fuzzer (tests/fuzz/regressions/npy/): a 19-digit shape entry past 2^63 - 1 made
// std::stoll throw out_of_range instead of an InputError.
TEST(Npy, ShapeEntryPastInt64IsAnInputError) {
  EXPECT_NE(error_of(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (9999999999999999999,), }", 0))
                .find("larger than 2^63 - 1"),
            std::string::npos);
}

}  // namespace
}  // namespace kl
