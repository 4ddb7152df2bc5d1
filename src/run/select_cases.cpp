// The cases a run selects: groups and shape files, each value once, no case twice, the dtype and filter kept,
// then the shard's slice.
#include <filesystem>
#include <map>
#include <optional>
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "cases/inline_shape.hpp"
#include "core/errors.hpp"
#include "run/runner.hpp"

namespace attnbench {

std::vector<ShapeCase> select_cases(const RunOptions& o) {
  // A value given twice would run each of its cases twice: an error naming the option and the value.
  const auto once = [](const std::vector<std::string>& values, const std::string& option, auto key) {
    std::map<std::string, std::string> seen;  // key -> the value as first given
    for (const auto& v : values) {
      const auto [it, fresh] = seen.emplace(key(v), v);
      if (fresh) continue;
      if (it->second == v) throw UsageError(option + ": '" + v + "' given twice");
      throw UsageError(option + ": '" + v + "' and '" + it->second + "' name the same " +
                       (option == "--shapes" ? "file" : "value"));
    }
  };
  for (const auto& d : o.dtypes)
    if (!parse_dtype(d)) throw UsageError("--dtype: unsupported dtype '" + d + "' (supported: " + dtype_names() + ")");
  once(o.groups, "--group", [](const std::string& g) { return g; });
  once(o.shape_files, "--shapes", [](const std::string& f) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::weakly_canonical(f, ec);
    return ec ? f : p.string();
  });
  once(o.dtypes, "--dtype", [](const std::string& d) { return std::string(dtype_name(*parse_dtype(d))); });
  std::vector<ShapeCase> all;
  for (const auto& g : o.groups) {
    auto c = load_group(g);
    all.insert(all.end(), c.begin(), c.end());
  }
  for (const auto& f : o.shape_files) {
    auto c = load_shape_file(f);
    all.insert(all.end(), c.begin(), c.end());
  }
  for (const auto& spec : o.inline_shapes) {
    auto c = load_inline_shape(spec);
    all.insert(all.end(), c.begin(), c.end());
  }
  // The same case from two files (a group and a copy of its file, two files of one group) would share its rows' keys.
  std::map<std::string, std::string> case_file;
  for (const auto& c : all) {
    const std::string id = c.group + "/" + c.name + "/" + c.dtype_label();
    const auto [it, fresh] = case_file.emplace(id, c.file);
    if (!fresh)
      throw UsageError("case " + id + " is selected twice: from " + it->second + " and from " + c.file +
                       " (same group, shape name and dtype)");
  }
  std::optional<std::regex> re;
  if (!o.filter.empty()) {
    // std::regex compiles and matches by recursion: a pattern nested deeply enough would overflow the stack.
    constexpr std::size_t kMaxFilter = 1000;
    constexpr int kMaxNesting = 64;
    if (o.filter.size() > kMaxFilter)
      throw UsageError("--filter: a pattern of at most " + std::to_string(kMaxFilter) + " characters, got " +
                       std::to_string(o.filter.size()));
    int depth = 0, deepest = 0;
    for (char ch : o.filter) deepest = std::max(deepest, depth += ch == '(' ? 1 : ch == ')' ? -1 : 0);
    if (deepest > kMaxNesting)
      throw UsageError("--filter: groups nested more than " + std::to_string(kMaxNesting) + " deep");
    try {
      re.emplace(o.filter);
    } catch (const std::regex_error& e) {
      throw UsageError("--filter: invalid regular expression '" + o.filter + "': " + e.what());
    }
  }
  std::vector<ShapeCase> out;
  for (auto& c : all) {
    if (!o.dtypes.empty()) {
      bool keep = false;
      for (const auto& d : o.dtypes) keep = keep || parse_dtype(d) == c.dtype;
      if (!keep) continue;
    }
    const std::string id = c.group + "/" + c.name + "/" + c.dtype_label();
    if (re && !std::regex_search(id, *re)) continue;
    out.push_back(std::move(c));
  }
  if (o.shard.second > 1) {  // by index modulo N, so every slice gets a share of each group's shapes
    std::vector<ShapeCase> slice;
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i % o.shard.second) == o.shard.first - 1) slice.push_back(std::move(out[i]));
    if (slice.empty() && !out.empty())
      throw UsageError("--shard " + std::to_string(o.shard.first) + "/" + std::to_string(o.shard.second) +
                       ": this slice is empty (only " + std::to_string(out.size()) + " cases are selected)");
    out = std::move(slice);
  }
  return out;
}

}  // namespace attnbench
