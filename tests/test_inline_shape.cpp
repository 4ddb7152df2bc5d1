// --shape: the inline grammar, written as a shape document and loaded by the shape-file loader (so every rule of
// a file holds), through list and run.
#include <gtest/gtest.h>

#include <string>

#include "cases/inline_shape.hpp"
#include "cli_helpers.hpp"
#include "core/errors.hpp"

using namespace attnbench;
using namespace testcli;

namespace {

std::string usage_message(const std::string& spec) {
  try {
    load_inline_shape(spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(InlineShape, DecodeSpecIsTheShapeFileItStandsFor) {
  const auto cases = load_inline_shape("d128 h32/8 b4 q1 kv4096");
  ASSERT_EQ(cases.size(), 2u);  // the loader's default dtypes
  const AttentionProblem& p = cases[0].attention;
  EXPECT_EQ(cases[0].group, "inline");
  EXPECT_EQ(cases[0].name, "d128_h32kv8_b4_q1_kv4096");
  EXPECT_EQ(cases[0].file, "--shape 'd128 h32/8 b4 q1 kv4096'");
  EXPECT_EQ(p.head_size, 128);
  EXPECT_EQ(p.heads, 32);
  EXPECT_EQ(p.kv_heads, 8);
  EXPECT_EQ(p.num_seqs(), 4);
  EXPECT_EQ(p.max_seqlen_q(), 1);
  EXPECT_EQ(p.max_seqlen_k(), 4096);
}

TEST(InlineShape, PrefillDtypesFlagsAndFields) {
  const auto cases = load_inline_shape("d64 h8 s512 bs16 noncausal fp16 softcap=30 name=mine");
  ASSERT_EQ(cases.size(), 1u);
  const AttentionProblem& p = cases[0].attention;
  EXPECT_EQ(cases[0].name, "mine");
  EXPECT_EQ(cases[0].dtype, DType::f16);
  EXPECT_EQ(p.kv_heads, 8);  // h without /KV: one KV head per query head
  EXPECT_EQ(p.max_seqlen_q(), 512);
  EXPECT_EQ(p.block_size, 16);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(inline_shape_doc("d64 h8 s512 softcap=30")["shapes"][0]["softcap"], 30);
}

TEST(InlineShape, EveryBadSpecNamesItselfAndWhatIsWrong) {
  const std::string grammar = "(grammar: d<head_size>";
  for (const auto& [spec, why] : std::initializer_list<std::pair<const char*, const char*>>{
           {"", "an empty shape"},
           {"h32/8 kv4096", "no d<head_size>"},
           {"d128 kv4096", "no h<heads>"},
           {"d128 h32/8", "no kv<seqlen_k> or s<seqlen>"},
           {"d128 h32/8 kv4096 x12", "unknown token 'x12'"},
           {"d128 h32/8 kv40a", "'kv40a': expected digits after 'kv'"},
           {"d128 d64 h8 s16", "'head_size' given twice"},
           {"d128 h8 s16 kv32", "'seqlen_k' given twice"},
           {"d128 h8 s16 =3", "expected field=value"},
       }) {
    const std::string m = usage_message(spec);
    EXPECT_NE(m.find("--shape '" + std::string(spec) + "': "), std::string::npos) << spec << ": " << m;
    EXPECT_NE(m.find(why), std::string::npos) << spec << ": " << m;
    EXPECT_NE(m.find(grammar), std::string::npos) << spec << ": " << m;
  }
  // What the loader checks, it checks here too, naming the field.
  EXPECT_NE(usage_message("d128 h32/7 kv4096").find("field 'kv_heads': heads 32 is not a multiple of kv_heads 7"),
            std::string::npos) << usage_message("d128 h32/7 kv4096");
  EXPECT_NE(usage_message("d128 h8 kv64 q128").find("seqlen_q 128 > seqlen_k 64"), std::string::npos);
  EXPECT_NE(usage_message("d128 h8 kv64 softcap=0").find("field 'softcap'"), std::string::npos);
  EXPECT_NE(usage_message("d128 h8 kv64 bogus=1").find("bogus"), std::string::npos);
  const std::string deep = "d128 h8 kv64 softcap=" + std::string(100, '[') + "1" + std::string(100, ']');
  EXPECT_NE(usage_message(deep).find("nested deeper than 64 levels"), std::string::npos) << usage_message(deep);
}

TEST(InlineShape, RunAndListTakeIt) {
  const std::string out = tmp_path("inline.json");
  const Result r = run_cli("run --shape 'd64 h4/2 b2 q1 kv300 bf16' --backend cpu --gate-only --no-progress -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = read_json(out);
  ASSERT_EQ(j["rows"].size(), 1u) << j.dump();
  EXPECT_EQ(j["rows"][0]["group"], "inline");
  EXPECT_EQ(j["rows"][0]["shape"], "d64_h4kv2_b2_q1_kv300");
  EXPECT_EQ(j["rows"][0]["status"], "ok");
  // Its repro names the spec as given and reruns the same case.
  const std::string repro = j["rows"][0]["repro"];
  EXPECT_TRUE(contains(repro, "run --shape 'd64 h4/2 b2 q1 kv300 bf16' --filter ")) << repro;
  const std::string again = tmp_path("inline_again.json");
  const Result rerun = run_cli(repro.substr(std::string("attnbench ").size()) + " --gate-only --no-progress -o " + again);
  ASSERT_EQ(rerun.code, 0) << repro << "\n" << rerun.output;
  ASSERT_EQ(read_json(again)["rows"].size(), 1u);
  EXPECT_EQ(read_json(again)["rows"][0]["shape"], "d64_h4kv2_b2_q1_kv300");
  const Result l = run_cli("list --cases --json --shape 'd64 h4/2 b2 q1 kv300 bf16' --shape 'd64 h4 s64 fp16'");
  ASSERT_EQ(l.code, 0) << l.output;
  EXPECT_TRUE(contains(l.output, "\"shape\": \"d64_h4kv4_b1_q64_kv64\"")) << l.output;
  // Without -o, run and sweep name their files after the inline group.
  const std::string dir = tmp_path("inline_default");
  const std::string cd = "mkdir -p " + dir + " && cd " + dir + " &&";
  const std::string sel = " --shape 'd64 h4 s32 bf16' --backend cpu --mode eager --min-samples 2 --max-noise 1"
                          " --timeout 0.2 --no-progress";
  const Result run = run_cli("run" + sel, cd);
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(read_json(dir + "/results/inline.json")["rows"].size(), 1u);
  const Result sweep = run_cli("sweep --knob ATTNBENCH_CPU_MAX_GFLOP=0,64" + sel, cd);
  ASSERT_EQ(sweep.code, 0) << sweep.output;
  EXPECT_EQ(read_json(dir + "/results/sweep_inline.json")["rows"].size(), 2u);
  const Result bad = run_cli("run --shape 'd64 h4 kv64 zz' --backend cpu -o " + tmp_path("inline_bad.json"));
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--shape 'd64 h4 kv64 zz': unknown token 'zz'")) << bad.output;
}

}  // namespace
