// Named, ranged parameters shared by the command line (--set key=value), the panels and `list`.
// Every value a user gives is checked here, once, with one wording for every failure:
//   "--set block_size=100: must be a power of two in [32, 4096]"
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kl {

struct ParamSpec {
  enum class Kind { Int, Float, Pow2, Bool, Choice };
  std::string name;      // key as typed after --set
  Kind kind = Kind::Int;
  double min = 0, max = 0;  // inclusive for Int/Pow2/Float unless max_exclusive
  bool max_exclusive = false;
  std::string def;          // default, as text
  std::vector<std::string> choices;  // Kind::Choice
  std::string help;
  // Set by panel_override only: the kernels library's default and range this spec departs from, and
  // why (`list` prints both). Empty: the spec is the kernels library's own.
  std::string override_reason, kernel_def, kernel_range;

  std::string range_text() const;  // "[32, 4096], powers of two", "[0, 1)", "one of buggy|fixed"
  bool is_override() const { return !override_reason.empty(); }
};

ParamSpec int_param(std::string name, int64_t lo, int64_t hi, int64_t def, std::string help);
ParamSpec pow2_param(std::string name, int64_t lo, int64_t hi, int64_t def, std::string help);
ParamSpec float_param(std::string name, double lo, double hi, double def, std::string help,
                      bool hi_exclusive = false);
ParamSpec bool_param(std::string name, bool def, std::string help);
ParamSpec choice_param(std::string name, std::vector<std::string> choices, std::string def,
                       std::string help);

// Where a panel deliberately departs from a rung's spec (kernels/rungs/X.h, namespace param), it says
// so here, in one visible place, with the reason: another default (for the picture the panel opens
// on), or a range inside the kernel's. Throws std::logic_error for a range outside the kernel's or a
// default outside the range (a programming error, caught by the panel-parameter test).
ParamSpec panel_override(const ParamSpec& kernel_spec, std::string def, std::string reason);
ParamSpec panel_override(const ParamSpec& kernel_spec, double lo, double hi, std::string def, std::string reason);

// A set of validated values, filled from defaults and then from "key=value" strings.
class ParamValues {
 public:
  ParamValues() = default;
  explicit ParamValues(std::vector<ParamSpec> specs);  // every default applied

  // Parses "key=value", validates against the spec; throws InputError naming key, value, range.
  void set(const std::string& key_equals_value);
  void set(const std::string& key, const std::string& value);

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_text(const std::string& key) const;
  bool was_set(const std::string& key) const;  // given by the user, not a default

  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec* spec(const std::string& key) const;

 private:
  std::vector<ParamSpec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> user_set_;
};

// Helpers for code that checks numbers it did not get through ParamValues (shapes, sizes):
// throw InputError with the shared wording when value is outside [lo, hi].
void require_range(const std::string& name, int64_t value, int64_t lo, int64_t hi);

int64_t next_power_of_2(int64_t v);
bool is_power_of_2(int64_t v);

}  // namespace kl
