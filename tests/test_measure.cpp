#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <thread>

#include "attnbench/knobs.hpp"
#include "cases/registry.hpp"
#include "core/measure.hpp"

using namespace attnbench;

TEST(Measure, SummaryStatistics) {
  const Stats s = summarize({5, 1, 3, 2, 4});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.stdev, std::sqrt(2.5), 1e-12);
  const Stats e = summarize({2, 4});
  EXPECT_DOUBLE_EQ(e.median, 3);
  EXPECT_DOUBLE_EQ(e.q1, 2.5);
}

TEST(Measure, StopsAtMinSamplesWhenQuiet) {
  StopRule r;
  r.min_samples = 7;
  r.max_noise = 0.5;
  int calls = 0;
  const Measurement m = measure([&] { ++calls; return 1.0; }, r);
  EXPECT_EQ(m.samples.size(), 7u);
  EXPECT_TRUE(m.settled);
  EXPECT_EQ(m.unsettled, "");
}

TEST(Measure, KeepsSamplingWhileNoisyUntilTheCap) {
  StopRule r;
  r.min_samples = 3;
  r.max_noise = 0.01;
  r.max_samples = 50;
  int i = 0;
  const Measurement m = measure([&] { return (++i % 2) ? 1.0 : 3.0; }, r);
  EXPECT_EQ(m.samples.size(), 50u);
  EXPECT_FALSE(m.settled);
  // 25 ones and 25 threes: mean 2, sample stdev 1.0102.
  EXPECT_EQ(m.unsettled, "sample cap 50 reached with relative stdev 0.505 > max-noise 0.01 (n=50)");
}

TEST(Measure, SampleCapBelowMinSamplesIsNamed) {
  StopRule r;
  r.min_samples = 100;
  r.max_samples = 10;
  const Measurement m = measure([] { return 1.0; }, r);
  EXPECT_EQ(m.samples.size(), 10u);
  EXPECT_FALSE(m.settled);
  EXPECT_EQ(m.unsettled, "sample cap 10 reached with n=10 of min 100");
}

namespace {
// A 1 ms sample that throws once it has been called `limit` times: far more than any timeout under test
// allows, so a loop that ignores its timeout fails instead of running on.
std::function<double()> sleepy_sampler(int limit, std::function<double(int)> value) {
  auto calls = std::make_shared<int>(0);
  return [=] {
    if (++*calls > limit) throw std::runtime_error("the timeout did not stop the loop");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return value(*calls);
  };
}
}  // namespace

TEST(Measure, TimeoutWinsOverMinSamples) {
  StopRule r;
  r.min_samples = 1000000;
  r.max_samples = 1000000000;  // the cap cannot be what stops it
  r.timeout_s = 0.05;
  Measurement m;
  ASSERT_NO_THROW(m = measure(sleepy_sampler(5000, [](int) { return 1.0; }), r));
  EXPECT_GE(m.samples.size(), 1u);
  EXPECT_FALSE(m.settled);
  const std::string prefix = "timeout 0.05 s reached with n=" + std::to_string(m.samples.size()) + " of min 1000000";
  EXPECT_EQ(m.unsettled, prefix);
}

TEST(Measure, NoisyAtTheTimeoutIsNamed) {
  StopRule r;
  r.min_samples = 2;
  r.max_noise = 0.01;
  r.max_samples = 1000000000;
  r.timeout_s = 0.2;
  Measurement m;
  ASSERT_NO_THROW(m = measure(sleepy_sampler(5000, [](int i) { return i % 2 ? 1.0 : 3.0; }), r));
  EXPECT_FALSE(m.settled);
  EXPECT_EQ(m.unsettled.rfind("timeout 0.2 s reached with relative stdev ", 0), 0u) << m.unsettled;
  EXPECT_NE(m.unsettled.find(" > max-noise 0.01 (n=" + std::to_string(m.samples.size()) + ")"), std::string::npos)
      << m.unsettled;
}

TEST(Measure, CallsPerSample) {
  EXPECT_EQ(calls_per_sample(1e-5, 1e-3), 100);
  EXPECT_EQ(calls_per_sample(1.0, 1e-3), 1);
  EXPECT_EQ(calls_per_sample(1e-9, 1e-3, 50), 50);
}

TEST(Knobs, DefaultsEnvironmentAndOverrides) {
  setenv("ATTNBENCH_SM90_NARROW_WARPS", "8", 1);
  auto k = KnobValues::resolve();
  EXPECT_EQ(k.get("ATTNBENCH_SM90_NARROW_WARPS"), "8");
  k = KnobValues::resolve({{"ATTNBENCH_SM90_NARROW_WARPS", "4"}});
  EXPECT_EQ(k.get_int("ATTNBENCH_SM90_NARROW_WARPS"), 4);
  unsetenv("ATTNBENCH_SM90_NARROW_WARPS");
  EXPECT_EQ(KnobValues::resolve({}, false).get("ATTNBENCH_3D_SPLITS"), "0");
  EXPECT_EQ(k.all().size(), knob_table().size());
}

TEST(Knobs, BadNamesAndValuesAreNamed) {
  EXPECT_THROW(KnobValues::resolve({{"ATTNBENCH_NOPE", "1"}}), std::invalid_argument);
  EXPECT_NE(check_knob("ATTNBENCH_NOPE", "1").find("ATTNBENCH_3D_SPLITS"), std::string::npos);
  EXPECT_NE(check_knob("ATTNBENCH_SM90_NARROW_WARPS", "6").find("4|8"), std::string::npos);
  EXPECT_NE(check_knob("ATTNBENCH_3D_SPLITS", "-1"), "");
  EXPECT_EQ(check_knob("ATTNBENCH_3D_SPLITS", "12"), "");
  setenv("ATTNBENCH_2D_GRAPH", "yes", 1);
  EXPECT_THROW(KnobValues::resolve(), std::invalid_argument);
  unsetenv("ATTNBENCH_2D_GRAPH");
}

TEST(Registry, GlobAndTable) {
  EXPECT_TRUE(glob_match("cpu.*", "cpu.unified"));
  EXPECT_TRUE(glob_match("*", "cuda.unified"));
  EXPECT_TRUE(glob_match("c?u.unified", "cpu.unified"));
  EXPECT_FALSE(glob_match("cuda.*", "cpu.unified"));
  bool has_cpu = false;
  for (const auto& k : kernel_registry()) has_cpu = has_cpu || k.name == "cpu.unified";
  EXPECT_TRUE(has_cpu);
}
