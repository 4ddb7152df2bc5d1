// What a run reports beyond the numbers: whether each timing settled (JSON, CSV, the table's marker), a run in
// which nothing ran, progress when stderr is not a terminal, and a table whose columns fit their contents.
#include <gtest/gtest.h>

#include <sstream>

#include "cli_helpers.hpp"
#include "results/printer.hpp"

using namespace attnbench;
using namespace testcli;
using nlohmann::json;

namespace {
const char* kOneShape = R"({"group": "tiny", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "block_size": 16},
  "shapes": [{"name": "p", "batch": 1, "seqlen_k": 24}, {"name": "d", "batch": 2, "seqlen_q": 1, "seqlen_k": 40}]})";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

// The cells of one CSV line (quoted fields may hold commas and doubled quotes).
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') cells.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) cells.emplace_back();
    else cells.back() += c;
  }
  return cells;
}

std::map<std::string, std::string> csv_row(const std::string& header, const std::string& line) {
  const auto names = csv_cells(header), values = csv_cells(line);
  std::map<std::string, std::string> m;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) m[names[i]] = values[i];
  return m;
}

struct Token {
  size_t begin, end;
};
std::vector<Token> tokens(const std::string& line) {
  std::vector<Token> t;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == ' ') { ++i; continue; }
    const size_t b = i;
    while (i < line.size() && line[i] != ' ') ++i;
    t.push_back({b, i});
  }
  return t;
}

// Every line's first `columns` cells start where the header's do (text columns, the first `left`) or end
// where the header's do (number columns).
void expect_aligned(const std::vector<std::string>& lines, size_t columns, size_t left) {
  ASSERT_FALSE(lines.empty());
  const auto head = tokens(lines[0]);
  ASSERT_EQ(head.size(), columns) << lines[0];
  for (const auto& l : lines) {
    const auto t = tokens(l);
    ASSERT_GE(t.size(), columns) << l;
    for (size_t i = 0; i < columns; ++i) {
      if (i < left) EXPECT_EQ(t[i].begin, head[i].begin) << "column " << i << " of\n" << l << "\n" << lines[0];
      else EXPECT_EQ(t[i].end, head[i].end) << "column " << i << " of\n" << l << "\n" << lines[0];
    }
  }
}
}  // namespace

TEST(RunReport, UnsettledTimingIsMarkedInJsonCsvAndTable) {
  const std::string shapes = write_text("settle_shapes.json", kOneShape);
  const std::string out = tmp_path("unsettled.json"), csv = tmp_path("unsettled.csv");
  // A max-noise no sample set can exceed (relative stdev <= sqrt(n)), and a timeout far under the 2000-sample cap
  // (a sample takes >= 20 us): the timeout alone is why.
  const Result r = run_cli("run --shapes " + shapes + " --filter tiny/p/bf16 --backend cpu --mode eager "
                           "--min-samples 1000000 --max-noise 1000 --timeout 0.01 --rounds 1 --no-progress -o " + out + " --csv " +
                           csv);
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = read_json(out);
  ASSERT_EQ(j["rows"].size(), 1u);
  const json& row = j["rows"][0];
  EXPECT_EQ(row["status"], "ok");
  EXPECT_EQ(row["settled"], false);
  // On a loaded machine the first sample alone can outlast the timeout; the reason then also says why one sample
  // has no spread, so only its start is fixed.
  const std::string start = "timeout 0.01 s reached with n=" + std::to_string(row["time_us"]["n"].get<int>()) +
                            " of min 1000000";
  ASSERT_TRUE(row["unsettled"].is_string()) << row.dump();
  const std::string why = row["unsettled"];
  EXPECT_EQ(why.rfind(start, 0), 0u) << why;
  EXPECT_TRUE(contains(r.output, "~ " + why)) << r.output;
  EXPECT_TRUE(contains(r.output, "~ the timing did not meet the stop rule (n >= 1000000 and relative stdev <= 1000")) << r.output;

  std::ifstream f(csv);
  std::string header, line;
  std::getline(f, header);
  std::getline(f, line);
  const auto cells = csv_row(header, line);
  EXPECT_EQ(cells.at("settled"), "false");
  EXPECT_EQ(cells.at("unsettled"), why);
  // The row's dims as columns of their own: the shape's numbers, without parsing its name.
  EXPECT_EQ(cells.at("dims.heads"), "2");
  EXPECT_EQ(cells.at("dims.kv_heads"), "1");
  EXPECT_EQ(cells.at("dims.head_size"), "64");
  EXPECT_EQ(cells.at("dims.max_seqlen_k"), "24");
  EXPECT_EQ(cells.at("dims.causal"), "true");
  EXPECT_NEAR(std::stod(cells.at("dims.scale")), 0.125, 1e-6);

  // In rounds, the first round that stopped short is named, with the round's share of the rule.
  const Result r2 = run_cli("run --shapes " + shapes + " --filter tiny/p/bf16 --backend cpu --mode eager "
                            "--min-samples 1000000 --max-noise 1000 --timeout 0.01 --rounds 2 --no-progress --force -o " + out);
  ASSERT_EQ(r2.code, 0) << r2.output;
  const json row2 = read_json(out)["rows"][0];
  // Two rounds, or one where the first overran the whole 0.01 s (a loaded host): the timeout bounds them all.
  EXPECT_GE(row2["rounds"]["count"].get<int>(), 1);
  EXPECT_LE(row2["rounds"]["count"].get<int>(), 2);
  EXPECT_EQ(row2["unsettled"].get<std::string>().rfind("round 1 of 2: timeout 0.005 s reached with n=", 0), 0u)
      << row2.dump();
  EXPECT_NE(row2["unsettled"].get<std::string>().find(" of min 500000"), std::string::npos) << row2.dump();
}

TEST(RunReport, SettledTimingAndUntimedRows) {
  // n >= 3 samples with relative stdev <= 100 always holds at n = 3 (it cannot exceed sqrt(n) for times > 0).
  const std::string shapes = write_text("settle_shapes.json", kOneShape);
  const std::string out = tmp_path("settled.json"), csv = tmp_path("settled.csv");
  const Result r = run_cli("run --shapes " + shapes + " --dtype bf16 --backend cpu --mode eager,graph --min-samples 3 "
                           "--max-noise 100 --timeout 5 --no-progress --fail-if-nothing-ran -o " + out + " --csv " + csv);
  ASSERT_EQ(r.code, 0) << r.output;  // something ran: the flag changes nothing
  EXPECT_FALSE(contains(r.output, "nothing ran")) << r.output;
  EXPECT_FALSE(contains(r.output, "did not meet the stop rule")) << "no legend without an unsettled row\n" << r.output;
  const json j = read_json(out);
  ASSERT_EQ(j["rows"].size(), 4u);
  for (const auto& row : j["rows"]) {
    ASSERT_TRUE(row.contains("settled") && row.contains("unsettled")) << row.dump();
    EXPECT_TRUE(row["unsettled"].is_null()) << row.dump();
    if (row["mode"] == "eager") EXPECT_EQ(row["settled"], true) << row.dump();
    else EXPECT_TRUE(row["settled"].is_null()) << "a declined row was not timed: " << row.dump();
  }
  std::ifstream f(csv);
  std::string header, line;
  std::getline(f, header);
  while (std::getline(f, line)) {
    const auto cells = csv_row(header, line);
    EXPECT_EQ(cells.at("settled"), cells.at("mode") == "eager" ? "true" : "") << line;
    EXPECT_EQ(cells.at("unsettled"), "") << line;
  }
}

TEST(RunReport, NothingRanIsSaidAndFailsOnlyWithTheFlag) {
  const std::string shapes = write_text("none_shapes.json", kOneShape);
  const std::string base = "run --shapes " + shapes + " --dtype bf16 --backend cpu --mode graph -o " + tmp_path("none.json");
  const std::string said = "nothing ran: all 2 rows declined (reasons: 2 x \"graph mode needs the CUDA backend\")";
  Result r = run_cli(base);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, said)) << r.output;
  // Progress goes to stderr as plain lines when it is not a terminal (here a pipe), one per case as it starts.
  EXPECT_TRUE(contains(r.output, "[1/2] tiny/p bf16\n")) << r.output;
  // From the second case on, the time so far and an estimate of what is left.
  EXPECT_TRUE(contains(r.output, "[2/2] tiny/d bf16  (")) << r.output;
  EXPECT_TRUE(contains(r.output, " so far, about ")) << r.output;
  EXPECT_TRUE(contains(r.output, " left)\n")) << r.output;
  EXPECT_FALSE(contains(r.output, "\r")) << r.output;
  r = run_cli(base + " --fail-if-nothing-ran --no-progress --force");  // the same output, another command
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, said)) << r.output;
  EXPECT_FALSE(contains(r.output, "[1/2]")) << r.output;

  const std::string sweep = "sweep --shapes " + shapes + " --dtype bf16 --backend cpu --mode graph --no-progress "
                            "--knob ATTNBENCH_CPU_MAX_GFLOP=0,64 -o " + tmp_path("none_sweep.json");
  r = run_cli(sweep);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "nothing ran: all 4 rows declined")) << r.output;
  EXPECT_EQ(run_cli(sweep + " --fail-if-nothing-ran --force").code, 1);
}

TEST(RunReport, TableColumnsFitLongNames) {
  TableContents contents;
  contents.groups = {"g", "a_group_name_of_thirty_characters"};
  contents.shapes = {"s", "d128_h32kv8_b8_kv4096_with_a_much_longer_name_than_33"};
  contents.dtypes = {"bf16", "fp16"};
  contents.kernels = {"-", "cpu.gated_block", "cuda.gated_block", "cpu.unified"};
  contents.modes = {"eager", "graph"};
  std::ostringstream os;
  StopRule stop;
  ResultTable t(os, contents, stop);
  t.header();
  const auto make = [](const std::string& group, const std::string& shape, const std::string& kernel,
                       const std::string& status) {
    ResultRow r;
    r.group = group;
    r.shape = shape;
    r.dtype = "bf16";
    r.kernel = kernel;
    r.mode = "eager";
    r.status = status;
    return r;
  };
  ResultRow ok = make("a_group_name_of_thirty_characters", "s", "cuda.gated_block", "ok");
  ok.gate = GateResult{};
  ok.gate->max_abs = 0.0123;
  ok.time_us = summarize({12.5, 13.5});
  ok.tflops = 1234.5;
  ok.gbps = 4321.0;
  ok.settled = true;
  t.row(ok);
  ResultRow noisy = ok;
  noisy.shape = "d128_h32kv8_b8_kv4096_with_a_much_longer_name_than_33";
  noisy.kernel = "cpu.gated_block";
  noisy.time_us = summarize({123456789.0});  // wider than fixed-point fits: printed in scientific notation
  noisy.gate->max_abs = 98765432.1;
  noisy.settled = false;
  noisy.unsettled = "timeout 10 s reached with n=1 of min 20";
  t.row(noisy);
  ResultRow declined = make("g", "s", "-", "declined");
  declined.reason = "no selected kernel implements op attention";
  t.row(declined);
  t.row(make("g", "d128_h32kv8_b8_kv4096_with_a_much_longer_name_than_33", "cpu.unified", "mismatch"));
  t.legend();
  auto lines = lines_of(os.str());
  ASSERT_EQ(lines.size(), 6u) << os.str();
  EXPECT_EQ(lines.back().rfind("~ the timing did not meet the stop rule", 0), 0u) << lines.back();
  lines.pop_back();
  expect_aligned(lines, 10, 7);
  EXPECT_TRUE(contains(lines[2], "~1.235e+08")) << lines[2];
  EXPECT_TRUE(contains(lines[2], "~ timeout 10 s reached with n=1 of min 20")) << lines[2];
}

TEST(RunReport, RunTableFitsLongGroupAndShapeNames) {
  const std::string shapes = write_text("long_names.json", R"({"group": "a_group_name_longer_than_13",
    "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "block_size": 16, "dtypes": ["bf16"]},
    "shapes": [{"name": "a_shape_name_that_is_much_longer_than_thirty_three", "batch": 1, "seqlen_k": 24},
               {"name": "s", "batch": 1, "seqlen_q": 1, "seqlen_k": 40}]})");
  const Result r = run_cli("run --shapes " + shapes + " --backend cpu --mode graph --no-progress -o " +
                           tmp_path("long_names_results.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto all = lines_of(r.output);
  std::vector<std::string> table;
  for (const auto& l : all)
    if (l.rfind("group ", 0) == 0 || l.rfind("a_group_name_longer_than_13 ", 0) == 0) table.push_back(l);
  ASSERT_EQ(table.size(), 3u) << r.output;
  expect_aligned(table, 10, 7);
}

TEST(RunReport, ProgressDurationsReadAtAGlance) {
  EXPECT_EQ(duration_text(0.2), "0 s");
  EXPECT_EQ(duration_text(42.4), "42 s");
  EXPECT_EQ(duration_text(185), "3 min 05 s");
  EXPECT_EQ(duration_text(3720), "1 h 02 min");
  EXPECT_EQ(duration_text(-3), "0 s");
}
