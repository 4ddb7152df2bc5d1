#include "attnbench/features.hpp"

#include <cmath>
#include <stdexcept>

namespace attnbench {

std::string AttentionFeatures::first_set() const {
  if (window_left != -1) return "window_left";
  if (window_right != -1) return "window_right";
  if (softcap != 0.f) return "softcap";
  if (!alibi_slopes.empty()) return "alibi_slopes";
  if (!sinks.empty()) return "sinks";
  if (!qq_bias.empty() || qq_bias_len != 0) return "qq_bias";
  if (k_scale != 1.f) return "k_scale";
  if (v_scale != 1.f) return "v_scale";
  if (q_scale != 1.f) return "q_scale";
  return "";
}

namespace {
[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw std::invalid_argument("field '" + field + "': " + why);
}

void check_list(const std::string& field, const std::vector<float>& v, std::size_t want) {
  if (v.empty()) return;
  if (v.size() != want)
    bad(field, "expected " + std::to_string(want) + " values (one per query head), got " + std::to_string(v.size()));
  for (float x : v)
    if (!std::isfinite(x)) bad(field, "values must be finite");
}
}  // namespace

void AttentionFeatures::validate(int heads, int max_seqlen_q) const {
  if (window_left < -1) bad("window_left", "must be -1 (unbounded) or >= 0, got " + std::to_string(window_left));
  if (window_right < -1) bad("window_right", "must be -1 (unbounded) or >= 0, got " + std::to_string(window_right));
  if (!std::isfinite(softcap) || softcap < 0.f) bad("softcap", "must be a finite number > 0 (0 = off)");
  check_list("alibi_slopes", alibi_slopes, static_cast<std::size_t>(heads));
  check_list("sinks", sinks, static_cast<std::size_t>(heads));
  if (qq_bias_len < 0) bad("qq_bias", "length must be >= 0");
  if (!qq_bias.empty() || qq_bias_len > 0) {
    if (qq_bias_len < max_seqlen_q)
      bad("qq_bias", "covers " + std::to_string(qq_bias_len) + " new tokens, the longest query has " +
                         std::to_string(max_seqlen_q));
    const std::size_t want = static_cast<std::size_t>(qq_bias_len) * qq_bias_len;
    if (qq_bias.size() != want)
      bad("qq_bias", "expected " + std::to_string(want) + " values, got " + std::to_string(qq_bias.size()));
    for (float x : qq_bias)
      if (!std::isfinite(x)) bad("qq_bias", "values must be finite");
  }
  for (const auto& [name, s] :
       {std::pair<const char*, float>{"k_scale", k_scale}, {"v_scale", v_scale}, {"q_scale", q_scale}})
    if (!std::isfinite(s) || s <= 0.f) bad(name, "must be a finite number > 0");
}

std::string feature_conflict(const AttentionFeatures& f, const std::string& kernel) {
  const std::string name = f.first_set();
  return name.empty() ? "" : "feature '" + name + "': not implemented by " + kernel;
}

}  // namespace attnbench
