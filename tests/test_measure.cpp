#include <gtest/gtest.h>

#include <cmath>

#include "attnbench/knobs.hpp"
#include "measure.hpp"
#include "registry.hpp"

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
  const auto s = collect([&] { ++calls; return 1.0; }, r);
  EXPECT_EQ(s.size(), 7u);
}

TEST(Measure, KeepsSamplingWhileNoisyUntilTheCap) {
  StopRule r;
  r.min_samples = 3;
  r.max_noise = 0.01;
  r.max_samples = 50;
  int i = 0;
  const auto s = collect([&] { return (++i % 2) ? 1.0 : 3.0; }, r);
  EXPECT_EQ(s.size(), 50u);
}

TEST(Measure, TimeoutWinsOverMinSamples) {
  StopRule r;
  r.min_samples = 1000000;
  r.timeout_s = 0.05;
  const auto s = collect([] { return 1.0; }, r);
  EXPECT_GE(s.size(), 1u);
  EXPECT_LT(s.size(), 1000000u);
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
