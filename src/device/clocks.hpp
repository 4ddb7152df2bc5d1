// Clock discipline: bring the GPU's clocks to a steady state before timing (a spin load until the SM clock is at
// its maximum and stable, bounded in time), and record what the sensors said at the start and end of each row.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnbench/gpu_runtime.hpp"

namespace attnbench {

// When the SM clock counts as settled: the last `steady_steps` readings agree within `tolerance` (relative) and
// the clock is within `near_max` of its maximum, or has held steady for `locked_after_s` (a clock held below
// its maximum by a lock or a power limit does not rise further).
struct SettleRule {
  double max_seconds = 3.0;  // bound on the whole settle
  int step_ms = 20;          // spin load between two readings
  int steady_steps = 3;
  double tolerance = 0.01;
  double near_max = 0.97;
  double locked_after_s = 0.3;
};

struct SettleReport {
  double seconds = 0;
  int steps = 0;
  std::optional<unsigned> from_mhz, to_mhz;  // absent without sensors
  bool steady = false;                       // false: the bound was hit, or there is no clock to watch
  std::string why;                           // "" when steady; else why not
};

// Alternates spin(step_ms) and read_sm_mhz() until the rule holds or max_seconds passed (now_s: seconds on a
// monotonic clock). Without readings it spins for locked_after_s and reports why it could not watch.
SettleReport settle_sm_clock(const std::function<void(int ms)>& spin,
                             const std::function<std::optional<unsigned>()>& read_sm_mhz,
                             std::optional<unsigned> max_mhz, const SettleRule& rule,
                             const std::function<double()>& now_s);

nlohmann::json settle_json(const SettleReport& r);

// Clock reasons that mean the device ran below the clock it would otherwise have had: a power or thermal limit
// or a hardware slowdown (idle, application clocks and sync boost are not throttling).
bool is_throttle_reason(const std::string& reason);

// The throttle reasons of an interval from its two readings: those active at either end, plus sw_power_cap /
// sw_thermal_slowdown when the cumulative power / thermal limit counters moved in between. Sorted, unique.
std::vector<std::string> throttled_between(const gpu::SensorReadings& start, const gpu::SensorReadings& end);

// One reading as a row fact: {sm_clock_mhz, mem_clock_mhz, temperature_c, power_w, clock_reasons}, absent
// fields left out.
nlohmann::json reading_json(const gpu::SensorReadings& r);

// `attnbench info`'s clock lines: the SM clock now against its maximum, the application clocks, the reasons,
// whether the clocks look locked (the lock itself cannot be read back) and how to lock them.
std::vector<std::string> clock_state_lines(const std::optional<gpu::SensorReadings>& r, const std::string& why_absent);

}  // namespace attnbench
