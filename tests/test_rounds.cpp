// Interleaved rounds and the control pair: the round schedule (samplers alternating sample by sample, the order
// rotated by one each round, the stop rule split over the rounds, a quiet sampler sampling on beside a noisy
// one), the median of round medians and the spread, and a CLI run whose rows carry their rounds, with the control
// copy beside the kernel it repeats.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "core/measure.hpp"
#include "result_rows.hpp"
#include "results/control_pair.hpp"
#include "results/results.hpp"

using namespace attnbench;
using namespace testcli;
using testrows::timed_row;

TEST(Rounds, SamplersAlternateSampleBySampleInRotatedOrder) {
  std::vector<int> order;
  std::vector<Sampler> samplers;
  for (int k = 0; k < 3; ++k)
    samplers.push_back([&order, k] {
      order.push_back(k);
      return 1.0 + k;
    });
  StopRule rule;
  rule.min_samples = 12;
  rule.max_noise = 1.0;
  const auto out = measure_rounds(samplers, rule, 4);
  std::vector<int> expected;
  for (int r = 0; r < 4; ++r)
    for (int rep = 0; rep < 3; ++rep)  // 3 samples per round: 12 / 4
      for (int i = 0; i < 3; ++i) expected.push_back((r + i) % 3);
  EXPECT_EQ(order, expected);
  ASSERT_EQ(out.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(out[k].round_medians.size(), 4u);
    EXPECT_EQ(out[k].samples.size(), 12u);
    EXPECT_DOUBLE_EQ(out[k].median, 1.0 + k);
    EXPECT_TRUE(out[k].settled);
  }
}

TEST(Rounds, AQuietSamplerKeepsSamplingBesideANoisyOne) {
  // Sampler 0 alternates 1, 3 (never within max-noise); sampler 1 is constant. Sampler 1 goes on sampling while 0
  // has not met its rule, so both take every round's cap of samples under the same conditions.
  int calls = 0;
  const Sampler noisy = [&calls] { return ++calls % 2 ? 1.0 : 3.0; };
  const Sampler quiet = [] { return 2.0; };
  StopRule rule;
  rule.min_samples = 4;
  rule.max_noise = 0.05;
  rule.max_samples = 40;
  rule.timeout_s = 100;
  const auto out = measure_rounds({noisy, quiet}, rule, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].samples.size(), 40u);  // the round cap, 40 / 2, in each of 2 rounds
  EXPECT_EQ(out[1].samples.size(), 40u);
  EXPECT_FALSE(out[0].settled);
  EXPECT_NE(out[0].unsettled.find("round 1 of 2: sample cap 20 reached"), std::string::npos) << out[0].unsettled;
  EXPECT_TRUE(out[1].settled);
}

TEST(Rounds, MedianOfRoundMediansAndSpread) {
  // Round r's samples are all 10 + r, except round 2, slow: 40. The median of the round medians ignores it.
  int round = 0, calls = 0;
  const Sampler s = [&] {
    const double v = round == 2 ? 40.0 : 10.0 + round;
    if (++calls == 3) calls = 0, ++round;
    return v;
  };
  StopRule rule;
  rule.min_samples = 15;
  rule.max_noise = 0.0;  // each round stops at its 3 samples only because all three are equal
  const auto out = measure_rounds({s}, rule, 5);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].round_medians, (std::vector<double>{10, 11, 40, 13, 14}));
  EXPECT_DOUBLE_EQ(out[0].median, 13.0);
  EXPECT_DOUBLE_EQ(out[0].spread, (40.0 - 10.0) / 13.0);
  const Stats st = rounded_stats(out[0]);
  EXPECT_DOUBLE_EQ(st.median, 13.0);
  EXPECT_EQ(st.n, 15);
  EXPECT_DOUBLE_EQ(st.min, 10.0);
}

TEST(Rounds, TheTimeoutBoundsTheWholeMeasurement) {
  // A sample of 30 ms against a 50 ms timeout in 5 rounds (10 ms each): the first round takes one sample and
  // spends 60% of the timeout, the second one more (5 ms were its share), and none is left: 2 rounds, not 5 x 30 ms.
  const auto slow = [] {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(30)) {
    }
    return 0.03;
  };
  int quick_calls = 0;
  const Sampler quick = [&quick_calls] { return ++quick_calls, 1e-6; };
  StopRule rule;
  rule.min_samples = 20;
  rule.max_noise = 0.05;
  rule.timeout_s = 0.05;
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = measure_rounds({slow, quick}, rule, 5);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].round_medians.size(), 2u);
  EXPECT_LE(out[0].samples.size(), 2u);
  EXPECT_FALSE(out[0].settled);
  EXPECT_EQ(out[0].unsettled.rfind("round 1 of 5: timeout 0.01 s reached with n=1", 0), 0u) << out[0].unsettled;
  // The quick one settles every round; the slow one's rounds bound the time: 2 samples of 30 ms, not 5.
  EXPECT_TRUE(out[1].settled) << out[1].unsettled;
  EXPECT_EQ(out[1].round_medians.size(), 5u);
  EXPECT_LT(took, 0.12) << "5 rounds of one 30 ms sample would take 0.15 s";
  // A lone slow sampler that spent everything: its row says after how many rounds it stopped.
  rule.timeout_s = 0.02;
  const auto alone = measure_rounds({slow}, rule, 5);
  EXPECT_EQ(alone[0].round_medians.size(), 1u);
  EXPECT_EQ(alone[0].unsettled.rfind("round 1 of 5: timeout 0.004 s reached with n=1", 0), 0u) << alone[0].unsettled;
}

TEST(Rounds, TheStopRuleIsSplitOverTheRounds) {
  StopRule rule;
  rule.min_samples = 20;
  rule.timeout_s = 10;
  rule.max_samples = 2000;
  const StopRule r = round_rule(rule, 5);
  EXPECT_EQ(r.min_samples, 4);
  EXPECT_DOUBLE_EQ(r.timeout_s, 2.0);
  EXPECT_EQ(r.max_samples, 400);
  EXPECT_EQ(round_rule(rule, 10).min_samples, 3);  // at least 3 per round
  EXPECT_EQ(round_rule(rule, 1).min_samples, 20);
}

TEST(Rounds, ControlRowsRepeatTheFirstKernelWithTheirOwnRounds) {
  const std::string shapes = write_text(
      "rounds_shapes.json",
      R"({"group": "tr", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "dtypes": ["bf16"]},
          "shapes": [{"name": "p", "seqlen_k": 40}]})");
  const std::string out = tmp_path("rounds.json");
  const auto r = run_cli("run --shapes " + shapes + " --backend cpu --kernel cpu.unified --mode eager --control "
                         "--rounds 3 --min-samples 6 --no-progress -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto rows = read_json(out)["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["kernel"], "cpu.unified");
  EXPECT_EQ(rows[1]["kernel"], "cpu.unified#control");
  for (const auto& row : rows) {
    EXPECT_EQ(row["status"], "ok") << row.dump();
    EXPECT_EQ(row["rounds"]["count"], 3);
    EXPECT_EQ(row["rounds"]["medians_us"].size(), 3u);
    EXPECT_GE(row["time_us"]["n"].get<int>(), 6);
    // The control's repro runs the kernel it repeats.
    EXPECT_NE(row["repro"].get<std::string>().find("--kernel cpu.unified"), std::string::npos) << row["repro"];
    EXPECT_EQ(row["repro"].get<std::string>().find("#control"), std::string::npos) << row["repro"];
  }
  const auto control = read_json(out)["provenance"]["control"];
  EXPECT_EQ(control["kernel"], "cpu.unified");
  EXPECT_EQ(control["pairs"], 1);
  EXPECT_TRUE(contains(r.output, "control pair: 1 rows of cpu.unified#control / cpu.unified, worst ratio ")) << r.output;
  // The control's name fits the kernel column: the mode column starts at the same place on each table line.
  std::istringstream lines(r.output);
  std::string header, line;
  while (std::getline(lines, header) && header.rfind("group", 0) != 0) continue;  // past any warning lines
  ASSERT_NE(header.find("  mode"), std::string::npos) << r.output;
  int table_rows = 0;
  while (std::getline(lines, line) && line.rfind("tr ", 0) == 0) {
    EXPECT_EQ(line.find("  eager") + 2, header.find("  mode") + 2) << header << "\n" << line;
    ++table_rows;
  }
  EXPECT_EQ(table_rows, 2) << r.output;
}

TEST(ControlPair, SummaryIsTheWorstRatioOfThePairs) {
  const std::vector<ResultRow> rows = {
      timed_row("k", "a", "graph", 100), timed_row("k#control", "a", "graph", 105), timed_row("k", "b", "graph", 200),
      timed_row("k#control", "b", "graph", 196), timed_row("other", "a", "graph", 50)};
  const auto s = control_pair_summary(rows);
  EXPECT_EQ(s["kernel"], "k");
  EXPECT_EQ(s["pairs"], 2);
  EXPECT_DOUBLE_EQ(s["worst_ratio"].get<double>(), 1.05);
  EXPECT_NEAR(s["noise_floor"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(s["median_abs_diff"].get<double>(), 0.035, 1e-12);
  EXPECT_TRUE(control_pair_summary({timed_row("k", "a", "graph", 100)}).is_null());
}

TEST(ControlPair, CompareCallsADifferenceInsideTheNoiseFloorSame) {
  ResultsFile base, now;
  base.rows = {timed_row("k", "a", "graph", 100)};
  now.rows = {timed_row("k", "a", "graph", 106)};
  const std::string b = write_text("cp_base.json", results_to_json(base).dump());
  const std::string plain = write_text("cp_new.json", results_to_json(now).dump());
  now.provenance["control"] =
      control_pair_summary({timed_row("k", "a", "graph", 100), timed_row("k#control", "a", "graph", 108)});
  const std::string floored = write_text("cp_new_floor.json", results_to_json(now).dump());
  const auto slow = run_cli("compare " + b + " " + plain);
  EXPECT_TRUE(contains(slow.output, "SLOW 1")) << slow.output;
  const auto same = run_cli("compare " + b + " " + floored);
  EXPECT_TRUE(contains(same.output, "threshold raised to 8%")) << same.output;
  EXPECT_TRUE(contains(same.output, "SAME 1")) << same.output;
}
