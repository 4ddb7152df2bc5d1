// compare: the verdict rule, row matching, the CI exit codes, and the CLI's errors.
#include <gtest/gtest.h>

#include "attnbench/knobs.hpp"
#include "cli_helpers.hpp"
#include "compare.hpp"
#include "errors.hpp"

using namespace attnbench;
using namespace testcli;
using nlohmann::json;

namespace {
Stats st(double median, double q1, double q3) {
  Stats s;
  s.median = median;
  s.q1 = q1;
  s.q3 = q3;
  return s;
}

// BASE and NEW with one row per verdict; the shape name says which.
json base_rows() {
  return json::array({row("same", "k", "graph", "ok", 100, 99.5, 100.5), row("fast", "k", "graph", "ok", 100, 99.5, 100.5),
                      row("slow", "k", "graph", "ok", 100, 99.5, 100.5), row("ambig", "k", "graph", "ok", 100, 80, 120),
                      row("gate", "k", "graph", "ok", 100, 99.5, 100.5), row("gone", "k", "graph", "ok", 100, 99.5, 100.5),
                      row("declined", "k", "graph", "declined")});
}
json new_rows() {
  return json::array({row("same", "k", "graph", "ok", 100.4, 99.9, 100.9), row("fast", "k", "graph", "ok", 90, 89.5, 90.5),
                      row("slow", "k", "graph", "ok", 110, 109.5, 110.5), row("ambig", "k", "graph", "ok", 104, 85, 125),
                      row("gate", "k", "graph", "mismatch"), row("fresh", "k", "graph", "ok", 50, 49, 51),
                      row("declined", "k", "graph", "declined")});
}

std::map<std::string, Verdict> verdicts(const Comparison& c) {
  std::map<std::string, Verdict> v;
  for (const auto& r : c.rows) v[r.shape] = r.verdict;
  return v;
}

std::vector<TimedRow> rows_of(const json& rows) { return timed_rows_from_json(results_doc(rows), "mem.json"); }
}  // namespace

TEST(CompareRule, TimingVerdicts) {
  const Stats base = st(100, 99.5, 100.5);
  EXPECT_EQ(timing_verdict(base, st(100.4, 99.9, 100.9), 0.02), Verdict::same);
  EXPECT_EQ(timing_verdict(base, st(90, 89.5, 90.5), 0.02), Verdict::fast);
  EXPECT_EQ(timing_verdict(base, st(110, 109.5, 110.5), 0.02), Verdict::slow);
  // Quartiles apart but under the practical threshold: the same for practical purposes.
  EXPECT_EQ(timing_verdict(st(100, 99.9, 100.1), st(101, 100.9, 101.1), 0.02), Verdict::same);
  // 10% apart on the medians, but the intervals overlap: too noisy to tell.
  EXPECT_EQ(timing_verdict(st(100, 80, 120), st(110, 90, 130), 0.02), Verdict::ambig);
  // Overlapping but one side noisy: AMBIG, not SAME.
  EXPECT_EQ(timing_verdict(base, st(100, 95, 105), 0.02), Verdict::ambig);
  // A larger threshold turns a 10% step into SAME (it is within the practical threshold and quiet at 20%).
  EXPECT_EQ(timing_verdict(base, st(110, 109.5, 110.5), 0.2), Verdict::same);
}

TEST(CompareRule, EveryVerdictFromFiles) {
  const Comparison c = compare_rows(rows_of(base_rows()), rows_of(new_rows()), {});
  const auto v = verdicts(c);
  EXPECT_EQ(v.at("same"), Verdict::same);
  EXPECT_EQ(v.at("fast"), Verdict::fast);
  EXPECT_EQ(v.at("slow"), Verdict::slow);
  EXPECT_EQ(v.at("ambig"), Verdict::ambig);
  EXPECT_EQ(v.at("gate"), Verdict::gate);
  EXPECT_EQ(v.at("gone"), Verdict::only_base);
  EXPECT_EQ(v.at("fresh"), Verdict::only_new);
  EXPECT_EQ(v.at("declined"), Verdict::na);
  EXPECT_EQ(c.rows.size(), 8u);
  EXPECT_EQ(c.counts.at(Verdict::slow), 1);
  EXPECT_EQ(c.new_failures, 1);
  for (const auto& r : c.rows)
    if (r.shape == "slow") { EXPECT_NEAR(*r.ratio, 1.1, 1e-12); }
}

TEST(CompareRule, MatchesOnModeKernelAndNonDefaultKnobs) {
  // A knob at its table default matches a row that does not carry it (a knob added to the table later).
  const KnobSpec* spec = find_knob("ATTNBENCH_Q_MAJOR_GRID");
  ASSERT_NE(spec, nullptr);
  const std::string other = spec->default_value == "0" ? "1" : "0";
  const json base = json::array({row("s", "k", "graph", "ok", 100, 99.5, 100.5)});
  const json now = json::array({row("s", "k", "graph", "ok", 100, 99.5, 100.5, {{spec->name, spec->default_value}}),
                                row("s", "k", "graph", "ok", 100, 99.5, 100.5, {{spec->name, other}}),
                                row("s", "k", "eager", "ok", 100, 99.5, 100.5), row("s", "k2", "graph", "ok", 1, 1, 1)});
  const Comparison c = compare_rows(rows_of(base), rows_of(now), {});
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::same);
  EXPECT_EQ(c.rows[1].verdict, Verdict::only_new);  // a non-default value is another configuration
  EXPECT_EQ(c.rows[2].verdict, Verdict::only_new);  // eager vs graph never match
  EXPECT_EQ(c.rows[3].verdict, Verdict::only_new);
}

TEST(CompareRule, AgainstAKernelWithinRows) {
  const json rows = json::array({row("s", "torch.sdpa.flash", "graph", "ok", 100, 99.5, 100.5),
                                 row("s", "cuda.unified", "graph", "ok", 80, 79.5, 80.5),
                                 row("s", "cuda.unified", "eager", "ok", 80, 79.5, 80.5),
                                 row("t", "cuda.unified", "graph", "mismatch"),
                                 row("t", "torch.sdpa.flash", "graph", "ok", 10, 10, 10),
                                 row("u", "cuda.unified", "graph", "ok", 5, 5, 5)});  // no torch row for u at all
  CompareOptions o;
  o.against = "torch.sdpa.flash";
  const Comparison c = compare_against(rows_of(rows), o);
  ASSERT_EQ(c.rows.size(), 3u);  // shape u is not a comparison
  EXPECT_EQ(c.rows[0].verdict, Verdict::fast);
  EXPECT_EQ(c.rows[0].base_kernel, "torch.sdpa.flash");
  EXPECT_NEAR(*c.rows[0].ratio, 0.8, 1e-12);
  EXPECT_EQ(c.rows[1].verdict, Verdict::only_new);  // no eager torch row
  EXPECT_EQ(c.rows[2].verdict, Verdict::gate);
  o.against = "nope";
  EXPECT_THROW(compare_against(rows_of(rows), o), UsageError);
}

TEST(CompareRule, FailPolicies) {
  const Comparison c = compare_rows(rows_of(base_rows()), rows_of(new_rows()), {});
  EXPECT_EQ(compare_exit_code(c, parse_fail_on({})), 0);
  EXPECT_EQ(compare_exit_code(c, parse_fail_on({"slow"})), 1);
  EXPECT_THROW(parse_fail_on({"fast"}), UsageError);
  // Without SLOW or GATE rows: slow passes, mismatch trips on a NEW row that failed in BASE too, any trips on
  // a row missing from NEW.
  const json quiet_new = json::array({row("a", "k", "graph", "ok", 100, 99.5, 100.5), row("b", "k", "graph", "mismatch")});
  const json quiet_base = json::array({row("a", "k", "graph", "ok", 100, 99.5, 100.5), row("b", "k", "graph", "mismatch")});
  const Comparison q = compare_rows(rows_of(quiet_base), rows_of(quiet_new), {});
  EXPECT_EQ(compare_exit_code(q, parse_fail_on({"slow"})), 0);
  EXPECT_EQ(compare_exit_code(q, parse_fail_on({"mismatch"})), 1);
  json base_more = quiet_base;
  base_more.push_back(row("c", "k", "graph", "ok", 1, 1, 1));
  const Comparison m = compare_rows(rows_of(base_more), rows_of(json::array({quiet_new[0]})), {});
  EXPECT_EQ(compare_exit_code(m, parse_fail_on({"slow", "mismatch"})), 0);
  EXPECT_EQ(compare_exit_code(m, parse_fail_on({"any"})), 1);
}

TEST(CompareRule, Thresholds) {
  EXPECT_DOUBLE_EQ(parse_threshold("2%"), 0.02);
  EXPECT_DOUBLE_EQ(parse_threshold("0.05"), 0.05);
  for (const char* bad : {"", "abc", "2%%", "0", "1", "150%", "-0.1", "0.02x"}) EXPECT_THROW(parse_threshold(bad), UsageError) << bad;
}

TEST(CompareCli, TableSummaryJsonAndExitCodes) {
  const std::string base = write_results("base.json", results_doc(base_rows()));
  const std::string now = write_results("new.json", results_doc(new_rows()));
  const std::string out = tmp_path("cmp.json");
  const Result r = run_cli("compare " + base + " " + now + " --json " + out);
  EXPECT_EQ(r.code, 0) << r.output;  // no --fail-on: report only
  for (const char* s : {"SAME", "FAST", "SLOW", "AMBIG", "GATE", "only-in-base", "only-in-new",
                        "SAME 1, FAST 1, SLOW 1, AMBIG 1, GATE 1, n/a 1, only in base 1, only in new 1"})
    EXPECT_TRUE(contains(r.output, s)) << s << "\n" << r.output;
  const json j = read_json(out);
  EXPECT_EQ(j["schema"], "attnbench.compare/1");
  EXPECT_EQ(j["rows"].size(), 8u);
  EXPECT_EQ(j["summary"]["SLOW"], 1);
  for (const auto& row : j["rows"])
    if (row["shape"] == "fast") { EXPECT_NEAR(row["speedup"].get<double>(), 100.0 / 90.0, 1e-9); }

  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on slow").code, 1);
  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on mismatch").code, 1);  // the GATE row
  EXPECT_EQ(run_cli("compare " + base + " " + base + " --fail-on any").code, 0);
  // Only the SLOW row differs: mismatch passes, slow fails.
  json slow_only = base_rows();
  slow_only[2] = row("slow", "k", "graph", "ok", 110, 109.5, 110.5);
  const std::string slow_path = write_results("slow.json", results_doc(slow_only));
  EXPECT_EQ(run_cli("compare " + base + " " + slow_path + " --fail-on mismatch").code, 0);
  EXPECT_EQ(run_cli("compare " + base + " " + slow_path + " --fail-on slow").code, 1);
  EXPECT_EQ(run_cli("compare " + base + " " + slow_path + " --fail-on slow --threshold 20%").code, 0);
}

TEST(CompareCli, AgainstOverSeveralFiles) {
  const std::string ours = write_results("ours.json", results_doc(json::array({row("s", "cuda.unified", "graph", "ok", 50, 49.5, 50.5)})));
  const std::string peer = write_results("peer.json", results_doc(json::array({row("s", "torch.sdpa.flash", "graph", "ok", 100, 99.5, 100.5)})));
  const Result r = run_cli("compare --against torch.sdpa.flash " + ours + " " + peer);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "0.500")) << r.output;
  EXPECT_TRUE(contains(r.output, "FAST")) << r.output;
}

TEST(CompareCli, UsageErrorsNameTheFile) {
  const std::string good = write_results("good.json", results_doc(base_rows()));
  const auto expect2 = [](const std::string& args, const std::string& fragment) {
    const Result r = run_cli(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, fragment)) << args << "\n" << r.output;
  };
  expect2("compare /nonexistent/base.json " + good, "/nonexistent/base.json");
  const std::string shapes = ATTNBENCH_SOURCE_DIR "/shapes/decode.json";
  expect2("compare " + good + " " + shapes, shapes + ": not an attnbench results file");
  const std::string broken = write_text("broken.json", "{\"schema\": ");
  expect2("compare " + good + " " + broken, broken + ": malformed JSON");
  const std::string bad_row = write_text("badrow.json", R"({"schema": "attnbench.results/1", "rows": [{"group": "g"}]})");
  expect2("compare " + good + " " + bad_row, bad_row + ": row #0: field 'shape'");
  expect2("compare " + good + " " + good + " --threshold abc", "--threshold: 'abc'");
  expect2("compare " + good + " " + good + " --threshold 150%", "--threshold");
  expect2("compare " + good + " " + good + " --fail-on fast", "--fail-on: 'fast'");
  expect2("compare " + good, "BASE.json NEW.json");
  expect2("compare " + good + " " + good + " --json /nonexistent/dir/c.json", "/nonexistent/dir");
}
