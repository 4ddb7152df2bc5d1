// The one table of tuning knobs. Knobs are environment variables (ATTNBENCH_*) read at plan time,
// overridable per call, and recorded in every result row.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace attnbench {

// How a knob's value is read against its `values`.
enum class KnobSyntax {
  one,             // one of `values`; any non-negative integer when `values` is empty
  list,            // a comma list of `values`, each at most once, in the order given
  one_or_integer,  // one of `values`, or a non-negative integer
};

struct KnobSpec {
  std::string name;
  std::vector<std::string> values;  // allowed values (see `syntax`)
  std::string default_value;
  std::string kernels;  // the kernels that read it, as a comma list of globs ("cuda.unified,*.gated_block")
  std::string meaning;
  KnobSyntax syntax = KnobSyntax::one;
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

// Checks one name=value against the table; returns an error message naming both, or "" when fine.
std::string check_knob(const std::string& name, const std::string& value);
// What a knob takes, as `list --knobs` shows it: "4|8", "integer", "a|b|fallback[,...]", "first|autotune|N".
std::string knob_values_text(const KnobSpec& k);

// ATTNBENCH_* variables the project reads that are not knobs (ATTNBENCH_SHAPES_DIR, the scripts' variables).
const std::vector<std::string>& known_non_knob_variables();
// One warning per ATTNBENCH_* entry of `environment` ("NAME=VALUE", as in environ) that is neither a knob nor a
// known variable, naming the nearest known name: a misspelled knob would otherwise be ignored silently.
std::vector<std::string> unknown_environment_warnings(const std::vector<std::string>& environment);
// The same over this process's environment.
std::vector<std::string> unknown_environment_warnings();

}  // namespace attnbench
