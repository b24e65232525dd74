#include "kernels/runtime/params.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "kernels/runtime/errors.h"

namespace kl {
namespace {

std::string num_text(double v) {
  if (std::fabs(v) < 9e15 && v == std::floor(v)) return std::to_string(int64_t(v));
  std::ostringstream s;
  s << v;
  return s.str();
}

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_float(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parse_bool(const std::string& s, bool* out) {
  if (s == "1" || s == "true" || s == "on" || s == "yes") return *out = true, true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return *out = false, true;
  return false;
}

}  // namespace

std::string ParamSpec::range_text() const {
  switch (kind) {
    case Kind::Int: return "integers in [" + num_text(min) + ", " + num_text(max) + "]";
    case Kind::Pow2: return "powers of two in [" + num_text(min) + ", " + num_text(max) + "]";
    case Kind::Float:
      return "numbers in [" + num_text(min) + ", " + num_text(max) + (max_exclusive ? ")" : "]");
    case Kind::Bool: return "0 or 1";
    case Kind::Choice: {
      std::string s = "one of ";
      for (size_t i = 0; i < choices.size(); ++i) s += (i ? "|" : "") + choices[i];
      return s;
    }
  }
  return "";
}

ParamSpec panel_override(const ParamSpec& kernel_spec, double lo, double hi, std::string def, std::string reason) {
  if (reason.empty()) throw std::logic_error("panel_override of " + kernel_spec.name + ": give the reason");
  if (lo < kernel_spec.min || hi > kernel_spec.max || lo > hi)
    throw std::logic_error("panel_override of " + kernel_spec.name + ": range outside the kernel's " +
                           kernel_spec.range_text());
  ParamSpec p = kernel_spec;
  p.min = lo;
  p.max = hi;
  p.def = std::move(def);
  p.override_reason = std::move(reason);
  p.kernel_def = kernel_spec.def;
  p.kernel_range = kernel_spec.range_text();
  ParamValues check({p});  // the default must be inside the panel's range
  try {
    check.set(p.name, p.def);
  } catch (const std::exception& e) {
    throw std::logic_error("panel_override of " + p.name + ": default " + p.def + ": " + e.what());
  }
  return p;
}

ParamSpec panel_override(const ParamSpec& kernel_spec, std::string def, std::string reason) {
  return panel_override(kernel_spec, kernel_spec.min, kernel_spec.max, std::move(def), std::move(reason));
}

ParamSpec int_param(std::string name, int64_t lo, int64_t hi, int64_t def, std::string help) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = ParamSpec::Kind::Int;
  p.min = double(lo);
  p.max = double(hi);
  p.def = std::to_string(def);
  p.help = std::move(help);
  return p;
}

ParamSpec pow2_param(std::string name, int64_t lo, int64_t hi, int64_t def, std::string help) {
  ParamSpec p = int_param(std::move(name), lo, hi, def, std::move(help));
  p.kind = ParamSpec::Kind::Pow2;
  return p;
}

ParamSpec float_param(std::string name, double lo, double hi, double def, std::string help,
                      bool hi_exclusive) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = ParamSpec::Kind::Float;
  p.min = lo;
  p.max = hi;
  p.max_exclusive = hi_exclusive;
  p.def = num_text(def);
  p.help = std::move(help);
  return p;
}

ParamSpec bool_param(std::string name, bool def, std::string help) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = ParamSpec::Kind::Bool;
  p.min = 0;
  p.max = 1;
  p.def = def ? "1" : "0";
  p.help = std::move(help);
  return p;
}

ParamSpec choice_param(std::string name, std::vector<std::string> choices, std::string def,
                       std::string help) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = ParamSpec::Kind::Choice;
  p.choices = std::move(choices);
  p.def = std::move(def);
  p.help = std::move(help);
  return p;
}

ParamValues::ParamValues(std::vector<ParamSpec> specs) : specs_(std::move(specs)) {
  for (const ParamSpec& s : specs_) values_[s.name] = s.def;
}

const ParamSpec* ParamValues::spec(const std::string& key) const {
  for (const ParamSpec& s : specs_)
    if (s.name == key) return &s;
  return nullptr;
}

void ParamValues::set(const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--set " + kv + ": expected key=value");
  set(kv.substr(0, eq), kv.substr(eq + 1));
}

void ParamValues::set(const std::string& key, const std::string& value) {
  const ParamSpec* s = spec(key);
  if (!s) {
    std::string known;
    for (const ParamSpec& p : specs_) known += (known.empty() ? "" : ", ") + p.name;
    throw InputError("--set " + key + "=" + value + ": unknown parameter; known: " +
                     (known.empty() ? "none" : known));
  }
  const std::string bad = "--set " + key + "=" + value + ": must be " + s->range_text();
  std::string canonical = value;
  switch (s->kind) {
    case ParamSpec::Kind::Int:
    case ParamSpec::Kind::Pow2: {
      int64_t v;
      if (!parse_int(value, &v) || double(v) < s->min || double(v) > s->max) throw InputError(bad);
      if (s->kind == ParamSpec::Kind::Pow2 && !is_power_of_2(v)) throw InputError(bad);
      canonical = std::to_string(v);
      break;
    }
    case ParamSpec::Kind::Float: {
      double v;
      if (!parse_float(value, &v) || v < s->min || v > s->max || (s->max_exclusive && v >= s->max))
        throw InputError(bad);
      break;
    }
    case ParamSpec::Kind::Bool: {
      bool b;
      if (!parse_bool(value, &b)) throw InputError(bad);
      canonical = b ? "1" : "0";
      break;
    }
    case ParamSpec::Kind::Choice: {
      bool ok = false;
      for (const std::string& c : s->choices) ok = ok || c == value;
      if (!ok) throw InputError(bad);
      break;
    }
  }
  values_[key] = canonical;
  user_set_[key] = true;
}

int64_t ParamValues::get_int(const std::string& key) const {
  return std::strtoll(get_text(key).c_str(), nullptr, 0);
}

double ParamValues::get_float(const std::string& key) const {
  return std::strtod(get_text(key).c_str(), nullptr);
}

bool ParamValues::get_bool(const std::string& key) const { return get_text(key) == "1"; }

const std::string& ParamValues::get_text(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw RuntimeError("internal: no parameter named " + key);
  return it->second;
}

bool ParamValues::was_set(const std::string& key) const { return user_set_.count(key) != 0; }

void require_range(const std::string& name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    throw InputError(out_of_range_message(name, std::to_string(value),
                                          "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
}

int64_t next_power_of_2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

bool is_power_of_2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace kl
