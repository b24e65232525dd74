#include "kernels/runtime/npy.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "kernels/runtime/errors.h"

namespace kl::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxDims = 32;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw InputError(what + ": not a usable .npy file: " + why);
}

// Minimal parser for the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
std::string dict_value(const std::string& header, const std::string& key, const std::string& what) {
  const std::string k1 = "'" + key + "'", k2 = "\"" + key + "\"";
  size_t p = header.find(k1);
  size_t klen = k1.size();
  if (p == std::string::npos) {
    p = header.find(k2);
    klen = k2.size();
  }
  if (p == std::string::npos) fail(what, "header has no '" + key + "'");
  p += klen;
  while (p < header.size() && (header[p] == ' ')) ++p;
  if (p >= header.size() || header[p] != ':') fail(what, "header is malformed near '" + key + "'");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size()) fail(what, "header is malformed near '" + key + "'");
  size_t end;
  if (header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos) fail(what, "shape tuple is not closed");
    return header.substr(p, end - p + 1);
  }
  if (header[p] == '\'' || header[p] == '"') {
    end = header.find(header[p], p + 1);
    if (end == std::string::npos) fail(what, "string value of '" + key + "' is not closed");
    return header.substr(p + 1, end - p - 1);
  }
  end = header.find_first_of(",}", p);
  if (end == std::string::npos) fail(what, "header is malformed near '" + key + "'");
  std::string v = header.substr(p, end - p);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

std::vector<int64_t> parse_shape(const std::string& tuple, const std::string& what) {
  std::vector<int64_t> shape;
  std::string body = tuple.substr(1, tuple.size() - 2);
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(" ");
    if (a == std::string::npos) continue;  // trailing comma: "(3,)"
    size_t b = item.find_last_not_of(" ");
    item = item.substr(a, b - a + 1);
    if (item.empty() || item.size() > 19) fail(what, "shape entry '" + item + "' is not a size");
    for (char c : item)
      if (c < '0' || c > '9') fail(what, "shape entry '" + item + "' is not a size");
    errno = 0;
    const unsigned long long v = std::strtoull(item.c_str(), nullptr, 10);
    if (errno == ERANGE || v > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(what, "shape entry " + item + " is larger than 2^63 - 1");
    shape.push_back(int64_t(v));
    if (int64_t(shape.size()) > kMaxDims) fail(what, "more than 32 dimensions");
  }
  return shape;
}

}  // namespace

Array parse(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    fail(what, "missing the \\x93NUMPY magic string");
  const unsigned char major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(what, "truncated header");
    header_len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8 |
                 size_t(uint8_t(bytes[10])) << 16 | size_t(uint8_t(bytes[11])) << 24;
    header_start = 12;
  } else {
    fail(what, "format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (header_len > bytes.size() - header_start) fail(what, "header is longer than the file");
  const std::string header = bytes.substr(header_start, header_len);
  const std::string descr = dict_value(header, "descr", what);
  if (descr != "<f4" && descr != "=f4" && descr != "f4")
    fail(what, "dtype '" + descr + "' is not float32 ('<f4'); convert with x.astype(np.float32)");
  const std::string fortran = dict_value(header, "fortran_order", what);
  if (fortran == "True")
    fail(what, "Fortran order is not supported; save np.ascontiguousarray(x)");
  if (fortran != "False") fail(what, "fortran_order is '" + fortran + "', not True or False");
  const std::string shape_text = dict_value(header, "shape", what);
  if (shape_text.empty() || shape_text.front() != '(') fail(what, "shape is not a tuple");
  Array a;
  a.shape = parse_shape(shape_text, what);
  // Count elements with overflow checks before any allocation of the declared size.
  const size_t payload = bytes.size() - header_start - header_len;
  uint64_t count = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / uint64_t(d))
      fail(what, "shape " + a.shape_text() + " has more elements than 2^64");
    count *= uint64_t(d);
  }
  if (count > payload / 4)
    fail(what, "shape " + a.shape_text() + " needs " + std::to_string(count) + " floats but the file holds " +
                   std::to_string(payload / 4) + " (truncated?)");
  if (count * 4 != payload)
    fail(what, "file has " + std::to_string(payload - count * 4) + " bytes after the data");
  a.data.resize(size_t(count));
  if (count) std::memcpy(a.data.data(), bytes.data() + header_start + header_len, size_t(count) * 4);
  return a;
}

Array read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open (" + std::string(std::strerror(errno)) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

std::string serialize(const Array& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape[i]);
  if (a.shape.size() == 1) shape += ",";
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that magic + 4 + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back(char(1));
  out.push_back(char(0));
  out.push_back(char(header.size() & 0xff));
  out.push_back(char(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size() * 4);
  return out;
}

void write(const std::string& path, const Array& a) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
  const std::string bytes = serialize(a);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) throw RuntimeError(path + ": write failed");
}

}  // namespace kl::npy
