// Peer ratios: which kernels are peers, each row's ratio to the peer row of its case and mode (none when either
// row is not ok and timed), the run's summary and its lines, the vs_peer column, and the field through JSON, CSV,
// merge and compare.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "compare/merge.hpp"
#include "core/errors.hpp"
#include "result_rows.hpp"
#include "results/peer_ratio.hpp"
#include "results/printer.hpp"
#include "results/results.hpp"

using namespace attnbench;
using namespace testcli;
using nlohmann::json;

namespace {
ResultRow make_row(const std::string& kernel, const std::string& shape, const std::string& mode, double median_us,
                   const std::string& status = "ok") {
  return testrows::timed_row(kernel, shape, mode, median_us, status);
}

const ResultRow& find(const std::vector<ResultRow>& rows, const std::string& kernel, const std::string& shape,
                      const std::string& mode) {
  for (const auto& r : rows)
    if (r.kernel == kernel && r.shape == shape && r.mode == mode) return r;
  throw std::runtime_error("no row " + kernel + " " + shape + " " + mode);
}
}  // namespace

TEST(PeerRatio, PeersAreTheCudnnKernelsOfTheRegistry) {
  EXPECT_TRUE(is_peer_kernel("cudnn.sdpa"));
  EXPECT_TRUE(is_peer_kernel("cudnn.gated_chain"));
  EXPECT_FALSE(is_peer_kernel("cuda.unified"));
  EXPECT_FALSE(is_peer_kernel("cpu.unified"));
  EXPECT_FALSE(is_peer_kernel("xcudnn.sdpa"));
  ASSERT_FALSE(kernel_registry().empty());
  for (const auto& e : kernel_registry()) EXPECT_EQ(e.peer, is_peer_kernel(e.name)) << e.name;
}

TEST(PeerRatio, EachRowAgainstThePeerOfItsCaseAndMode) {
  std::vector<ResultRow> rows = {
      make_row("cuda.unified", "a", "eager", 120), make_row("cuda.unified", "a", "graph", 100),
      make_row("cudnn.sdpa", "a", "eager", 90),    make_row("cudnn.sdpa", "a", "graph", 108),
      make_row("cuda.unified", "b", "graph", 50),  make_row("cuda.unified", "c", "eager", 10),
      make_row("cudnn.sdpa", "c", "graph", 40)};
  rows[0].vs_peer = PeerRatio{"stale", 9};  // a ratio the rows came with is replaced
  set_peer_ratios(rows);
  const auto& eager = find(rows, "cuda.unified", "a", "eager").vs_peer;
  const auto& graph = find(rows, "cuda.unified", "a", "graph").vs_peer;
  ASSERT_TRUE(eager && graph);
  EXPECT_EQ(eager->kernel, "cudnn.sdpa");
  EXPECT_DOUBLE_EQ(eager->ratio, 0.75);
  EXPECT_EQ(graph->kernel, "cudnn.sdpa");
  EXPECT_DOUBLE_EQ(graph->ratio, 1.08);
  EXPECT_FALSE(find(rows, "cudnn.sdpa", "a", "eager").vs_peer);  // the peer itself
  EXPECT_FALSE(find(rows, "cudnn.sdpa", "a", "graph").vs_peer);
  EXPECT_FALSE(find(rows, "cuda.unified", "b", "graph").vs_peer);  // no peer row in case b
  EXPECT_FALSE(find(rows, "cuda.unified", "c", "eager").vs_peer);  // case c's peer row is of the other mode
}

TEST(PeerRatio, NoneWhenEitherRowIsNotOkAndTimed) {
  std::vector<ResultRow> rows;
  for (const char* status : {"declined", "mismatch", "error"}) {
    rows.push_back(make_row("cuda.unified", status, "graph", 100));
    rows.push_back(make_row("cudnn.sdpa", status, "graph", 100, status));
  }
  rows.push_back(make_row("cuda.unified", "gate_only", "graph", 0));  // ok without a time
  rows.push_back(make_row("cudnn.sdpa", "gate_only", "graph", 100));
  rows.push_back(make_row("cuda.unified", "mine_failed", "graph", 100, "mismatch"));
  rows.push_back(make_row("cudnn.sdpa", "mine_failed", "graph", 100));
  set_peer_ratios(rows);
  for (const auto& r : rows) EXPECT_FALSE(r.vs_peer) << r.kernel << " " << r.shape;
}

TEST(PeerRatio, ControlCopiesAreNoPeersAndGetNoRatio) {
  std::vector<ResultRow> rows = {
      make_row("cudnn.sdpa#control", "a", "graph", 50), make_row("cuda.unified", "a", "graph", 100),
      make_row("cuda.unified#control", "a", "graph", 100), make_row("cudnn.sdpa", "a", "graph", 110)};
  set_peer_ratios(rows);
  ASSERT_TRUE(rows[1].vs_peer);
  EXPECT_EQ(rows[1].vs_peer->kernel, "cudnn.sdpa");
  EXPECT_DOUBLE_EQ(rows[1].vs_peer->ratio, 1.1);
  EXPECT_FALSE(rows[0].vs_peer);
  EXPECT_FALSE(rows[2].vs_peer);
  EXPECT_FALSE(rows[3].vs_peer);
}

TEST(PeerRatio, TheFirstSelectedPeerIsTheReferenceEvenWhenItDidNotRun) {
  std::vector<ResultRow> rows = {
      make_row("cuda.unified", "a", "graph", 100), make_row("cudnn.sdpa", "a", "graph", 120),
      make_row("cudnn.other", "a", "graph", 60),   make_row("cuda.unified", "b", "graph", 100),
      make_row("cudnn.sdpa", "b", "graph", 0, "declined"), make_row("cudnn.other", "b", "graph", 60)};
  set_peer_ratios(rows);
  ASSERT_TRUE(rows[0].vs_peer && rows[2].vs_peer);
  EXPECT_EQ(rows[0].vs_peer->kernel, "cudnn.sdpa");
  EXPECT_DOUBLE_EQ(rows[0].vs_peer->ratio, 1.2);
  EXPECT_EQ(rows[2].vs_peer->kernel, "cudnn.sdpa");  // the second peer against the first
  EXPECT_DOUBLE_EQ(rows[2].vs_peer->ratio, 2.0);
  EXPECT_FALSE(rows[1].vs_peer);
  for (std::size_t i = 3; i < rows.size(); ++i) EXPECT_FALSE(rows[i].vs_peer) << rows[i].kernel;
}

TEST(PeerRatio, SummaryCountsGeomeanAndWorstPerPeerKernelAndMode) {
  std::vector<ResultRow> rows = {
      make_row("cuda.unified", "a", "graph", 50),  make_row("cudnn.sdpa", "a", "graph", 100),
      make_row("cuda.unified", "b", "graph", 400), make_row("cudnn.sdpa", "b", "graph", 100),
      make_row("cuda.unified", "c", "graph", 25),  make_row("cudnn.sdpa", "c", "graph", 100),
      make_row("cuda.unified", "a", "eager", 100), make_row("cudnn.sdpa", "a", "eager", 100)};
  set_peer_ratios(rows);
  const json s = peer_summary(rows);
  ASSERT_EQ(s.size(), 2u) << s.dump();
  EXPECT_EQ(s[0]["peer"], "cudnn.sdpa");
  EXPECT_EQ(s[0]["kernel"], "cuda.unified");
  EXPECT_EQ(s[0]["mode"], "graph");
  EXPECT_EQ(s[0]["rows"], 3);
  EXPECT_EQ(s[0]["faster"], 2);  // 2.0 and 4.0; 0.25 is slower
  EXPECT_NEAR(s[0]["geomean"].get<double>(), std::cbrt(2.0), 1e-12);  // (2 * 0.25 * 4)^(1/3)
  EXPECT_DOUBLE_EQ(s[0]["worst_ratio"].get<double>(), 0.25);
  EXPECT_EQ(s[0]["worst_case"], "g/b/bf16");
  EXPECT_EQ(s[1]["mode"], "eager");
  EXPECT_EQ(s[1]["rows"], 1);
  EXPECT_EQ(s[1]["faster"], 0);  // equal times are not faster
  EXPECT_DOUBLE_EQ(s[1]["geomean"].get<double>(), 1.0);
  EXPECT_TRUE(peer_summary({make_row("cuda.unified", "a", "graph", 50)}).empty());
}

TEST(PeerRatio, OneSummaryLinePerKernelAndMode) {
  std::vector<ResultRow> rows;
  for (int i = 0; i < 12; ++i) {
    const std::string shape = "b1_kv" + std::to_string(1024 * (i + 1));
    rows.push_back(make_row("cuda.unified", shape, "graph", i == 3 ? 100 : 50));
    rows.push_back(make_row("cudnn.sdpa", shape, "graph", i == 3 ? 93 : 54));
  }
  set_peer_ratios(rows);
  const auto lines = peer_summary_lines(peer_summary(rows));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "vs cudnn.sdpa (graph): cuda.unified faster on 11/12 rows, geomean 1.07x, worst 0.93x "
                      "(g/b1_kv4096/bf16)");
  EXPECT_TRUE(peer_summary_lines(json::array()).empty());
}

TEST(PeerRatio, RatioTextFitsItsWidth) {
  EXPECT_EQ(ratio_text(1.08), "1.08x");
  EXPECT_EQ(ratio_text(0.934), "0.93x");
  EXPECT_EQ(ratio_text(999.996), "1000.00x");
  EXPECT_EQ(ratio_text(1234.0), "1.2e+03x");
  EXPECT_EQ(ratio_text(0.005), "5.0e-03x");
  for (double v : {0.001, 0.01, 1.0, 999.996, 1e3, 1e9, 1e-9}) EXPECT_LE(ratio_text(v).size(), kRatioTextWidth) << v;
}

TEST(PeerRatio, JsonRoundTripAndCsvColumns) {
  ResultRow r = make_row("cuda.unified", "a", "graph", 100);
  r.vs_peer = PeerRatio{"cudnn.sdpa", 1.0825};
  const json j = row_to_json(r);
  EXPECT_EQ(j["vs_peer"], (json{{"kernel", "cudnn.sdpa"}, {"ratio", 1.0825}}));
  const auto back = vs_peer_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->kernel, "cudnn.sdpa");
  EXPECT_DOUBLE_EQ(back->ratio, 1.0825);
  const ResultRow plain = make_row("cuda.unified", "b", "graph", 100);
  EXPECT_FALSE(row_to_json(plain).contains("vs_peer"));
  EXPECT_FALSE(vs_peer_from_json(row_to_json(plain)));
  EXPECT_FALSE(vs_peer_from_json(json{{"vs_peer", nullptr}}));
  ResultsFile f;
  f.rows = {r, plain};
  const std::string csv = results_to_csv(f);
  const auto header_end = csv.find('\n');
  EXPECT_EQ(csv.substr(header_end - 16, 16), ",peer,peer_ratio") << csv;
  const auto row_end = csv.find('\n', header_end + 1);
  EXPECT_EQ(csv.substr(row_end - 18, 18), ",cudnn.sdpa,1.0825") << csv;
  EXPECT_EQ(csv.substr(csv.size() - 3), ",,\n") << csv;
}

TEST(PeerRatio, MalformedFieldIsAnInputErrorNamingIt) {
  const auto message = [](const json& v) {
    try {
      vs_peer_from_json(json{{"vs_peer", v}});
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(1.5), "field 'vs_peer': expected an object {kernel, ratio} or null, got 1.5");
  EXPECT_EQ(message({{"ratio", 1.5}}), "field 'vs_peer.kernel': expected a kernel name, got null");
  EXPECT_EQ(message({{"kernel", "cudnn.sdpa"}, {"ratio", "fast"}}),
            "field 'vs_peer.ratio': expected a positive number, got \"fast\"");
  EXPECT_EQ(message({{"kernel", "cudnn.sdpa"}, {"ratio", -1}}),
            "field 'vs_peer.ratio': expected a positive number, got -1");
}

TEST(PeerRatio, TableColumnOnlyWhenAPeerIsSelected) {
  TableContents c;
  c.groups = {"g"};
  c.shapes = {"a"};
  c.dtypes = {"bf16"};
  c.kernels = {"-", "cuda.unified", "cudnn.sdpa"};
  c.modes = {"graph"};
  StopRule stop;
  ResultRow mine = make_row("cuda.unified", "a", "graph", 100);
  mine.vs_peer = PeerRatio{"cudnn.sdpa", 1.08};
  const ResultRow declined = make_row("cudnn.sdpa", "a", "graph", 0, "declined");
  const auto print = [&](bool peers) {
    c.peers = peers;
    std::ostringstream os;
    ResultTable t(os, c, stop);
    t.header();
    t.row(mine);
    t.row(declined);
    return os.str();
  };
  std::istringstream with(print(true));
  std::string head, first, second;
  std::getline(with, head);
  std::getline(with, first);
  std::getline(with, second);
  ASSERT_EQ(head.size(), head.rfind("  vs_peer") + 9) << head;  // the last column
  EXPECT_EQ(first.size(), head.size()) << first;                // right-aligned under its title
  EXPECT_EQ(first.substr(first.size() - 7), "  1.08x") << first;
  EXPECT_EQ(second.substr(head.size() - 3, 3), "  -") << second;
  const std::string without = print(false);
  EXPECT_FALSE(contains(without, "vs_peer")) << without;
  EXPECT_FALSE(contains(without, "1.08x")) << without;
}

namespace {
json peer_row(const std::string& shape, const std::string& kernel, double median, double ratio) {
  json r = row(shape, kernel, "graph", "ok", median, median, median);
  if (ratio > 0) r["vs_peer"] = {{"kernel", "cudnn.sdpa"}, {"ratio", ratio}};
  return r;
}
}  // namespace

TEST(PeerRatio, MergeSumsUpThePeersOfEveryFile) {
  json first = results_doc(json::array({peer_row("a", "cuda.unified", 50, 2), peer_row("a", "cudnn.sdpa", 100, 0)}));
  first["provenance"]["peers"] = json::array({{{"peer", "cudnn.sdpa"}, {"rows", 1}}});
  const json second =
      results_doc(json::array({peer_row("b", "cuda.unified", 200, 0.5), peer_row("b", "cudnn.sdpa", 100, 0)}));
  // A file without the field:
  const json plain = results_doc(json::array({row("c", "cuda.unified", "graph", "ok", 10, 9, 11)}));
  const std::vector<std::string> paths = {write_results("peers1.json", first), write_results("peers2.json", second),
                                          write_results("peers3.json", plain)};
  const MergeResult m = merge_result_files(paths, "attnbench merge");
  EXPECT_EQ(m.doc["rows"].size(), 5u);
  const json& p = m.doc["provenance"]["peers"];
  ASSERT_EQ(p.size(), 1u) << p.dump();
  EXPECT_EQ(p[0]["kernel"], "cuda.unified");
  EXPECT_EQ(p[0]["rows"], 2);
  EXPECT_EQ(p[0]["faster"], 1);
  EXPECT_NEAR(p[0]["geomean"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(p[0]["worst_case"], "g/b/bf16");
  EXPECT_FALSE(merge_result_files({paths[2]}, "m").doc["provenance"].contains("peers"));

  json bad = second;
  bad["rows"][1]["vs_peer"] = "fast";
  const std::string bad_path = write_results("peers_bad.json", bad);
  try {
    merge_result_files({paths[0], bad_path}, "m");
    ADD_FAILURE() << "a malformed vs_peer merged";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), bad_path + ": row #1: field 'vs_peer': expected an object {kernel, ratio} or "
                                                 "null, got \"fast\"");
  }
}

TEST(PeerRatio, CompareReadsFilesWithTheField) {
  const json with = results_doc(json::array({peer_row("a", "cuda.unified", 50, 2)}));
  const json without = results_doc(json::array({peer_row("a", "cuda.unified", 50, 0)}));
  const std::string base = write_results("peers_base.json", with), now = write_results("peers_new.json", without);
  const Result r = run_cli("compare " + base + " " + now);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "SAME 1")) << r.output;
}
