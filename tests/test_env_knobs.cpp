// ATTNBENCH_* environment variables that are neither knobs nor the project's other variables are warned about,
// naming the nearest known name: a misspelled knob must not be ignored silently.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "attnbench/knobs.hpp"

using namespace attnbench;

TEST(EnvKnobs, OnlyUnknownAttnbenchVariablesAreWarnedWithTheNearestName) {
  const auto w = unknown_environment_warnings({"PATH=/usr/bin", "ATTNBENCH_SHAPES_DIR=/x", "ATTNBENCH_BIN=/b",
                                               "ATTNBENCH_CUDA=OFF", "ATTNBENCH_3D_SPLITS=2", "MY_ATTNBENCH_X=1",
                                               "ATTNBENCH_SM90_STAGE=3", "ATTNBENCH_GATED_FUSE_GAT=1", "ATTNBENCH_X"});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NE(w[0].find("ATTNBENCH_SM90_STAGE "), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("did you mean ATTNBENCH_SM90_STAGES?"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("did you mean ATTNBENCH_GATED_FUSE_GATE?"), std::string::npos) << w[1];
  EXPECT_NE(w[2].find("ATTNBENCH_X "), std::string::npos) << w[2];
}

TEST(EnvKnobs, EveryKnobAndKnownVariableIsAccepted) {
  std::vector<std::string> env;
  for (const auto& k : knob_table()) env.push_back(k.name + "=" + k.default_value);
  for (const auto& n : known_non_knob_variables()) env.push_back(n + "=1");
  EXPECT_TRUE(unknown_environment_warnings(env).empty());
  for (const char* n : {"ATTNBENCH_SHAPES_DIR", "ATTNBENCH_BIN", "ATTNBENCH_CUDA"})
    EXPECT_NE(std::find(known_non_knob_variables().begin(), known_non_knob_variables().end(), n),
              known_non_knob_variables().end())
        << n;
}

// The table's three value syntaxes, shown in `list --knobs` and checked with the knob and the value named: one of a
// set (or an integer), a comma list of a set (each once, in order), and one of a set or an integer.
TEST(EnvKnobs, ListAndOneOrIntegerKnobsAreCheckedAndShown) {
  const KnobSpec* heur = find_knob("ATTNBENCH_CUDNN_HEURISTICS");
  const KnobSpec* plan = find_knob("ATTNBENCH_CUDNN_PLAN");
  ASSERT_NE(heur, nullptr);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(heur->syntax, KnobSyntax::list);
  EXPECT_EQ(plan->syntax, KnobSyntax::one_or_integer);
  EXPECT_EQ(knob_values_text(*heur), "a|b|fallback[,...]");
  EXPECT_EQ(knob_values_text(*plan), "first|autotune|N");
  EXPECT_EQ(knob_values_text(*find_knob("ATTNBENCH_3D_SPLITS")), "integer");
  EXPECT_EQ(knob_values_text(*find_knob("ATTNBENCH_SM90_NARROW_WARPS")), "4|8|4x32");

  for (const char* ok : {"a", "b", "fallback", "a,fallback", "fallback,b,a"})
    EXPECT_EQ(check_knob(heur->name, ok), "") << ok;
  const std::pair<const char*, const char*> bad_lists[] = {
      {"c", "has 'c', not in a|b|fallback"}, {"A", "has 'A', not in"},     {"a,,b", "has an empty item"},
      {"", "has an empty item"},             {"a,", "has an empty item"}, {"a,b,a", "lists 'a' twice"}};
  for (const auto& [value, want] : bad_lists) {
    const std::string err = check_knob(heur->name, value);
    EXPECT_NE(err.find("knob ATTNBENCH_CUDNN_HEURISTICS: value '" + std::string(value) + "' "), std::string::npos)
        << err;
    EXPECT_NE(err.find(want), std::string::npos) << err;
  }

  for (const char* ok : {"first", "autotune", "0", "12"}) EXPECT_EQ(check_knob(plan->name, ok), "") << ok;
  for (const char* bad : {"best", "-1", "1.5", "", "all", "1234567890"}) {
    const std::string err = check_knob(plan->name, bad);
    EXPECT_EQ(err, "knob ATTNBENCH_CUDNN_PLAN: value '" + std::string(bad) +
                       "' is neither first|autotune nor a non-negative integer");
  }
  EXPECT_THROW(KnobValues::resolve({{"ATTNBENCH_CUDNN_HEURISTICS", "a,a"}}, false), std::invalid_argument);
  EXPECT_THROW(KnobValues::resolve({{"ATTNBENCH_CUDNN_PLAN", "fastest"}}, false), std::invalid_argument);
  const auto w = unknown_environment_warnings({"ATTNBENCH_CUDNN_PLANS=1", "ATTNBENCH_CUDNN=ON"});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("did you mean ATTNBENCH_CUDNN_PLAN?"), std::string::npos) << w[0];
}
