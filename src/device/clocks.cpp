#include "device/clocks.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace attnbench {

namespace {

// The last n readings agree within the relative tolerance.
bool steady_tail(const std::vector<unsigned>& seen, const SettleRule& rule) {
  const std::size_t n = static_cast<std::size_t>(std::max(rule.steady_steps, 1));
  if (seen.size() < n) return false;
  const auto [lo, hi] = std::minmax_element(seen.end() - static_cast<std::ptrdiff_t>(n), seen.end());
  return *hi - *lo <= rule.tolerance * *hi;
}

std::string not_steady_why(const std::vector<unsigned>& seen, double seconds) {
  std::string tail;
  for (std::size_t i = seen.size() > 4 ? seen.size() - 4 : 0; i < seen.size(); ++i)
    tail += (tail.empty() ? "" : " ") + std::to_string(seen[i]);
  char buf[160];
  std::snprintf(buf, sizeof buf, "SM clock not steady after %.1f s (last readings %s MHz)", seconds, tail.c_str());
  return buf;
}

}  // namespace

SettleReport settle_sm_clock(const std::function<void(int ms)>& spin,
                             const std::function<std::optional<unsigned>()>& read_sm_mhz,
                             std::optional<unsigned> max_mhz, const SettleRule& rule,
                             const std::function<double()>& now_s) {
  SettleReport r;
  const double t0 = now_s();
  r.from_mhz = read_sm_mhz();
  std::vector<unsigned> seen;
  for (;;) {
    spin(rule.step_ms);
    ++r.steps;
    const double t = now_s() - t0;
    const std::optional<unsigned> c = read_sm_mhz();
    if (c) {
      r.to_mhz = c;
      seen.push_back(*c);
      const bool at_max = max_mhz && *c >= rule.near_max * *max_mhz;
      if (steady_tail(seen, rule) && (at_max || t >= rule.locked_after_s)) {
        r.steady = true;
        break;
      }
    } else if (seen.empty() && t >= rule.locked_after_s) {
      r.why = "no SM clock reading: spun " + std::to_string(r.steps * rule.step_ms) + " ms unwatched";
      break;
    }
    if (t >= rule.max_seconds) {
      r.why = not_steady_why(seen, t);
      break;
    }
  }
  r.seconds = now_s() - t0;
  return r;
}

nlohmann::json settle_json(const SettleReport& r) {
  nlohmann::json j = {{"seconds", r.seconds}, {"steps", r.steps}, {"steady", r.steady}};
  if (r.from_mhz) j["from_mhz"] = *r.from_mhz;
  if (r.to_mhz) j["to_mhz"] = *r.to_mhz;
  if (!r.why.empty()) j["why"] = r.why;
  return j;
}

bool is_throttle_reason(const std::string& reason) {
  static const std::set<std::string> throttling = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown",
                                                   "hw_thermal_slowdown", "hw_power_brake_slowdown"};
  return throttling.count(reason) > 0;
}

std::vector<std::string> throttled_between(const gpu::SensorReadings& start, const gpu::SensorReadings& end) {
  std::set<std::string> out;
  for (const auto* r : {&start, &end})
    if (r->clock_reasons)
      for (const auto& name : *r->clock_reasons)
        if (is_throttle_reason(name)) out.insert(name);
  const auto moved = [](const std::optional<double>& a, const std::optional<double>& b) { return a && b && *b > *a; };
  if (moved(start.power_limited_us, end.power_limited_us)) out.insert("sw_power_cap");
  if (moved(start.thermal_limited_us, end.thermal_limited_us)) out.insert("sw_thermal_slowdown");
  return {out.begin(), out.end()};
}

nlohmann::json reading_json(const gpu::SensorReadings& r) {
  nlohmann::json j = nlohmann::json::object();
  if (r.sm_clock_mhz) j["sm_clock_mhz"] = *r.sm_clock_mhz;
  if (r.mem_clock_mhz) j["mem_clock_mhz"] = *r.mem_clock_mhz;
  if (r.temperature_c) j["temperature_c"] = *r.temperature_c;
  if (r.power_w) j["power_w"] = *r.power_w;
  if (r.clock_reasons) j["clock_reasons"] = *r.clock_reasons;
  return j;
}

namespace {
std::string mhz(const std::optional<unsigned>& v) { return v ? std::to_string(*v) + " MHz" : "?"; }

// Idle yet near its maximum means a lower bound holds the clock up; otherwise an idle clock sits far below it.
std::string lock_state(const gpu::SensorReadings& r) {
  const bool idle = r.clock_reasons && std::count(r.clock_reasons->begin(), r.clock_reasons->end(), "gpu_idle");
  if (r.app_sm_clock_mhz && r.default_app_sm_clock_mhz && *r.app_sm_clock_mhz != *r.default_app_sm_clock_mhz)
    return "application clocks set to " + mhz(r.app_sm_clock_mhz) + " (default " + mhz(r.default_app_sm_clock_mhz) + ")";
  if (!idle || !r.sm_clock_mhz || !r.max_sm_clock_mhz) return "unknown (the device is not idle now)";
  if (*r.sm_clock_mhz >= 0.9 * *r.max_sm_clock_mhz) return "looks locked (idle at " + mhz(r.sm_clock_mhz) + ")";
  return "not locked (idle at " + mhz(r.sm_clock_mhz) + ")";
}
}  // namespace

std::vector<std::string> clock_state_lines(const std::optional<gpu::SensorReadings>& r, const std::string& why_absent) {
  if (!r) return {"clocks: no sensor readings (" + why_absent + ")"};
  std::string reasons;
  if (r->clock_reasons)
    for (const auto& n : *r->clock_reasons) reasons += (reasons.empty() ? "" : ", ") + n;
  const unsigned max = r->max_sm_clock_mhz.value_or(0);
  const std::string lock = max ? std::to_string(max) + "," + std::to_string(max) : "MAX,MAX";
  return {"clocks: SM " + mhz(r->sm_clock_mhz) + " now of " + mhz(r->max_sm_clock_mhz) + ", reasons now: " +
              (reasons.empty() ? "none" : reasons),
          "clock lock: " + lock_state(*r),
          "to lock: sudo nvidia-smi --lock-gpu-clocks=" + lock + " (undo: sudo nvidia-smi --reset-gpu-clocks); "
          "unlocked, run and sweep spin the GPU until its SM clock settles before timing (--settle)"};
}

}  // namespace attnbench
