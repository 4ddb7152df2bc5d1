// The type config and the feature fields as declared today: 8-bit storage types and attention features are known
// to the shape files and the CLI, and today's kernels decline them by name (no input is built for a case every
// kernel declines).
#include <gtest/gtest.h>

#include <map>

#include "attnbench/backends.hpp"
#include "attnbench/reference.hpp"
#include "cli_helpers.hpp"
#include "inputs.hpp"

using namespace attnbench;

TEST(Types, KernelsDeclineEightBitStorageByName) {
  AttentionProblem p;
  p.q_lens = {1};
  p.kv_lens = {64};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  const KnobValues knobs = KnobValues::resolve({}, false);
  for (DType d : {DType::e4m3, DType::e5m2}) {
    p.dtype = d;
    const Support s = make_cpu_unified()->supports(p, knobs);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.reason.find(std::string("dtype ") + dtype_name(d) + ": this kernel stores Q, K/V and O in fp16 or bf16"),
              std::string::npos)
        << s.reason;
  }
  p.dtype = DType::bf16;
  EXPECT_TRUE(make_cpu_unified()->supports(p, knobs).ok);
}

TEST(Types, Fp8ShapeRowsAreDeclinedRowsThroughTheBinary) {
  const std::string shapes = testcli::write_text(
      "fp8_shapes.json",
      R"({"group": "g8", "shapes": [{"name": "s", "heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 64,
          "seqlen_q": 1, "dtypes": ["e4m3", "bf16"]}]})");
  const std::string out = testcli::tmp_path("fp8.json");
  const auto r = testcli::run_cli("run --shapes " + shapes + " --backend cpu --mode eager --gate-only -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  const auto doc = testcli::read_json(out);
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_EQ(doc["rows"][0]["dtype"], "e4m3");
  EXPECT_EQ(doc["rows"][0]["status"], "declined");
  EXPECT_NE(doc["rows"][0]["reason"].get<std::string>().find("fp16 or bf16 only"), std::string::npos);
  EXPECT_EQ(doc["rows"][1]["status"], "ok");
  const auto bad = testcli::run_cli("run --shapes " + shapes + " --dtype fp8 -o " + out);
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(testcli::contains(bad.output, "bf16, fp16, e4m3, e5m2")) << bad.output;
}

// Feature fields are declared and validated now; every kernel declines a feature it does not implement by name,
// and the reference refuses to gate one, so no problem is computed without its feature.
TEST(Features, ShapeFieldsParseValidateAndEveryKernelDeclines) {
  const std::string shapes = testcli::write_text(
      "feat_shapes.json",
      R"({"group": "gf", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 64, "dtypes": ["bf16"]},
          "shapes": [{"name": "win", "window_left": 16}, {"name": "cap", "softcap": 50},
                     {"name": "alibi", "alibi_slopes": [0.5, 0.25]}, {"name": "sink", "sinks": [1, 2]},
                     {"name": "qq", "seqlen_q": 2, "qq_bias": [[0, 1], [2, 3]]}, {"name": "kv8", "k_scale": 0.5}]})");
  const std::string out = testcli::tmp_path("feat.json");
  const auto r = testcli::run_cli("run --shapes " + shapes + " --backend all --mode eager --gate-only -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  const auto doc = testcli::read_json(out);
  const std::map<std::string, std::string> field = {{"win", "window_left"}, {"cap", "softcap"},
                                                    {"alibi", "alibi_slopes"}, {"sink", "sinks"},
                                                    {"qq", "qq_bias"}, {"kv8", "k_scale"}};
  ASSERT_FALSE(doc["rows"].empty());
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["status"], "declined") << row.dump();
    const std::string why = row["reason"];
    const std::string want = "feature '" + field.at(row["shape"]) + "'";
    EXPECT_TRUE(testcli::contains(why, want) || testcli::contains(why, "no CUDA device")) << why;
    EXPECT_TRUE(row["dims"].contains("features")) << row.dump();
  }
  auto bad = [&](const std::string& field_json, const std::string& want) {
    const std::string f = testcli::write_text(
        "feat_bad.json", R"({"shapes": [{"name": "x", "heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 64, )" +
                             field_json + "}]}");
    const auto b = testcli::run_cli("run --shapes " + f + " -o " + out);
    EXPECT_EQ(b.code, 2) << field_json << ": " << b.output;
    EXPECT_TRUE(testcli::contains(b.output, want)) << field_json << ": " << b.output;
  };
  bad(R"("window_left": -2)", "field 'window_left'");
  bad(R"("softcap": -1)", "field 'softcap': must be a finite number > 0");
  bad(R"("alibi_slopes": [1, 2, 3])", "field 'alibi_slopes': expected 2 values (one per query head), got 3");
  bad(R"("sinks": "yes")", "field 'sinks': expected a non-empty list of numbers");
  bad(R"("qq_bias": [[1, 2], [3]])", "field 'qq_bias': expected a square list of rows");
  bad(R"("v_scale": 0)", "field 'v_scale': must be a finite number > 0");
}

TEST(Features, ReferenceRefusesFeaturesItDoesNotCompute) {
  AttentionProblem p;
  p.q_lens = {1};
  p.kv_lens = {64};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  p.features.softcap = 30.f;
  const HostInputs in = build_inputs(p, 1);
  std::vector<float> out(2 * 64);
  EXPECT_THROW(reference::paged_attention(in.params(), {{0, 0}}, out.data()), std::invalid_argument);
}
