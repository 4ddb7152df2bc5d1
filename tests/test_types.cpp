// The type config and the feature fields: 8-bit storage types and attention features are known to the shape files
// and the CLI; cpu.unified computes the features and 8-bit caches, the other kernels decline them by name (no input
// is built for a case every kernel declines).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attnbench/backends.hpp"
#include "attnbench/reference.hpp"
#include "cases/inputs.hpp"
#include "cli_helpers.hpp"

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
    p.types = AttentionTypes::all(d);
    const Support s = make_cpu_unified()->supports(p, knobs);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.reason.find(std::string("dtype ") + dtype_name(d) + ": cpu.unified stores O in fp16 or bf16"),
              std::string::npos)
        << s.reason;
  }
  p.types = AttentionTypes::all(DType::bf16);
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
  EXPECT_NE(doc["rows"][0]["reason"].get<std::string>().find("stores O in fp16 or bf16"), std::string::npos)
      << doc["rows"][0].dump();
  EXPECT_EQ(doc["rows"][1]["status"], "ok");
  const auto bad = testcli::run_cli("run --shapes " + shapes + " --dtype fp8 -o " + out);
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(testcli::contains(bad.output, "bf16, fp16, e4m3, e5m2")) << bad.output;
}

// The type config: Q, K/V and O each have a storage dtype; buffers, the work model and the memory estimate are
// sized from them, and today's kernels and the reference decline anything but one 16-bit dtype, by name.
TEST(Types, ConfigNamesUniformAndMixedTypes) {
  EXPECT_EQ(AttentionTypes::all(DType::f16).name(), "fp16");
  const AttentionTypes mixed{DType::bf16, DType::e4m3, DType::bf16};
  EXPECT_FALSE(mixed.uniform());
  EXPECT_EQ(mixed.name(), "bf16-e4m3-bf16");
  EXPECT_STREQ(AttentionTypes::accumulator, "fp32");
  EXPECT_EQ(dtype_bytes(DType::e5m2), 1u);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2u);
}

AttentionProblem fp8_kv_problem() {
  AttentionProblem p;
  p.q_lens = {3};
  p.kv_lens = {100};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  p.types = {DType::bf16, DType::e4m3, DType::bf16};
  return p;
}

TEST(Types, BuffersAndWorkAreSizedInBytesPerTensor) {
  const AttentionProblem p = fp8_kv_problem();
  const HostInputs in = build_inputs(p, 7);
  EXPECT_EQ(in.q.dtype(), DType::bf16);
  EXPECT_EQ(in.q.bytes(), in.q.size() * 2);
  EXPECT_EQ(in.k_cache.dtype(), DType::e4m3);
  EXPECT_EQ(in.k_cache.bytes(), in.k_cache.size());  // one byte per code
  EXPECT_THROW(in.k_cache.halves(), std::logic_error);
  // The poison of unowned slots (the tail of the last block) is exact in e4m3 too.
  const std::size_t token = static_cast<std::size_t>(p.kv_heads) * p.head_size;
  EXPECT_EQ(in.k_cache.get(100 * token), kPoisonK);
  EXPECT_EQ(in.v_cache.get(127 * token + 3), kPoisonV);
  EXPECT_NE(in.k_cache.get(99 * token), kPoisonK);
  // Q and O at 2 bytes, K and V at 1: 2 * (3 * 2 * 64) * 2 + 2 * 100 * 64 * 1.
  AttentionProblem uniform = p;
  uniform.types = AttentionTypes::all(DType::bf16);
  EXPECT_DOUBLE_EQ(attention_work(p).bytes, 2.0 * 3 * 2 * 64 * 2 + 2.0 * 100 * 64);
  EXPECT_DOUBLE_EQ(attention_work(uniform).bytes - attention_work(p).bytes, 2.0 * 100 * 64);
}

// An 8-bit cache under 16-bit Q/O: cpu.unified and the reference read it (dequantised); the reference refuses
// what no kernel stores: O unlike a 16-bit Q, an 8-bit Q over a 16-bit cache, an 8-bit O.
TEST(Types, EightBitCachesAreReadAndMixedQAndORefused) {
  const AttentionProblem p = fp8_kv_problem();
  EXPECT_TRUE(make_cpu_unified()->supports(p, KnobValues::resolve({}, false)).ok);
  const HostInputs in = build_inputs(p, 7);
  std::vector<float> out(64, std::nanf(""));
  EXPECT_NO_THROW(reference::paged_attention(in.params(), {{0, 0}}, out.data()));
  EXPECT_TRUE(std::isfinite(out[0]));
  for (const AttentionTypes& t : {AttentionTypes{DType::f16, DType::e4m3, DType::bf16},
                                  AttentionTypes{DType::e4m3, DType::bf16, DType::bf16},
                                  AttentionTypes{DType::e4m3, DType::e4m3, DType::e4m3}}) {
    AttentionParams a = in.params();
    a.types = t;
    try {
      reference::paged_attention(a, {{0, 0}}, out.data());
      ADD_FAILURE() << "the reference gated " << t.name();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("types " + t.name()), std::string::npos) << e.what();
    }
  }
}

TEST(Types, KvDtypeShapeFieldLabelsRowsAndListsTypes) {
  const std::string shapes = testcli::write_text(
      "kv8_shapes.json",
      R"({"group": "gk", "shapes": [{"name": "s", "heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 64,
          "seqlen_q": 1, "dtypes": ["bf16"], "kv_dtype": "e5m2"}]})");
  const auto list = testcli::run_cli("list --cases --json --shapes " + shapes);
  ASSERT_EQ(list.code, 0) << list.output;
  const auto doc = nlohmann::json::parse(list.output.substr(list.output.find('{')));
  const auto& t = doc["cases"][0]["types"];
  EXPECT_EQ(doc["cases"][0]["dtype"], "bf16-e5m2-bf16");
  EXPECT_EQ(t["q"], "bf16");
  EXPECT_EQ(t["kv"], "e5m2");
  EXPECT_EQ(t["o"], "bf16");
  EXPECT_EQ(t["acc"], "fp32");
  const std::string out = testcli::tmp_path("kv8.json");
  const auto r = testcli::run_cli("run --shapes " + shapes + " --backend cpu --mode eager --gate-only -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  const auto rows = testcli::read_json(out)["rows"];
  ASSERT_FALSE(rows.empty());
  for (const auto& row : rows) {
    EXPECT_EQ(row["dtype"], "bf16-e5m2-bf16");
    EXPECT_EQ(row["status"], "ok") << row.dump();  // cpu.unified reads 8-bit caches
  }
  const std::string bad = testcli::write_text(
      "kv8_bad.json", R"({"group": "gk", "shapes": [{"name": "s", "heads": 2, "kv_heads": 1, "head_size": 64,
          "seqlen_k": 64, "kv_dtype": "int4"}]})");
  const auto e = testcli::run_cli("list --cases --shapes " + bad);
  EXPECT_EQ(e.code, 2);
  EXPECT_TRUE(testcli::contains(e.output, "field 'kv_dtype'")) << e.output;
  EXPECT_TRUE(testcli::contains(e.output, "\"int4\"")) << e.output;
}

// Feature fields parse and validate; cpu.unified computes every feature and passes the gate, the GPU kernels
// decline a feature they do not implement by name (or have no device here).
TEST(Features, ShapeFieldsParseValidateAndCpuUnifiedComputesThem) {
  const std::string shapes = testcli::write_text(
      "feat_shapes.json",
      R"({"group": "gf", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 64, "dtypes": ["bf16"]},
          "shapes": [{"name": "win", "window_left": 16}, {"name": "cap", "softcap": 50},
                     {"name": "alibi", "alibi_slopes": [0.5, 0.25]}, {"name": "sink", "sinks": [1, 2]},
                     {"name": "qq", "seqlen_q": 2, "qq_bias": [[0, 1], [2, 3]]},
                     {"name": "kv8", "kv_dtype": "e4m3", "k_scale": 0.5}]})");
  const std::string out = testcli::tmp_path("feat.json");
  const auto r = testcli::run_cli("run --shapes " + shapes + " --backend all --mode eager --gate-only -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  const auto doc = testcli::read_json(out);
  const std::map<std::string, std::string> field = {{"win", "window_left"}, {"cap", "softcap"},
                                                    {"alibi", "alibi_slopes"}, {"sink", "sinks"},
                                                    {"qq", "qq_bias"}, {"kv8", "types"}};
  ASSERT_FALSE(doc["rows"].empty());
  int cpu_rows = 0;
  for (const auto& row : doc["rows"]) {
    EXPECT_TRUE(row["dims"].contains("features")) << row.dump();
    if (row["kernel"] == "cpu.unified") {
      ++cpu_rows;
      EXPECT_EQ(row["status"], "ok") << row.dump();
      EXPECT_TRUE(row["gate"]["passed"]) << row.dump();
      continue;
    }
    EXPECT_EQ(row["status"], "declined") << row.dump();
    const std::string why = row["reason"];
    EXPECT_TRUE(testcli::contains(why, field.at(row["shape"])) || testcli::contains(why, "no CUDA device") ||
                testcli::contains(why, "no HIP device"))
        << why;
  }
  EXPECT_EQ(cpu_rows, 6);
  auto bad = [&](const std::string& field_json, const std::string& want) {
    const std::string f = testcli::write_text(
        "feat_bad.json", R"({"shapes": [{"name": "x", "heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 64, )" +
                             field_json + "}]}");
    const auto b = testcli::run_cli("run --shapes " + f + " -o " + out);
    EXPECT_EQ(b.code, 2) << field_json << ": " << b.output;
    EXPECT_TRUE(testcli::contains(b.output, want)) << field_json << ": " << b.output;
  };
  bad(R"("window_left": -2)", "field 'window_left'");
  bad(R"("softcap": -1)", "field 'softcap': expected a number > 0");
  bad(R"("softcap": 0)", "field 'softcap': expected a number > 0");
  bad(R"("alibi_slopes": [1, 2, 3])", "field 'alibi_slopes': expected 2 values (one per query head), got 3");
  bad(R"("sinks": "yes")", "field 'sinks': expected a non-empty list of numbers");
  bad(R"("qq_bias": [[1, 2], [3]])", "field 'qq_bias': expected a square list of rows");
  bad(R"("v_scale": 0)", "field 'v_scale': expected a number > 0");
  bad(R"("k_scale": 0.5)", "field 'k_scale': dequantises an 8-bit K/V cache; this one is bf16 (set kv_dtype)");
  bad(R"("q_scale": 0.5)", "field 'q_scale': dequantises an 8-bit Q; this one is bf16 (set q_dtype)");
  bad(R"("q_scale": -1, "q_dtype": "e4m3", "kv_dtype": "e4m3")", "field 'q_scale': expected a number > 0");
  bad(R"("q_dtype": "e4m3")", "field 'q_dtype': an 8-bit Q (e4m3) is the FP8 SDPA's: it needs an 8-bit K/V cache "
                              "(kv_dtype), this one is bf16");
  bad(R"("q_dtype": "int4")", "field 'q_dtype': unsupported dtype \"int4\"");
}

// The FP8 SDPA's shape fields: q_dtype labels the rows e4m3-e4m3-bf16, cpu.unified passes the gate on them, and the
// GPU kernels serve or decline them by name (or have no device here).
TEST(Types, Fp8SdpaShapeRowsRunOnTheCpu) {
  const std::string shapes = testcli::write_text(
      "q8_shapes.json",
      R"({"group": "gq", "shapes": [{"name": "s", "heads": 4, "kv_heads": 2, "head_size": 128, "seqlen_k": 200,
          "seqlen_q": 70, "dtypes": ["bf16", "fp16"], "q_dtype": "e4m3", "kv_dtype": "e4m3", "q_scale": 0.25,
          "k_scale": 0.125, "v_scale": 0.5}]})");
  const std::string out = testcli::tmp_path("q8.json");
  const auto r = testcli::run_cli("run --shapes " + shapes + " --backend cpu --mode eager --gate-only -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  const auto rows = testcli::read_json(out)["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["dtype"], "e4m3-e4m3-bf16");
  EXPECT_EQ(rows[1]["dtype"], "e4m3-e4m3-fp16");
  for (const auto& row : rows) {
    EXPECT_EQ(row["status"], "ok") << row.dump();
    EXPECT_TRUE(row["gate"]["passed"]) << row.dump();
    EXPECT_EQ(row["dims"]["features"]["q_scale"], 0.25) << row.dump();
  }
}

// The reference refuses params no problem could have given (the problem's validation catches them first).
TEST(Features, ReferenceRefusesInconsistentFeatureParams) {
  AttentionProblem p;
  p.q_lens = {1};
  p.kv_lens = {64};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  const HostInputs in = build_inputs(p, 1);
  std::vector<float> out(2 * 64);
  for (int which = 0; which < 3; ++which) {
    AttentionParams a = in.params();
    if (which == 0) a.features.softcap = -1.f;
    if (which == 1) a.features.qq_bias_len = 4;  // and no bias
    if (which == 2) a.features.k_scale = 0.f;
    EXPECT_THROW(reference::paged_attention(a, {{0, 0}}, out.data()), std::invalid_argument) << which;
  }
}
