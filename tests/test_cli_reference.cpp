// --reference through the CLI: where the reference ran, what its rows cover and what it cost are in every gated
// row and in the provenance, and the run's table ends with the summary line; --reference gpu without a CUDA device,
// and an unknown value, are usage errors naming the option. (The GPU side: tests/gpu/test_cuda_faults.cpp.)
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_helpers.hpp"

namespace {

using testcli::contains;
using testcli::run_cli;
using testcli::tmp_path;

const char* kShapes = R"({"group": "refs", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "dtypes": ["bf16"]},
  "shapes": [{"name": "prefill", "seqlens": [[130, 300], [17, 17]]}, {"name": "wide", "batch": 2, "seqlen_q": 1,
             "seqlen_k": 700, "scores": "wide"}]})";

TEST(CliReference, RowsSayWhereTheReferenceRanAndWhatItCovered) {
  const std::string out = tmp_path("refs_results.json");
  const auto r = run_cli("run --shapes " + testcli::write_text("refs.json", kShapes) +
                         " --backend cpu --mode eager --gate-only --reference cpu -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "reference: 0 case(s) on the GPU (every row), 2 on the CPU")) << r.output;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["status"], "ok") << row.dump();
    EXPECT_EQ(row["gate"]["reference"], "cpu");
    EXPECT_GE(row["gate"]["reference_ms"].get<double>(), 0.0);
    const auto& c = row["gate"]["coverage"];
    EXPECT_EQ(c["tile_heads"][0], c["tile_heads"][1]);
    EXPECT_EQ(c["sequence_heads"][0], c["sequence_heads"][1]);
  }
  EXPECT_EQ(j["rows"][0]["gate"]["coverage"]["tile_heads"][1], (3 + 1) * 4);  // 130 rows: 3 tiles; 17: 1
  EXPECT_EQ(j["rows"][1]["dims"]["scores"], "wide");
  EXPECT_EQ(j["provenance"]["reference"]["cpu_cases"], 2);
  EXPECT_EQ(j["provenance"]["reference"]["complete_cases"], 2);
  EXPECT_GT(j["provenance"]["reference"]["wall_s"].get<double>(), 0.0);
  EXPECT_NE(j["rows"][0]["repro"].get<std::string>().find("--reference cpu"), std::string::npos);
}

TEST(CliReference, ImpossibleOrUnknownPlacesAreUsageErrors) {
  const std::string shapes = testcli::write_text("refs.json", kShapes);
  const auto bad = run_cli("run --shapes " + shapes + " --backend cpu --reference tpu -o " + tmp_path("x.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.output, "--reference: 'tpu' is not auto|cpu|gpu")) << bad.output;
  const auto gpu = run_cli("run --shapes " + shapes + " --backend cpu --reference gpu -o " + tmp_path("y.json"),
                           "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(gpu.code, 2) << gpu.output;
  EXPECT_TRUE(contains(gpu.output, "--reference gpu:")) << gpu.output;
}

TEST(CliReference, AnUnknownScoresValueNamesTheField) {
  const std::string shapes = testcli::write_text(
      "bad_scores.json", R"({"group": "b", "shapes": [{"name": "s", "heads": 2, "kv_heads": 1, "head_size": 64,
        "seqlen_k": 64, "scores": "huge"}]})");
  const auto r = run_cli("run --shapes " + shapes + " --backend cpu -o " + tmp_path("z.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.output, "field 'scores': expected \"normal\" or \"wide\", got \"huge\"")) << r.output;
}

}  // namespace
