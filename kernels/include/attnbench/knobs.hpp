// The one table of tuning knobs. Knobs are environment variables (ATTNBENCH_*) read at plan time,
// overridable per call, and recorded in every result row.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace attnbench {

struct KnobSpec {
  std::string name;
  std::vector<std::string> values;  // allowed values; empty means any non-negative integer
  std::string default_value;
  std::string meaning;
};

const std::vector<KnobSpec>& knob_table();
const KnobSpec* find_knob(const std::string& name);

// Resolved knob values, one per table entry, as strings.
class KnobValues {
 public:
  // Defaults, then the environment, then explicit overrides; throws std::invalid_argument for an unknown name
  // or a value outside the knob's allowed set (naming both).
  static KnobValues resolve(const std::map<std::string, std::string>& overrides = {}, bool read_env = true);

  const std::string& get(const std::string& name) const;
  int get_int(const std::string& name) const;
  bool get_bool(const std::string& name) const { return get_int(name) != 0; }
  const std::map<std::string, std::string>& all() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// Checks one name=value against the table; returns an error message or "" when fine.
std::string check_knob(const std::string& name, const std::string& value);

// ATTNBENCH_* variables the project reads that are not knobs (ATTNBENCH_SHAPES_DIR, the scripts' variables).
const std::vector<std::string>& known_non_knob_variables();
// One warning per ATTNBENCH_* entry of `environment` ("NAME=VALUE", as in environ) that is neither a knob nor a
// known variable, naming the nearest known name: a misspelled knob would otherwise be ignored silently.
std::vector<std::string> unknown_environment_warnings(const std::vector<std::string>& environment);
// The same over this process's environment.
std::vector<std::string> unknown_environment_warnings();

}  // namespace attnbench
