#include "kernels/measure/peers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"

namespace kl::peers {

const char* const kEmbeddedName = "perf/h200.json";
const char* const kSourcePath = "docs/perf/h200.json";
const char* const kReadmeBegin =
    "<!-- peers-table: generated from docs/perf/h200.json by kl_peers_table (cmake --build --preset default "
    "--target readme-peers-table); do not edit by hand -->";
const char* const kReadmeEnd = "<!-- /peers-table -->";

namespace {

using nlohmann::json;

// [SECTION] reading the file, one named field at a time ------------------------------------------------
struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(origin + ": " + path + ": " + what);
  }
  static std::string shown(const json& v) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }
  const json& field(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "expected an object, got " + shown(obj));
    auto it = obj.find(key);
    if (it == obj.end()) fail(path, std::string("missing field \"") + key + "\"");
    return *it;
  }
  std::string text(const json& obj, const std::string& path, const char* key, bool nullable = false) const {
    const json& v = field(obj, path, key);
    if (nullable && v.is_null()) return "";
    if (!v.is_string()) fail(path + "." + key, std::string("expected a string") + (nullable ? " or null" : "") + ", got " + shown(v));
    return v.get<std::string>();
  }
  std::string optional_text(const json& obj, const std::string& path, const char* key) const {
    return obj.contains(key) ? text(obj, path, key, true) : "";
  }
  int integer(const json& obj, const std::string& path, const char* key, int lo, int hi) const {
    const json& v = field(obj, path, key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail(path + "." + key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + shown(v));
    return v.get<int>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_boolean()) fail(path + "." + key, "expected true or false, got " + shown(v));
    return v.get<bool>();
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(path + "." + key, "expected an array, got " + shown(v));
    return v;
  }
  std::vector<std::optional<double>> numbers(const json& arr, const std::string& path, size_t n) const {
    if (!arr.is_array()) fail(path, "expected an array, got " + shown(arr));
    if (arr.size() != n)
      fail(path, "expected " + std::to_string(n) + " entries (one per column), got " + std::to_string(arr.size()));
    std::vector<std::optional<double>> out;
    for (size_t i = 0; i < n; ++i) {
      const json& v = arr[i];
      const std::string at = path + "[" + std::to_string(i) + "]";
      if (v.is_null()) {
        out.emplace_back();
      } else if (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0) {
        out.emplace_back(v.get<double>());
      } else {
        fail(at, "expected a positive number or null, got " + shown(v));
      }
    }
    return out;
  }
};

Column read_column(const Reader& rd, const json& c, const std::string& path) {
  Column col;
  col.id = rd.text(c, path, "id");
  col.name = rd.text(c, path, "name");
  col.short_name = rd.text(c, path, "short");
  col.ours = c.contains("ours") && rd.boolean(c, path, "ours");
  if (col.id.empty() || col.name.empty() || col.short_name.empty()) rd.fail(path, "id, name and short must not be empty");
  return col;
}

Section read_section(const Reader& rd, const json& s, const std::string& path) {
  Section sec;
  sec.id = rd.text(s, path, "id");
  sec.title = rd.text(s, path, "title");
  sec.unit = rd.text(s, path, "unit");
  sec.note = rd.optional_text(s, path, "note");
  sec.run = rd.optional_text(s, path, "run");
  sec.value_digits = rd.integer(s, path, "value_digits", 0, 4);
  sec.ratio_digits = rd.integer(s, path, "ratio_digits", 1, 4);
  const json& cols = rd.array(s, path, "columns");
  for (size_t i = 0; i < cols.size(); ++i) sec.columns.push_back(read_column(rd, cols[i], path + ".columns[" + std::to_string(i) + "]"));
  if (sec.columns.size() < 2 || !sec.columns[0].ours)
    rd.fail(path + ".columns", "expected the ladder's column first (\"ours\": true) and at least one peer");
  if (sec.peer_columns().empty()) rd.fail(path + ".columns", "expected at least one peer column (not \"ours\")");
  const json& rows = rd.array(s, path, "rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string at = path + ".rows[" + std::to_string(i) + "]";
    Row row;
    row.name = rd.optional_text(rows[i], at, "name");
    row.shape = rd.text(rows[i], at, "shape");
    if (row.shape.empty()) rd.fail(at + ".shape", "must not be empty");
    row.values = rd.numbers(rd.field(rows[i], at, "values"), at + ".values", sec.columns.size());
    if (rows[i].contains("gbs")) row.gbs = rd.numbers(rows[i]["gbs"], at + ".gbs", sec.columns.size());
    row.key = shape_key(row.shape);
    sec.rows.push_back(std::move(row));
  }
  if (sec.rows.empty()) rd.fail(path + ".rows", "expected at least one row");
  return sec;
}

std::string num(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '*' || c == '_' || c == '~') out += std::string("\\") + c;
    else out += c;
  }
  return out;
}

}  // namespace

// [SECTION] the model ---------------------------------------------------------------------------------
ShapeKey shape_key(const std::string& shape) {
  ShapeKey k;
  std::istringstream in(shape);
  std::string tok;
  while (in >> tok) {
    const size_t eq = tok.find('=');
    if (tok == "causal") k.causal = true;
    if (eq == std::string::npos) continue;
    const std::string name = tok.substr(0, eq), value = tok.substr(eq + 1);
    int v = 0;
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) continue;
    v = std::stoi(value);
    if (name == "B") k.B = v;
    else if (name == "H") k.H = v;
    else if (name == "Hkv") k.Hkv = v;
    else if (name == "L") k.L = v;
    else if (name == "d") k.d = v;
  }
  return k;
}

std::vector<size_t> Section::peer_columns() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < columns.size(); ++i)
    if (!columns[i].ours) out.push_back(i);
  return out;
}

const Section* Recorded::find(const std::string& id) const {
  for (const Section& s : sections)
    if (s.id == id) return &s;
  return nullptr;
}

Recorded parse(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(origin + ": not JSON (" + e.what() + ")");
  }
  const Reader rd{origin};
  Recorded r;
  r.schema = rd.integer(doc, "top level", "schema", 1, 1);
  r.date = rd.text(doc, "top level", "date");
  if (r.date.size() != 10 || r.date[4] != '-' || r.date[7] != '-')
    rd.fail("date", "expected YYYY-MM-DD, got \"" + r.date + "\"");
  r.device = rd.text(doc, "top level", "device");
  if (r.device.empty()) rd.fail("device", "must not be empty");
  r.driver = rd.text(doc, "top level", "driver", true);
  r.cuda = rd.text(doc, "top level", "cuda", true);
  r.torch = rd.text(doc, "top level", "torch", true);
  r.cudnn = rd.text(doc, "top level", "cudnn", true);
  r.triton = rd.text(doc, "top level", "triton", true);
  r.harness = rd.text(doc, "top level", "harness");
  r.source = rd.optional_text(doc, "top level", "source");
  r.quick = doc.contains("quick") && rd.boolean(doc, "top level", "quick");
  const json& secs = rd.array(doc, "top level", "sections");
  for (size_t i = 0; i < secs.size(); ++i) r.sections.push_back(read_section(rd, secs[i], "sections[" + std::to_string(i) + "]"));
  if (r.sections.empty()) rd.fail("sections", "expected at least one section");
  return r;
}

const Recorded& embedded() {
  static const Recorded r = [] {
    const std::string_view text = assets::find(kEmbeddedName);
    if (text.empty()) throw RuntimeError(std::string("the recorded peers (") + kEmbeddedName + ") are not embedded: a broken build");
    try {
      // The embedded bytes end with a terminating zero, which is not part of the file.
      std::string s(text);
      while (!s.empty() && s.back() == '\0') s.pop_back();
      return parse(s, kSourcePath);
    } catch (const InputError& e) {
      throw RuntimeError(e.what());
    }
  }();
  return r;
}

std::string caption(const Recorded& r) {
  std::string s = r.device + ", " + r.date;
  if (!r.torch.empty()) s += ", torch " + r.torch;
  if (!r.cudnn.empty()) s += ", cuDNN " + r.cudnn;
  if (!r.triton.empty()) s += ", Triton " + r.triton;
  if (!r.cuda.empty()) s += ", CUDA " + r.cuda;
  s += r.driver.empty() ? ", driver not recorded" : ", driver " + r.driver;
  if (r.quick) s += ", quick sizes";
  return s;
}

std::optional<double> ratio(const Row& row, size_t col) {
  if (row.values.empty() || col >= row.values.size() || !row.values[0] || !row.values[col]) return std::nullopt;
  return *row.values[0] / *row.values[col];
}

bool ahead(double ratio, int digits) { return std::stod(num(ratio, digits)) >= 1.0; }

std::string format_value(const Section& s, std::optional<double> v) { return v ? num(*v, s.value_digits) : "-"; }
std::string format_ratio(const Section& s, std::optional<double> r) { return r ? num(*r, s.ratio_digits) : "-"; }

std::string short_shape(const Row& row) {
  const ShapeKey& k = row.key;
  if (row.name.empty() && k.d > 0 && k.L > 0)
    return "d=" + std::to_string(k.d) + " L=" + std::to_string(k.L) + (k.Hkv ? " Hkv=" + std::to_string(k.Hkv) : "") +
           (k.causal ? " causal" : "");
  return row.name.empty() ? row.shape : row.name + " " + row.shape;
}

// [SECTION] the README's block ---------------------------------------------------------------------------
std::string markdown(const Recorded& r) {
  std::string s = std::string(kReadmeBegin) + "\n\n";
  // The block stands in docs/fast-kernels.md: the link is relative to docs/, the text the repository path.
  s += "Recorded on " + md_escape(caption(r)) + " ([" + kSourcePath + "](perf/h200.json)). Harness: " + md_escape(r.harness) + ".\n";
  for (const Section& sec : r.sections) {
    const bool named = std::any_of(sec.rows.begin(), sec.rows.end(), [](const Row& x) { return !x.name.empty(); });
    const std::vector<size_t> peers = sec.peer_columns();
    s += "\n**" + md_escape(sec.title) + "**, " + md_escape(sec.unit) + (sec.note.empty() ? "" : "; " + md_escape(sec.note)) + ":\n\n";
    std::string head = named ? "| kernel | shape |" : "| shape |", rule = named ? "| --- | --- |" : "| --- |";
    for (const Column& c : sec.columns) head += " " + c.name + " |", rule += " --- |";
    for (size_t p : peers) head += " /" + sec.columns[p].short_name + " |", rule += " --- |";
    s += head + "\n" + rule + "\n";
    for (const Row& row : sec.rows) {
      std::string line = named ? "| " + md_escape(row.name) + " | " + md_escape(row.shape) + " |" : "| " + md_escape(row.shape) + " |";
      for (size_t c = 0; c < sec.columns.size(); ++c) line += " " + format_value(sec, row.values[c]) + " |";
      for (size_t p : peers) line += " " + format_ratio(sec, ratio(row, p)) + " |";
      s += line + "\n";
    }
  }
  s += "\n" + std::string(kReadmeEnd) + "\n";
  return s;
}

std::string readme_block(const std::string& readme) {
  const size_t a = readme.find(kReadmeBegin);
  if (a == std::string::npos) return "";
  const size_t b = readme.find(kReadmeEnd, a);
  if (b == std::string::npos) return "";
  size_t e = b + std::string(kReadmeEnd).size();
  if (e < readme.size() && readme[e] == '\n') ++e;
  return readme.substr(a, e - a);
}

std::string replace_readme_block(const std::string& readme, const std::string& block) {
  const std::string old = readme_block(readme);
  if (old.empty())
    throw InputError(std::string("README: the peers table's markers are missing: put the lines\n") + kReadmeBegin + "\n" +
                     kReadmeEnd + "\nwhere the table goes");
  const size_t a = readme.find(kReadmeBegin);
  return readme.substr(0, a) + block + readme.substr(a + old.size());
}

Span value_span(const Section& s, size_t col, bool (*keep)(const Row&)) {
  Span sp;
  for (const Row& row : s.rows) {
    if ((keep && !keep(row)) || col >= row.values.size() || !row.values[col]) continue;
    const double v = *row.values[col];
    sp.lo = sp.any ? std::min(sp.lo, v) : v, sp.hi = sp.any ? std::max(sp.hi, v) : v, sp.any = true;
  }
  return sp;
}

Span ratio_span(const Section& s, size_t col, bool (*keep)(const Row&)) {
  Span sp;
  for (const Row& row : s.rows) {
    if (keep && !keep(row)) continue;
    const std::optional<double> v = ratio(row, col);
    if (!v) continue;
    sp.lo = sp.any ? std::min(sp.lo, *v) : *v, sp.hi = sp.any ? std::max(sp.hi, *v) : *v, sp.any = true;
  }
  return sp;
}

// [SECTION] the notice --------------------------------------------------------------------------------------
namespace {
// The peer the ladder is held against in a section: the one with the highest figures (geometric mean of the
// ratios' inverse, over the rows both have), so "ahead" is said of the strongest (cuDNN, Triton), not the weakest.
size_t strongest_peer(const Section& s) {
  size_t best = 0;
  double best_gm = -1;
  for (size_t c : s.peer_columns()) {
    double logs = 0;
    int n = 0;
    for (const Row& row : s.rows)
      if (const std::optional<double> r = ratio(row, c)) logs -= std::log(*r), ++n;
    const double gm = n ? std::exp(logs / n) : -1;
    if (gm > best_gm) best_gm = gm, best = c;
  }
  return best;
}
std::string section_word(const Section& s) {
  if (s.id == "flash-forward") return "forward shapes";
  if (s.id == "flash-backward") return "backward shapes";
  if (s.id == "memory") return "memory-bound rows";
  return s.title.substr(0, s.title.find(" ("));
}
}  // namespace

std::string notice(const Recorded& r) {
  std::string out = "Recorded on " + r.device + ", " + r.date + ": the ladder";
  bool first = true;
  for (const Section& s : r.sections) {
    if (s.peer_columns().empty()) continue;
    const size_t c = strongest_peer(s);
    int n = 0, ahead_n = 0;
    for (const Row& row : s.rows)
      if (const std::optional<double> v = ratio(row, c)) ++n, ahead_n += ahead(*v, s.ratio_digits);
    if (n == 0) continue;
    const Span sp = ratio_span(s, c);
    out += std::string(first ? "" : ";") + " ahead of " + s.columns[c].name + " at " + std::to_string(ahead_n) +
           " of " + std::to_string(n) + " " + section_word(s) + " (" + format_ratio(s, sp.lo) + "x to " +
           format_ratio(s, sp.hi) + "x)";
    first = false;
  }
  return out + ". Each table: green ahead, red behind.";
}

// [SECTION] the live figures -------------------------------------------------------------------------------
std::vector<std::optional<double>> live_ladder(const Section& s, const measure::Results& live) {
  std::vector<std::optional<double>> out(s.rows.size());
  if (s.id != "flash-forward" || live.machine.cpu_figures) return out;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const ShapeKey& k = s.rows[i].key;
    if (k.Hkv) continue;
    for (const measure::Point& p : live.points) {
      if (p.section != "compute" || p.variant.rfind("fast", 0) != 0) continue;
      const ShapeKey q = shape_key(p.shape);
      if (q.B == k.B && q.H == k.H && q.L == k.L && q.d == k.d && q.causal == k.causal && p.tflops > 0) out[i] = p.tflops;
    }
  }
  return out;
}

}  // namespace kl::peers
