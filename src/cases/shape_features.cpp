#include "cases/shape_features.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/json_file.hpp"

using nlohmann::json;

namespace attnbench {

namespace {
[[noreturn]] void bad(const std::string& field, const std::string& why, const json& v) {
  throw std::invalid_argument("field '" + field + "': " + why + ", got " + compact_value(v.dump()));
}

// A scale or cap: a normal positive float (0, a subnormal or a negative value is no model's, and a subnormal turns
// into a division by zero or an infinite score downstream).
float positive(const json& s, const std::string& key) {
  const json& v = s.at(key);
  if (!v.is_number() || !(v.get<double>() >= std::numeric_limits<float>::min()) ||
      v.get<double>() > std::numeric_limits<float>::max())
    bad(key, "expected a number > 0 that fits a float as a normal number (1.2e-38 to 3.4e38)", v);
  return v.get<float>();
}

int window(const json& s, const std::string& key) {
  const json& v = s.at(key);
  if (!v.is_number_integer() || v.get<long long>() < -1 || v.get<long long>() > (1LL << 30))
    bad(key, "expected an integer, -1 (unbounded) or 0 .. 2^30", v);
  return static_cast<int>(v.get<long long>());
}

std::vector<float> numbers(const json& v, const std::string& key) {
  if (!v.is_array() || v.empty()) bad(key, "expected a non-empty list of numbers", v);
  std::vector<float> out;
  for (const auto& e : v) {
    if (!e.is_number() || std::fabs(e.get<double>()) > std::numeric_limits<float>::max())
      bad(key, "expected numbers that fit a float", e);
    out.push_back(e.get<float>());
  }
  return out;
}
}  // namespace

const std::set<std::string>& feature_keys() {
  static const std::set<std::string> keys = {"window_left", "window_right", "softcap", "alibi_slopes",
                                             "sinks",       "qq_bias",      "k_scale", "v_scale", "q_scale"};
  return keys;
}

AttentionFeatures parse_features(const json& s) {
  AttentionFeatures f;
  if (s.contains("window_left")) f.window_left = window(s, "window_left");
  if (s.contains("window_right")) f.window_right = window(s, "window_right");
  if (s.contains("softcap")) f.softcap = positive(s, "softcap");  // absent = off; 0 is no cap of a model
  if (s.contains("alibi_slopes")) f.alibi_slopes = numbers(s.at("alibi_slopes"), "alibi_slopes");
  if (s.contains("sinks")) f.sinks = numbers(s.at("sinks"), "sinks");
  if (s.contains("qq_bias")) {  // a square list of rows: qq_bias[i][j] for new tokens i, j
    const json& v = s.at("qq_bias");
    if (!v.is_array() || v.empty()) bad("qq_bias", "expected a square list of rows of numbers", v);
    f.qq_bias_len = static_cast<int>(v.size());
    for (const auto& row : v) {
      const auto r = numbers(row, "qq_bias");
      if (static_cast<int>(r.size()) != f.qq_bias_len) bad("qq_bias", "expected a square list of rows", row);
      f.qq_bias.insert(f.qq_bias.end(), r.begin(), r.end());
    }
  }
  if (s.contains("k_scale")) f.k_scale = positive(s, "k_scale");
  if (s.contains("v_scale")) f.v_scale = positive(s, "v_scale");
  if (s.contains("q_scale")) f.q_scale = positive(s, "q_scale");
  return f;
}

json features_json(const AttentionFeatures& f) {
  json j = json::object();
  if (f.window_left != -1) j["window_left"] = f.window_left;
  if (f.window_right != -1) j["window_right"] = f.window_right;
  if (f.softcap != 0.f) j["softcap"] = f.softcap;
  if (!f.alibi_slopes.empty()) j["alibi_slopes"] = f.alibi_slopes;
  if (!f.sinks.empty()) j["sinks"] = f.sinks;
  if (f.qq_bias_len > 0) {
    j["qq_bias_len"] = f.qq_bias_len;
    json rows = json::array();  // as the shape file gives it: qq_bias_len rows
    for (int i = 0; i < f.qq_bias_len; ++i)
      rows.push_back(std::vector<float>(f.qq_bias.begin() + static_cast<std::ptrdiff_t>(i) * f.qq_bias_len,
                                        f.qq_bias.begin() + static_cast<std::ptrdiff_t>(i + 1) * f.qq_bias_len));
    j["qq_bias"] = rows;
  }
  if (f.k_scale != 1.f) j["k_scale"] = f.k_scale;
  if (f.v_scale != 1.f) j["v_scale"] = f.v_scale;
  if (f.q_scale != 1.f) j["q_scale"] = f.q_scale;
  return j;
}

}  // namespace attnbench
