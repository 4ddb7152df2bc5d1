// Clock discipline: the settle rule over scripted clock readings (rises to its maximum, held below it, never
// steady, no sensor), the throttle reasons of an interval, info's lock lines, and the plumbing into rows: a
// device whose sensors report a power cap yields throttled rows with their start/end readings, a GPU without
// sensors says why, the CPU records nothing, and settles happen on the first timing and after a pause only.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "device/clocks.hpp"
#include "run/case_timing.hpp"

using namespace attnbench;

namespace {

// Readings in order (the last repeats); time advances by the spin's milliseconds.
struct ScriptedClock {
  std::deque<std::optional<unsigned>> readings;
  double now = 0;
  int spun_ms = 0;
  SettleReport settle(std::optional<unsigned> max, const SettleRule& rule = {}) {
    const auto spin = [this](int ms) { now += ms * 1e-3, spun_ms += ms; };
    const auto read = [this] {
      const auto v = readings.front();
      if (readings.size() > 1) readings.pop_front();
      return v;
    };
    return settle_sm_clock(spin, read, max, rule, [this] { return now; });
  }
};

}  // namespace

TEST(ClockSettle, StopsOnceAtMaximumAndSteady) {
  ScriptedClock c{{345, 900, 1500, 1980, 1980, 1980, 1500}};
  const SettleReport r = c.settle(1980u);
  EXPECT_TRUE(r.steady);
  EXPECT_EQ(r.from_mhz, 345u);
  EXPECT_EQ(r.to_mhz, 1980u);
  EXPECT_EQ(r.steps, 5);  // readings 900 1500 1980 1980 1980: steady on the third 1980
  EXPECT_NEAR(r.seconds, 0.1, 1e-9);
  EXPECT_TRUE(r.why.empty());
}

TEST(ClockSettle, AClockHeldBelowItsMaximumSettlesAfterHoldingSteady) {
  ScriptedClock c{{1500}};
  SettleRule rule;
  const SettleReport r = c.settle(1980u, rule);
  EXPECT_TRUE(r.steady);
  EXPECT_EQ(r.to_mhz, 1500u);
  EXPECT_GE(r.seconds, rule.locked_after_s);
  EXPECT_LT(r.seconds, rule.locked_after_s + 2 * rule.step_ms * 1e-3);
}

TEST(ClockSettle, ANeverSteadyClockIsBoundedAndSaysSo) {
  ScriptedClock c;
  for (int i = 0; i < 400; ++i) c.readings.push_back(i % 2 ? 1980u : 1400u);
  SettleRule rule;
  rule.max_seconds = 1.0;
  const SettleReport r = c.settle(1980u, rule);
  EXPECT_FALSE(r.steady);
  EXPECT_NEAR(r.seconds, 1.0, 0.05);
  EXPECT_NE(r.why.find("SM clock not steady after 1.0 s (last readings"), std::string::npos) << r.why;
}

TEST(ClockSettle, WithoutReadingsItSpinsUnwatchedAndSaysSo) {
  ScriptedClock c{{std::nullopt}};
  SettleRule rule;
  const SettleReport r = c.settle(std::nullopt, rule);
  EXPECT_FALSE(r.steady);
  EXPECT_FALSE(r.to_mhz);
  EXPECT_NE(r.why.find("no SM clock reading"), std::string::npos);
  EXPECT_NEAR(c.spun_ms * 1e-3, rule.locked_after_s, rule.step_ms * 1e-3);
}

TEST(Throttle, ReasonsAtEitherEndAndMovedLimitCounters) {
  gpu::SensorReadings a, b;
  a.clock_reasons = std::vector<std::string>{"gpu_idle", "applications_clocks_setting"};
  b.clock_reasons = std::vector<std::string>{"hw_slowdown", "sync_boost"};
  a.power_limited_us = 10.0;
  b.power_limited_us = 10.0;
  a.thermal_limited_us = 5.0;
  b.thermal_limited_us = 7.5;
  EXPECT_EQ(throttled_between(a, b), (std::vector<std::string>{"hw_slowdown", "sw_thermal_slowdown"}));
  b.power_limited_us = 11.0;
  b.clock_reasons = std::vector<std::string>{"sw_power_cap"};
  EXPECT_EQ(throttled_between(a, b), (std::vector<std::string>{"sw_power_cap", "sw_thermal_slowdown"}));
  EXPECT_TRUE(throttled_between(gpu::SensorReadings{}, gpu::SensorReadings{}).empty());
  EXPECT_FALSE(is_throttle_reason("gpu_idle"));
  EXPECT_TRUE(is_throttle_reason("hw_power_brake_slowdown"));
}

TEST(ClockInfo, LockStateFromAnIdleReading) {
  gpu::SensorReadings r;
  r.sm_clock_mhz = 345;
  r.max_sm_clock_mhz = 1980;
  r.clock_reasons = std::vector<std::string>{"gpu_idle"};
  auto lines = clock_state_lines(r, "");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "clocks: SM 345 MHz now of 1980 MHz, reasons now: gpu_idle");
  EXPECT_EQ(lines[1], "clock lock: not locked (idle at 345 MHz)");
  EXPECT_NE(lines[2].find("--lock-gpu-clocks=1980,1980"), std::string::npos);
  r.sm_clock_mhz = 1980;
  EXPECT_EQ(clock_state_lines(r, "")[1], "clock lock: looks locked (idle at 1980 MHz)");
  r.clock_reasons = std::vector<std::string>{};
  EXPECT_EQ(clock_state_lines(r, "")[1], "clock lock: unknown (the device is not idle now)");
  EXPECT_EQ(clock_state_lines(std::nullopt, "NVML did not load"),
            (std::vector<std::string>{"clocks: no sensor readings (NVML did not load)"}));
}

namespace {

// A device that times nothing real: each call takes 1 ms of a fake sampler, and its sensors are scripted.
class FakeGpu final : public Device {
 public:
  std::deque<gpu::SensorReadings> readings;  // each read_sensors() takes the next (the last repeats)
  bool has_sensors = true;
  int settles = 0;
  std::shared_ptr<int> samples = std::make_shared<int>(0);  // every sample taken, warm-up included
  Backend backend() const override { return Backend::cuda; }
  std::string name() const override { return "fake"; }
  std::map<std::string, std::string> facts() const override { return {}; }
  std::optional<double> free_memory_bytes() const override { return std::nullopt; }
  void* alloc(std::size_t) override { return nullptr; }
  void release(void*) override {}
  void upload(void*, const void*, std::size_t) override {}
  void download(void*, const void*, std::size_t) override {}
  void poison(void*, std::size_t) override {}
  void* stream() override { return nullptr; }
  void synchronize() override {}
  Support can_time(Mode, L2Mode) const override { return Support::yes(); }
  Sampler make_sampler(Mode, L2Mode, const std::function<void()>&) override {
    return [n = samples] { return ++*n, 1e-3; };
  }
  std::optional<gpu::SensorReadings> read_sensors() const override {
    if (!has_sensors) return std::nullopt;
    auto& q = const_cast<std::deque<gpu::SensorReadings>&>(readings);
    const gpu::SensorReadings r = q.front();
    if (q.size() > 1) q.pop_front();
    return r;
  }
  std::string sensors_absent() const override { return "NVML did not load"; }
  std::optional<SettleReport> settle_clocks(const SettleRule&) override {
    ++settles;
    SettleReport r;
    r.steady = true;
    r.seconds = 0.25;
    r.to_mhz = 1980;
    return r;
  }
};

gpu::SensorReadings reading(unsigned mhz, std::vector<std::string> reasons, double power_limited_us) {
  gpu::SensorReadings r;
  r.sm_clock_mhz = mhz;
  r.power_w = 650.5;
  r.clock_reasons = std::move(reasons);
  r.power_limited_us = power_limited_us;
  return r;
}

RunOptions quick_options() {
  RunOptions o;
  o.stop.min_samples = 3;
  o.stop.max_noise = 1.0;
  o.rounds = 1;
  return o;
}

}  // namespace

TEST(ClockPlumbing, ThrottledRowsCarryTheirReadingsAndReasons) {
  FakeGpu dev;
  dev.readings = {reading(1980, {}, 100.0), reading(1530, {"sw_power_cap"}, 250.0)};
  ResultRow a, b;
  a.status = b.status = "ok";
  std::vector<TimedSlot> slots = {{&a, &dev, [] {}, {}}, {&b, &dev, [] {}, {}}};
  time_slots(slots, Mode::graph, quick_options());
  for (const ResultRow* r : {&a, &b}) {
    ASSERT_TRUE(r->time_us);
    EXPECT_EQ(r->throttled, (std::vector<std::string>{"sw_power_cap"}));
    EXPECT_EQ(r->clocks["start"]["sm_clock_mhz"], 1980);
    EXPECT_EQ(r->clocks["end"]["sm_clock_mhz"], 1530);
    EXPECT_EQ(r->clocks["end"]["clock_reasons"], nlohmann::json::array({"sw_power_cap"}));
    EXPECT_DOUBLE_EQ(r->clocks["end"]["power_w"].get<double>(), 650.5);
  }
  const nlohmann::json j = row_to_json(a);
  EXPECT_EQ(j["throttled"], nlohmann::json::array({"sw_power_cap"}));
  ResultsFile f;
  f.rows = {a};
  EXPECT_NE(results_to_csv(f).find(",sw_power_cap,"), std::string::npos);
  EXPECT_EQ(clock_summary_line(f), "clocks: 0 settles (0.0 s, 0 not steady); 1 of 1 timed rows throttled (sw_power_cap)");
}

TEST(ClockPlumbing, SteadyRowsAreNotThrottledAndAGpuWithoutSensorsSaysWhy) {
  FakeGpu dev;
  dev.readings = {reading(1980, {"gpu_idle"}, 100.0)};
  ResultRow a;
  a.status = "ok";
  std::vector<TimedSlot> slots = {{&a, &dev, [] {}, {}}};
  time_slots(slots, Mode::graph, quick_options());
  EXPECT_TRUE(a.throttled.empty());
  EXPECT_FALSE(row_to_json(a).contains("throttled"));
  FakeGpu bare;
  bare.has_sensors = false;
  ResultRow b;
  b.status = "ok";
  std::vector<TimedSlot> bare_slots = {{&b, &bare, [] {}, {}}};
  time_slots(bare_slots, Mode::graph, quick_options());
  EXPECT_EQ(b.clocks, (nlohmann::json{{"sensors", "NVML did not load"}}));
  auto cpu = make_cpu_device();
  ResultRow c;
  c.status = "ok";
  std::vector<TimedSlot> cpu_slots = {{&c, cpu.get(), [] {}, {}}};
  time_slots(cpu_slots, Mode::eager, quick_options());
  ASSERT_TRUE(c.time_us);
  EXPECT_TRUE(c.clocks.is_null());
}

TEST(ClockPlumbing, WarmUpSamplesAreTakenAndDropped) {
  FakeGpu dev;
  dev.readings = {reading(1980, {}, 0.0)};
  ResultRow a;
  a.status = "ok";
  std::vector<TimedSlot> slots = {{&a, &dev, [] {}, {}}};
  RunOptions o = quick_options();
  o.warmup_s = 0.0;
  time_slots(slots, Mode::graph, o);
  ASSERT_TRUE(a.time_us);
  EXPECT_EQ(*dev.samples, a.time_us->n);  // without warm-up every sample is in the row
  a = ResultRow{};
  a.status = "ok";
  *dev.samples = 0;
  o.warmup_s = 0.02;
  time_slots(slots, Mode::graph, o);
  ASSERT_TRUE(a.time_us);
  EXPECT_GT(*dev.samples, a.time_us->n + 10);  // 20 ms of dropped samples came first
}

TEST(ClockPlumbing, SettlesOnFirstTimingAndAfterAPauseOnly) {
  RunOptions o = quick_options();
  o.settle_gap_s = 3600;
  FakeGpu dev;
  ClockDiscipline d(o);
  const nlohmann::json first = d.before_timing(dev);
  EXPECT_EQ(first["steady"], true);
  EXPECT_EQ(first["to_mhz"], 1980);
  d.after_timing(dev);
  EXPECT_TRUE(d.before_timing(dev).is_null());  // within the gap
  EXPECT_EQ(dev.settles, 1);
  o.settle_gap_s = 0;  // every pause is long enough
  EXPECT_FALSE(d.before_timing(dev).is_null());
  EXPECT_EQ(d.summary()["settles"], 2);
  EXPECT_DOUBLE_EQ(d.summary()["seconds"].get<double>(), 0.5);
  o.settle_s = 0;
  EXPECT_TRUE(d.before_timing(dev).is_null());
  auto cpu = make_cpu_device();
  o.settle_s = 3;
  EXPECT_TRUE(d.before_timing(*cpu).is_null());  // nothing to settle on the CPU
}

TEST(KernelGlobs, CommaListSelectsEachPatternAndNamesAMissingOne) {
  EXPECT_EQ(glob_list("cuda.*,cudnn.*"), (std::vector<std::string>{"cuda.*", "cudnn.*"}));
  EXPECT_EQ(glob_list(",cpu.*,,"), (std::vector<std::string>{"cpu.*"}));
  EXPECT_TRUE(glob_list_match("cuda.*,cpu.*", "cpu.unified"));
  EXPECT_FALSE(glob_list_match("cuda.*,cudnn.*", "cpu.unified"));
  const auto r = testcli::run_cli("run --group decode --kernel 'cpu.*,nope.*' --gate-only -o x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("no kernel matches 'nope.*'"), std::string::npos) << r.output;
}
