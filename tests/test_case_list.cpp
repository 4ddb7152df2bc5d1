// `list --cases [--json]`: the expanded cases with their dims and declared work, the same cases in the same order
// as `run`, and the harness's own usage errors (exit 2) for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "run/case_list.hpp"
#include "run/runner.hpp"

namespace {
using nlohmann::json;
using testcli::contains;
using testcli::Result;
using testcli::run_cli;
using testcli::tmp_path;
using testcli::write_text;

// Uniform B2 q3 kv5 and ragged (q, kv) = (2, 4), (1, 6); heads 4/2, d64; the ragged one has its own scale.
const char* kAttentionShapes = R"({"group": "cl", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64,
  "block_size": 16, "dtypes": ["bf16", "fp16"]},
  "shapes": [{"name": "uni", "batch": 2, "seqlen_q": 3, "seqlen_k": 5},
             {"name": "rag", "seqlens": [[2, 4], [1, 6]], "scale": 0.5, "causal": false, "dtypes": ["fp16"]}]})";

// B1 S64, d_model 64, h 2/1, d64, rope 16: a geometry the block accepts; d_head 96 is one it declines.
const char* kGatedShapes = R"({"group": "clg", "op": "gated_block", "defaults": {"dtypes": ["bf16"], "batch": 1,
  "d_model": 64, "h_q": 2, "h_kv": 1, "d_head": 64, "rope_dim": 16},
  "shapes": [{"name": "s64", "seqlen": 64}, {"name": "d96", "seqlen": 64, "d_head": 96, "qk_norm": false}]})";

json parse_listing(const Result& r) {
  EXPECT_EQ(r.code, 0) << r.output;
  const json doc = json::parse(r.output, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << r.output;
  return doc.is_discarded() ? json::object() : doc;
}

std::vector<std::string> ids_of(const json& doc) {
  std::vector<std::string> ids;
  for (const auto& c : doc.at("cases"))
    ids.push_back(c.at("group").get<std::string>() + "/" + c.at("shape").get<std::string>() + "/" +
                  c.at("dtype").get<std::string>());
  return ids;
}

void expect_usage_error(const std::string& args, const std::string& fragment) {
  const Result r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_TRUE(contains(r.output, fragment)) << args << "\n" << r.output;
  EXPECT_FALSE(contains(r.output, "attnbench.cases/1")) << "a listing printed despite the error: " << args;
}
}  // namespace

TEST(CaseList, AttentionCaseFieldsAndWork) {
  const std::string path = write_text("cl_att.json", kAttentionShapes);
  const json doc = attnbench::cases_document(attnbench::load_shape_file(path));
  EXPECT_EQ(doc.at("schema"), "attnbench.cases/1");
  ASSERT_EQ(doc.at("cases").size(), 3u);  // uni bf16, uni fp16, rag fp16
  const json& u = doc["cases"][1];
  EXPECT_EQ(u.at("group"), "cl");
  EXPECT_EQ(u.at("shape"), "uni");
  EXPECT_EQ(u.at("file"), path);
  EXPECT_EQ(u.at("op"), "attention");
  EXPECT_EQ(u.at("dtype"), "fp16");
  EXPECT_EQ(u.at("types"), json({{"q", "fp16"}, {"kv", "fp16"}, {"o", "fp16"}, {"acc", "fp32"}}));
  EXPECT_EQ(u.at("features"), json::object());
  const json& d = u.at("dims");
  EXPECT_EQ(d.at("heads"), 4);
  EXPECT_EQ(d.at("kv_heads"), 2);
  EXPECT_EQ(d.at("head_size"), 64);
  EXPECT_EQ(d.at("block_size"), 16);
  EXPECT_EQ(d.at("causal"), true);
  EXPECT_EQ(d.at("seqlens"), json::parse("[[3, 5], [3, 5]]"));  // uniform shapes list them too
  EXPECT_EQ(d.at("num_seqs"), 2);
  EXPECT_EQ(d.at("total_q"), 6);
  EXPECT_EQ(d.at("max_seqlen_q"), 3);
  EXPECT_EQ(d.at("max_seqlen_k"), 5);
  EXPECT_NEAR(d.at("scale").get<double>(), 0.125, 1e-7);  // resolved 1/sqrt(64)
  // Bottom-right causal q3 kv5: rows see 3, 4, 5 keys = 12 pairs per sequence.
  EXPECT_EQ(u.at("work").at("flops"), 4.0 * 24 * 4 * 64);
  EXPECT_EQ(u.at("work").at("bytes"), 2.0 * (2 * 6 * 4 * 64 + 2 * 10 * 2 * 64));

  const json& r = doc["cases"][2];
  EXPECT_EQ(r.at("shape"), "rag");
  EXPECT_EQ(r.at("dims").at("seqlens"), json::parse("[[2, 4], [1, 6]]"));
  EXPECT_EQ(r.at("dims").at("total_q"), 3);
  EXPECT_EQ(r.at("dims").at("causal"), false);
  EXPECT_NEAR(r.at("dims").at("scale").get<double>(), 0.5, 1e-7);
  EXPECT_EQ(r.at("work").at("flops"), 4.0 * (2 * 4 + 1 * 6) * 4 * 64);
}

TEST(CaseList, GatedCaseFieldsAndWork) {
  const std::string path = write_text("cl_gated.json", kGatedShapes);
  const json doc = attnbench::cases_document(attnbench::load_shape_file(path));
  ASSERT_EQ(doc.at("cases").size(), 2u);
  const json& g = doc["cases"][0];
  EXPECT_EQ(g.at("op"), "gated_block");
  EXPECT_EQ(g.at("types").at("acc"), "fp32");
  const json& d = g.at("dims");
  for (const char* k : {"batch", "seqlen", "d_model", "h_q", "h_kv", "d_head", "rope_dim", "qk_norm", "causal"})
    EXPECT_TRUE(d.contains(k)) << k;
  EXPECT_EQ(d.at("rope_dim"), 16);
  EXPECT_EQ(d.at("n_qkvg"), (2 * 2 + 2 * 1) * 64);
  EXPECT_NEAR(d.at("scale").get<double>(), 0.125, 1e-7);
  // Projections 2 * t * d_model * (N + h_q * d) plus the square causal SDPA (64 * 65 / 2 pairs, h_q 2, d 64).
  EXPECT_EQ(g.at("work").at("flops"), 2.0 * 64 * 64 * (384 + 128) + 4.0 * 2080 * 2 * 64);
  EXPECT_EQ(g.at("work").at("bytes"), 2.0 * (64 * 64 + 384 * 64 + 64 * 128 + 2 * 64 * 16 + 2 * 64 + 64 * 64));
  // A declined geometry keeps its rows' work (none declared) but still says how to build the block.
  const json& bad = doc["cases"][1];
  EXPECT_EQ(bad.at("dims").at("n_qkvg"), (2 * 2 + 2 * 1) * 96);
  EXPECT_NEAR(bad.at("dims").at("scale").get<double>(), 1 / std::sqrt(96.0), 1e-7);
  EXPECT_EQ(bad.at("work").at("flops"), 0.0);
}

TEST(CaseList, BinaryListsTheCasesRunTakesInItsOrder) {
  const std::string gated = write_text("cl_order_gated.json", kGatedShapes);
  const std::string sel = "--group decode --shapes " + gated + " --group gqa";
  const json doc = parse_listing(run_cli("list --cases --json " + sel));
  attnbench::RunOptions o;
  o.groups = {"decode", "gqa"};
  o.shape_files = {gated};
  std::vector<std::string> expect;
  for (const auto& c : attnbench::select_cases(o))
    expect.push_back(c.group + "/" + c.name + "/" + c.dtype_label());
  EXPECT_EQ(ids_of(doc), expect);

  // A quick run (only the gated kernel: attention cases are declined rows, the gated ones tiny) gives its rows in
  // case order, with the listing's work and dims.
  const std::string out = tmp_path("cl_order_run.json");
  const Result r = run_cli("run " + sel + " --backend cpu --kernel cpu.gated_block --gate-only --mode eager " +
                           "--no-progress -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const json rows = testcli::read_json(out).at("rows");
  std::vector<std::string> run_ids;
  size_t i = 0;
  for (const auto& row : rows) {
    const std::string id = row.at("group").get<std::string>() + "/" + row.at("shape").get<std::string>() + "/" +
                           row.at("dtype").get<std::string>();
    if (!run_ids.empty() && run_ids.back() == id) continue;
    run_ids.push_back(id);
    const json& c = doc.at("cases").at(i++);
    EXPECT_EQ(row.at("flops"), c.at("work").at("flops")) << id;
    EXPECT_EQ(row.at("bytes"), c.at("work").at("bytes")) << id;
    for (const auto& [k, v] : row.at("dims").items()) EXPECT_EQ(c.at("dims").at(k), v) << id << " dims." << k;
  }
  EXPECT_EQ(run_ids, expect);
}

TEST(CaseList, SelectionOptionsAndDefaults) {
  const json some = parse_listing(run_cli("list --cases --json -g decode --dtype fp16 --filter b8_kv"));
  EXPECT_EQ(ids_of(some),
            (std::vector<std::string>{"decode/d128_h32kv8_b8_kv4096/fp16", "decode/d128_h32kv8_b8_kv32768/fp16"}));
  size_t shipped = 0;  // without a selection: every shipped group
  for (const auto& g : attnbench::list_groups()) shipped += attnbench::load_group(g).size();
  EXPECT_EQ(parse_listing(run_cli("list --cases --json")).at("cases").size(), shipped);

  const Result table = run_cli("list --cases --group gated_397b");
  EXPECT_EQ(table.code, 0) << table.output;
  EXPECT_TRUE(contains(table.output, "gated_397b/")) << table.output;
  EXPECT_TRUE(contains(table.output, "7 cases")) << table.output;
  size_t lines = 0;
  std::istringstream in(table.output);
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 7u + 2u) << table.output;  // header, a line per case, the count

  const std::string file = write_text("cl_shapes_flag.json", kAttentionShapes);
  const Result shapes = run_cli("list --shapes " + file);  // --shapes FILE lists that file's shapes
  EXPECT_EQ(shapes.code, 0) << shapes.output;
  EXPECT_TRUE(contains(shapes.output, "uni") && contains(shapes.output, "rag")) << shapes.output;
  EXPECT_TRUE(contains(run_cli("list --shapes --group gqa").output, "d128_h32kv8_chunked_q512_kv4096"));
}

TEST(CaseList, BadInputIsTheHarnessUsageError) {
  const std::string bad = write_text("cl_bad.json", R"({"shapes": [{"name": "s1", "heads": 8, "kv_heads": 3,
    "head_size": 64, "seqlen_k": 10}]})");
  expect_usage_error("list --cases --json --shapes " + bad, "shape #0 's1': field 'kv_heads'");
  const std::string twice = write_text("cl_twice.json", R"({"shapes": [{"heads": 8, "kv_heads": 2, "head_size": 64,
    "seqlen_k": 10, "dtypes": ["bf16", "bf16"]}]})");
  expect_usage_error("list --cases --json --shapes " + twice, "listed twice");
  const std::string huge = write_text("cl_huge.json", R"({"shapes": [{"heads": 8, "kv_heads": 2, "head_size": 64,
    "seqlen_k": 10, "batch": 2000000}]})");
  expect_usage_error("list --cases --json --shapes " + huge, "field 'batch': too large");
  expect_usage_error("list --cases --json --shapes /nonexistent/s.json", "/nonexistent/s.json");
  expect_usage_error("list --cases --json --group nope", "unknown group 'nope'");
  expect_usage_error("list --cases --json --group decode --group decode", "--group: 'decode' given twice");
  expect_usage_error("list --cases --json --group decode --dtype fp8", "fp8");
  expect_usage_error("list --cases --json --group decode --filter '('", "--filter");
  expect_usage_error("list --cases --shapes", "--shapes: expected a shape FILE");
  expect_usage_error("list --json --group decode", "--json: only with --cases");
  expect_usage_error("list --shapes --filter b8_", "only with --cases");
  expect_usage_error("list --cases --kernels", "--cases");
}
