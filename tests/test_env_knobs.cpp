// ATTNBENCH_* environment variables that are neither knobs nor the project's other variables are warned about,
// naming the nearest known name: a misspelled knob must not be ignored silently.
#include <gtest/gtest.h>

#include <algorithm>

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
