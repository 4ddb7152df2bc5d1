// run --shard K/N slices the cases; merge joins the slices back, refusing files of other builds/devices/seeds.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "cli_helpers.hpp"
#include "compare/merge.hpp"
#include "core/errors.hpp"
#include "run/runner.hpp"

using namespace attnbench;
using namespace testcli;
using nlohmann::json;

namespace {
std::string case_id(const ShapeCase& c) { return c.group + "/" + c.name + "/" + c.dtype_label(); }
}  // namespace

TEST(Shard, SlicesPartitionTheCasesAndStayBalanced) {
  RunOptions o;
  o.shape_files = {ATTNBENCH_SOURCE_DIR "/shapes/decode.json", ATTNBENCH_SOURCE_DIR "/shapes/gqa.json"};
  std::vector<std::string> all;
  for (const auto& c : select_cases(o)) all.push_back(case_id(c));
  ASSERT_GT(all.size(), 8u);
  for (int n : {1, 3, 4, 7}) {
    std::multiset<std::string> seen;
    for (int k = 1; k <= n; ++k) {
      o.shard = {k, n};
      const auto slice = select_cases(o);
      EXPECT_GE(slice.size(), all.size() / n) << k << "/" << n;
      EXPECT_LE(slice.size(), all.size() / n + 1) << k << "/" << n;
      for (const auto& c : slice) seen.insert(case_id(c));
    }
    EXPECT_EQ(seen, std::multiset<std::string>(all.begin(), all.end())) << "n = " << n;
  }
  // Deterministic: the same slice twice.
  o.shard = {2, 3};
  std::vector<std::string> a, b;
  for (const auto& c : select_cases(o)) a.push_back(case_id(c));
  for (const auto& c : select_cases(o)) b.push_back(case_id(c));
  EXPECT_EQ(a, b);
}

TEST(Shard, BadShardIsAUsageError) {
  for (const char* bad : {"0/3", "4/3", "1-3", "a/b", "1/0", "/3", "2/", "-1/3"}) {
    const Result r = run_cli(std::string("run --group decode --shard ") + bad + " -o " + tmp_path("s.json"));
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "--shard")) << bad << "\n" << r.output;
  }
}

TEST(Merge, ShardsOfACpuRunJoinBackIntoTheWholeRun) {
  const std::string shapes = write_text("tiny.json", R"({"group": "tiny", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64},
    "shapes": [{"name": "a", "batch": 1, "seqlen_k": 20}, {"name": "b", "batch": 2, "seqlen_q": 1, "seqlen_k": 33},
               {"name": "c", "seqlens": [[2, 9]]}]})");
  std::vector<std::string> parts;
  std::multiset<std::string> shard_rows;
  for (int k = 1; k <= 2; ++k) {
    parts.push_back(tmp_path("part" + std::to_string(k) + ".json"));
    const Result r = run_cli("run --shapes " + shapes + " --backend cpu --mode eager --gate-only --shard " +
                             std::to_string(k) + "/2 -o " + parts.back());
    ASSERT_EQ(r.code, 0) << r.output;
    const json part = read_json(parts.back());
    for (const auto& row : part["rows"])
      shard_rows.insert(row["shape"].get<std::string>() + "/" + row["dtype"].get<std::string>());
  }
  EXPECT_EQ(shard_rows.size(), 6u);  // 3 shapes x 2 dtypes, each once
  EXPECT_EQ(std::set<std::string>(shard_rows.begin(), shard_rows.end()).size(), 6u);
  const std::string merged = tmp_path("merged.json");
  const Result m = run_cli("merge " + parts[0] + " " + parts[1] + " -o " + merged);
  ASSERT_EQ(m.code, 0) << m.output;
  const json j = read_json(merged);
  EXPECT_EQ(j["schema"], "attnbench.results/1");
  EXPECT_EQ(j["rows"].size(), 6u);
  ASSERT_EQ(j["provenance"]["merged_from"].size(), 2u);
  EXPECT_EQ(j["provenance"]["merged_from"][1]["file"], parts[1]);
  EXPECT_TRUE(contains(j["provenance"]["merged_from"][0]["command"].get<std::string>(), "--shard 1/2"));
  EXPECT_TRUE(contains(j["provenance"]["command"].get<std::string>(), "merge"));
  EXPECT_EQ(j["provenance"]["hosts"].size(), 1u) << "one host: " << j["provenance"].dump();
  EXPECT_FALSE(contains(m.output, "hosts")) << m.output;
  // The CSV beside it, a line per row, with the rows' dims as columns.
  std::ifstream csv(tmp_path("merged.csv"));
  ASSERT_TRUE(csv.good()) << m.output;
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("group,shape,op,dtype,kernel,", 0), 0u) << header;
  EXPECT_TRUE(contains(header, ",dims.batch,")) << header;
  EXPECT_TRUE(contains(header, ",dims.max_seqlen_k,")) << header;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 6);
  // The same command may replace its own files; --csv names the CSV elsewhere.
  EXPECT_EQ(run_cli("merge " + parts[0] + " " + parts[1] + " -o " + merged).code, 0);
  const Result m2 = run_cli("merge " + parts[0] + " " + parts[1] + " -o " + tmp_path("m2.json") + " --csv " +
                            tmp_path("m2_table.csv"));
  ASSERT_EQ(m2.code, 0) << m2.output;
  EXPECT_TRUE(std::filesystem::exists(tmp_path("m2_table.csv")));
  EXPECT_FALSE(std::filesystem::exists(tmp_path("m2.csv")));
}

TEST(Merge, FilesFromSeveralHostsAreJoinedAndNamed) {
  const json rows = json::array({row("s", "k", "graph", "ok", 1, 1, 1)});
  json a = results_doc(rows), b = results_doc(json::array({row("t", "k", "graph", "ok", 1, 1, 1)}));
  a["provenance"]["host"] = "runner-a";
  b["provenance"]["host"] = "runner-b";
  const std::string pa = write_results("host_a.json", a), pb = write_results("host_b.json", b);
  const Result r = run_cli("merge " + pa + " " + pb + " -o " + tmp_path("hosts.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "merge: warning: the files ran on 2 hosts (runner-a, runner-b)")) << r.output;
  const json j = read_json(tmp_path("hosts.json"));
  EXPECT_EQ(j["provenance"]["hosts"], json::array({"runner-a", "runner-b"}));
  EXPECT_EQ(j["provenance"]["merged_from"][1]["host"], "runner-b");
}

TEST(Merge, ARowThatDoesNotReadBackNamesFileAndRow) {
  json partial = results_doc(json::array({row("s", "k", "graph", "ok", 1, 1, 1)}));
  partial["rows"][0].erase("flops");
  const std::string good = write_results("full.json", results_doc(json::array({row("t", "k", "graph", "ok", 1, 1, 1)})));
  const std::string bad = write_results("partial.json", partial);
  const Result r = run_cli("merge " + good + " " + bad + " -o " + tmp_path("partial_m.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, bad + ": row #0")) << r.output;
  EXPECT_TRUE(contains(r.output, "flops")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(tmp_path("partial_m.json")));
}

TEST(Merge, IncompatibleProvenanceNamesTheFieldAndBothValues) {
  const json rows = json::array({row("s", "k", "graph", "ok", 1, 1, 1)});
  const std::string a = write_results("a.json", results_doc(rows));
  const std::string same = write_results("same.json", results_doc(rows));
  const std::string sha = write_results("sha.json", results_doc(rows, "def456"));
  const std::string seed = write_results("seed.json", results_doc(rows, "abc123", 7));
  const std::string dev = write_results("dev.json", results_doc(rows, "abc123", 1234, "NVIDIA A100"));
  const std::string out = tmp_path("m.json");

  const Result ok = run_cli("merge " + a + " " + same + " -o " + out);
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_TRUE(contains(ok.output, "warning")) << "the same row twice is worth a warning:\n" << ok.output;
  EXPECT_EQ(read_json(out)["rows"].size(), 2u);  // every row kept

  const auto expect2 = [&](const std::string& other, const std::vector<std::string>& fragments) {
    const Result r = run_cli("merge " + a + " " + other + " -o " + tmp_path("bad.json"));
    EXPECT_EQ(r.code, 2) << r.output;
    for (const auto& f : fragments) EXPECT_TRUE(contains(r.output, f)) << f << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(tmp_path("bad.json")));
  };
  expect2(sha, {"'git_sha'", "abc123", "def456", a, sha});
  expect2(seed, {"'seed'", "1234", "'7'", seed});
  expect2(dev, {"'device'", "NVIDIA H200", "NVIDIA A100"});
  expect2(ATTNBENCH_SOURCE_DIR "/shapes/decode.json", {"decode.json: not an attnbench results file"});
  EXPECT_EQ(run_cli("merge " + a + " " + same).code, 2);  // -o is required
}

TEST(Merge, NonObjectProvenanceOrRowsNameFileFieldAndRow) {
  const json rows = json::array({row("s", "k", "graph", "ok", 1, 1, 1)});
  const std::string good = write_results("good.json", results_doc(rows));
  json prov_string = results_doc(rows);
  prov_string["provenance"] = "built on a laptop";
  json prov_number = results_doc(rows);
  prov_number["provenance"] = 7;
  json number_rows = results_doc(json::array({row("s", "k", "graph", "ok", 1, 1, 1), 3, 4}));
  const std::string ps = write_results("prov_string.json", prov_string);
  const std::string pn = write_results("prov_number.json", prov_number);
  const std::string nr = write_results("number_rows.json", number_rows);
  const auto expect2 = [&](const std::string& other, const std::vector<std::string>& fragments) {
    const Result r = run_cli("merge " + good + " " + other + " -o " + tmp_path("bad.json"));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << r.output;
    for (const auto& f : fragments) EXPECT_TRUE(contains(r.output, f)) << f << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(tmp_path("bad.json")));
  };
  expect2(ps, {ps + ": field 'provenance'", "built on a laptop"});
  expect2(pn, {pn + ": field 'provenance'", "7"});
  expect2(nr, {nr + ": field 'rows': row #1", "got 3"});
  // The library says the same, for every caller of read_results_json.
  EXPECT_THROW(merge_result_files({nr}, "attnbench merge"), UsageError);
}
