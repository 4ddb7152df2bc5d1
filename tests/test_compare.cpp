// compare: the verdict rule, row matching, the CI exit codes, and the CLI's errors.
#include <gtest/gtest.h>

#include "attnbench/knobs.hpp"
#include "cli_helpers.hpp"
#include "compare/compare.hpp"
#include "core/errors.hpp"

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

json timed() { return row("", "k", "graph", "ok", 100, 99.5, 100.5); }

// An ok row without its timing: time_us null, or (`drop`) the field left out.
json untimed(const std::string& shape, bool drop) {
  json r = row(shape, "k", "graph", "ok");
  if (drop) r.erase("time_us");
  else r["time_us"] = nullptr;
  return r;
}

json named(json r, const std::string& shape) {
  r["shape"] = shape;
  return r;
}

// BASE and NEW with one row per verdict; the shape name says which (lost_*: timed in BASE, not in NEW).
json base_rows() {
  return json::array({named(timed(), "same"), named(timed(), "fast"), named(timed(), "slow"),
                      row("ambig", "k", "graph", "ok", 100, 80, 120), named(timed(), "gate"), named(timed(), "gone"),
                      named(timed(), "lost_declined"), named(timed(), "lost_untimed"), named(timed(), "lost_no_field"),
                      row("declined", "k", "graph", "declined")});
}
json new_rows() {
  json declined = row("lost_declined", "k", "graph", "declined");
  declined["reason"] = "no CUDA device";
  return json::array({row("same", "k", "graph", "ok", 100.4, 99.9, 100.9), row("fast", "k", "graph", "ok", 90, 89.5, 90.5),
                      row("slow", "k", "graph", "ok", 110, 109.5, 110.5), row("ambig", "k", "graph", "ok", 104, 85, 125),
                      row("gate", "k", "graph", "mismatch"), row("fresh", "k", "graph", "ok", 50, 49, 51), declined,
                      untimed("lost_untimed", false), untimed("lost_no_field", true),
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
  EXPECT_EQ(v.at("lost_declined"), Verdict::lost);
  EXPECT_EQ(v.at("lost_untimed"), Verdict::lost);
  EXPECT_EQ(v.at("lost_no_field"), Verdict::lost);
  EXPECT_EQ(v.at("declined"), Verdict::na);  // declined on both sides: nothing was lost
  EXPECT_EQ(c.rows.size(), 11u);
  EXPECT_EQ(c.counts.at(Verdict::slow), 1);
  EXPECT_EQ(c.counts.at(Verdict::lost), 3);
  EXPECT_EQ(c.new_failures, 1);
  for (const auto& r : c.rows) {
    if (r.shape == "slow") { EXPECT_NEAR(*r.ratio, 1.1, 1e-12); }
    if (r.shape == "lost_declined") { EXPECT_EQ(r.note, "timed in BASE, declined in NEW: no CUDA device"); }
  }
  // The hole this closes: a kernel that stopped running must not pass a gate that fails on slow or any.
  EXPECT_EQ(compare_exit_code(c, parse_fail_on({"slow"})), 1);
  EXPECT_EQ(compare_exit_code(c, parse_fail_on({"any"})), 1);
}

TEST(CompareRule, LostFailsUnderSlowAndAnyOnly) {
  for (const json& now : {row("s", "k", "graph", "declined"), untimed("s", false), untimed("s", true)}) {
    const Comparison c = compare_rows(rows_of(json::array({named(timed(), "s")})), rows_of(json::array({now})), {});
    ASSERT_EQ(c.rows.size(), 1u);
    EXPECT_EQ(c.rows[0].verdict, Verdict::lost) << now.dump();
    EXPECT_EQ(compare_exit_code(c, parse_fail_on({})), 0);
    EXPECT_EQ(compare_exit_code(c, parse_fail_on({"slow"})), 1);
    EXPECT_EQ(compare_exit_code(c, parse_fail_on({"any"})), 1);
    EXPECT_EQ(compare_exit_code(c, parse_fail_on({"mismatch"})), 0);
  }
  // Not LOST: a mismatch stays GATE, a row that was not timed in BASE either is n/a.
  const Comparison g = compare_rows(rows_of(json::array({named(timed(), "s")})),
                                    rows_of(json::array({row("s", "k", "graph", "error")})), {});
  EXPECT_EQ(g.rows[0].verdict, Verdict::gate);
  const Comparison n = compare_rows(rows_of(json::array({untimed("s", false)})),
                                    rows_of(json::array({row("s", "k", "graph", "declined")})), {});
  EXPECT_EQ(n.rows[0].verdict, Verdict::na);
}

TEST(CompareRule, UnsettledSideIsAmbigWithItsReason) {
  const json base = json::array({named(timed(), "slow"), named(timed(), "same")});
  json now = json::array({row("slow", "k", "graph", "ok", 110, 109.5, 110.5), row("same", "k", "graph", "ok", 100, 99.5, 100.5)});
  now[0]["settled"] = false;
  now[0]["unsettled"] = "timeout 10 s reached with n=11 of min 20";
  now[1]["settled"] = true;
  Comparison c = compare_rows(rows_of(base), rows_of(now), {});
  EXPECT_EQ(c.rows[0].verdict, Verdict::ambig);  // SLOW on the numbers, but NEW never settled
  EXPECT_EQ(c.rows[0].note, "NEW unsettled: timeout 10 s reached with n=11 of min 20");
  EXPECT_NEAR(*c.rows[0].ratio, 1.1, 1e-12);
  EXPECT_EQ(c.rows[1].verdict, Verdict::same);
  EXPECT_EQ(compare_exit_code(c, parse_fail_on({"any"})), 0);
  // The same from the other side, and in --against.
  c = compare_rows(rows_of(now), rows_of(base), {});
  EXPECT_EQ(c.rows[0].verdict, Verdict::ambig);
  EXPECT_EQ(c.rows[0].note, "BASE unsettled: timeout 10 s reached with n=11 of min 20");
  json pooled = json::array({row("s", "ref", "graph", "ok", 100, 99.5, 100.5), row("s", "k", "graph", "ok", 50, 49.5, 50.5)});
  pooled[1]["settled"] = false;
  CompareOptions o;
  o.against = {"ref"};
  c = compare_against(rows_of(pooled), o);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::ambig);
  EXPECT_EQ(c.rows[0].note, "NEW unsettled");
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

// --ignore-knob: one binary's rows under two settings of a knob match (an A/B of the knob); other knobs still split.
TEST(CompareRule, IgnoredKnobsLeaveTheMatchingKey) {
  const json base = json::array({row("s", "k", "graph", "ok", 100, 99.5, 100.5, {{"ATTNBENCH_SM90_QO", "threads"}}),
                                 row("t", "k", "graph", "ok", 100, 99.5, 100.5,
                                     {{"ATTNBENCH_SM90_QO", "threads"}, {"ATTNBENCH_SM90_STAGES", "2"}})});
  const json now = json::array({row("s", "k", "graph", "ok", 80, 79.5, 80.5),
                                row("t", "k", "graph", "ok", 80, 79.5, 80.5, {{"ATTNBENCH_SM90_STAGES", "3"}})});
  EXPECT_EQ(verdicts(compare_rows(rows_of(base), rows_of(now), {})),
            (std::map<std::string, Verdict>{{"s", Verdict::only_base}, {"t", Verdict::only_base}}));
  CompareOptions o;
  o.ignore_knobs = {"ATTNBENCH_SM90_QO"};
  const Comparison c = compare_rows(rows_of(base), rows_of(now), o);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::fast);
  EXPECT_EQ(c.rows[0].base_knobs.at("ATTNBENCH_SM90_QO"), "threads");
  EXPECT_EQ(c.rows[1].verdict, Verdict::only_new);  // STAGES 3 against 2: still another configuration
  EXPECT_EQ(c.rows[2].verdict, Verdict::only_base);
}

TEST(CompareRule, AgainstAKernelWithinRows) {
  const json rows = json::array({row("s", "torch.sdpa.flash", "graph", "ok", 100, 99.5, 100.5),
                                 row("s", "cuda.unified", "graph", "ok", 80, 79.5, 80.5),
                                 row("s", "cuda.unified", "eager", "ok", 80, 79.5, 80.5),
                                 row("t", "cuda.unified", "graph", "mismatch"),
                                 row("t", "torch.sdpa.flash", "graph", "ok", 10, 10, 10),
                                 row("u", "cuda.unified", "graph", "ok", 5, 5, 5)});  // no torch row for u at all
  CompareOptions o;
  o.against = {"torch.sdpa.flash"};
  const Comparison c = compare_against(rows_of(rows), o);
  ASSERT_EQ(c.rows.size(), 3u);  // shape u is not a comparison
  EXPECT_EQ(c.rows[0].verdict, Verdict::fast);
  EXPECT_EQ(c.rows[0].base_kernel, "torch.sdpa.flash");
  EXPECT_NEAR(*c.rows[0].ratio, 0.8, 1e-12);
  EXPECT_EQ(c.rows[1].verdict, Verdict::only_new);  // no eager torch row
  EXPECT_EQ(c.rows[2].verdict, Verdict::gate);
  o.against = {"nope"};
  EXPECT_THROW(compare_against(rows_of(rows), o), UsageError);
}

// Several reference kernels: each case against the fastest of them that is ok and timed (a failed or untimed
// peer row never becomes the bar), the note naming it; a named kernel with no row at all is a usage error.
TEST(CompareRule, AgainstTheFastestOfSeveralKernels) {
  const json rows = json::array({row("s", "cudnn.sdpa", "graph", "ok", 100, 99.5, 100.5),
                                 row("s", "torch.sdpa.cudnn", "graph", "ok", 90, 89.5, 90.5),
                                 row("s", "cuda.unified", "graph", "ok", 95, 94.5, 95.5),
                                 row("t", "cudnn.sdpa", "graph", "ok", 40, 39.5, 40.5),
                                 row("t", "torch.sdpa.cudnn", "graph", "ok", 50, 49.5, 50.5),
                                 row("t", "cuda.unified", "graph", "ok", 45, 44.5, 45.5),
                                 row("u", "cudnn.sdpa", "graph", "error"),
                                 row("u", "torch.sdpa.cudnn", "graph", "ok", 30, 29.5, 30.5),
                                 row("u", "cuda.unified", "graph", "ok", 20, 19.5, 20.5),
                                 row("v", "cudnn.sdpa", "graph", "declined"),
                                 row("v", "cuda.unified", "graph", "ok", 20, 19.5, 20.5)});
  CompareOptions o;
  o.against = {"cudnn.sdpa", "torch.sdpa.cudnn"};
  const Comparison c = compare_against(rows_of(rows), o);
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[0].base_kernel, "torch.sdpa.cudnn");  // s: 90 beats 100
  EXPECT_EQ(c.rows[0].verdict, Verdict::slow);
  EXPECT_NEAR(*c.rows[0].ratio, 95.0 / 90.0, 1e-12);
  EXPECT_EQ(c.rows[0].note, "vs torch.sdpa.cudnn");
  EXPECT_EQ(c.rows[1].base_kernel, "cudnn.sdpa");  // t: 40 beats 50
  EXPECT_EQ(c.rows[1].verdict, Verdict::slow);
  EXPECT_EQ(c.rows[2].base_kernel, "torch.sdpa.cudnn");  // u: the failed cudnn.sdpa row is not the bar
  EXPECT_EQ(c.rows[2].verdict, Verdict::fast);
  EXPECT_EQ(c.rows[2].note, "vs torch.sdpa.cudnn");
  EXPECT_EQ(c.rows[3].base_kernel, "cudnn.sdpa");  // v: only a declined row: nothing to time against
  EXPECT_EQ(c.rows[3].verdict, Verdict::na);
  EXPECT_EQ(c.rows[3].note.rfind("vs cudnn.sdpa; ", 0), 0u) << c.rows[3].note;
  // One of them alone is the old single-kernel comparison.
  o.against = {"cudnn.sdpa"};
  EXPECT_EQ(compare_against(rows_of(rows), o).rows[0].base_kernel, "cudnn.sdpa");
  // A failed NEW row is a GATE against a peer that passed untimed, whichever peer's row comes first; a peer that is
  // ok and timed beats one that is only ok; a case no peer ran is only in NEW, the note naming both.
  const auto untimed = [](json r) {  // ok, gate-only
    r["time_us"] = nullptr;
    return r;
  };
  const json gated = json::array({row("w", "cudnn.sdpa", "graph", "error"),
                                  untimed(row("w", "torch.sdpa.cudnn", "graph", "ok")),
                                  row("w", "cuda.unified", "graph", "mismatch"),
                                  untimed(row("x", "cudnn.sdpa", "graph", "ok")),
                                  row("x", "torch.sdpa.cudnn", "graph", "ok", 70, 69.5, 70.5),
                                  row("x", "cuda.unified", "graph", "ok", 60, 59.5, 60.5),
                                  row("x", "cuda.unified", "eager", "ok", 60, 59.5, 60.5)});
  o.against = {"cudnn.sdpa", "torch.sdpa.cudnn"};
  const Comparison g = compare_against(rows_of(gated), o);
  ASSERT_EQ(g.rows.size(), 3u);
  EXPECT_EQ(g.rows[0].verdict, Verdict::gate);
  EXPECT_EQ(g.rows[0].base_kernel, "torch.sdpa.cudnn");
  EXPECT_EQ(g.rows[1].base_kernel, "torch.sdpa.cudnn");
  EXPECT_EQ(g.rows[1].verdict, Verdict::fast);
  EXPECT_EQ(g.rows[2].verdict, Verdict::only_new);
  EXPECT_EQ(g.rows[2].note, "no cudnn.sdpa or torch.sdpa.cudnn row");
  o.against = {"cudnn.sdpa", "torch.sdpa.flash"};
  try {
    compare_against(rows_of(rows), o);
    ADD_FAILURE() << "a kernel without rows passed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no row of kernel 'torch.sdpa.flash'"), std::string::npos) << e.what();
  }
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
  EXPECT_EQ(compare_exit_code(m, parse_fail_on({"slow"})), 1);  // UNMATCHED: the BASE rows b and c found nothing
  EXPECT_EQ(compare_exit_code(m, parse_fail_on({"mismatch"})), 0);
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
  for (const char* s : {"SAME", "FAST", "SLOW", "AMBIG", "GATE", "LOST", "UNMATCHED", "only-in-new",
                        "SAME 1, FAST 1, SLOW 1, AMBIG 1, GATE 1, LOST 3, n/a 1, UNMATCHED (only in base) 1, only in new 1"})
    EXPECT_TRUE(contains(r.output, s)) << s << "\n" << r.output;
  const json j = read_json(out);
  EXPECT_EQ(j["schema"], "attnbench.compare/1");
  EXPECT_EQ(j["rows"].size(), 11u);
  EXPECT_EQ(j["summary"]["SLOW"], 1);
  EXPECT_EQ(j["summary"]["LOST"], 3);
  for (const auto& row : j["rows"])
    if (row["shape"] == "fast") { EXPECT_NEAR(row["speedup"].get<double>(), 100.0 / 90.0, 1e-9); }

  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on slow").code, 1);
  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on mismatch").code, 1);  // the GATE row
  EXPECT_EQ(run_cli("compare " + base + " " + base + " --fail-on any").code, 0);
  const Result ignoring =
      run_cli("compare " + base + " " + now + " --ignore-knob ATTNBENCH_SM90_QO,ATTNBENCH_3D_SPLITS --json " + out);
  EXPECT_TRUE(contains(ignoring.output, "whatever their setting (the note gives NEW's; BASE's in --json): "
                                        "ATTNBENCH_3D_SPLITS ATTNBENCH_SM90_QO"))
      << ignoring.output;
  EXPECT_EQ(read_json(out)["ignore_knobs"], json::array({"ATTNBENCH_3D_SPLITS", "ATTNBENCH_SM90_QO"}));
  // Only the SLOW row differs: mismatch passes, slow fails.
  json slow_only = base_rows();
  slow_only[2] = row("slow", "k", "graph", "ok", 110, 109.5, 110.5);
  const std::string slow_path = write_results("slow.json", results_doc(slow_only));
  EXPECT_EQ(run_cli("compare " + base + " " + slow_path + " --fail-on mismatch").code, 0);
  EXPECT_EQ(run_cli("compare " + base + " " + slow_path + " --fail-on slow").code, 1);
  EXPECT_EQ(run_cli("compare " + base + " " + slow_path + " --fail-on slow --threshold 20%").code, 0);
}

TEST(CompareCli, LostRowUnderEachFailOn) {
  const std::string base = write_results("lost_base.json", results_doc(json::array({named(timed(), "s")})));
  const std::string now = write_results("lost_new.json", results_doc(json::array({row("s", "k", "graph", "declined")})));
  const Result r = run_cli("compare " + base + " " + now);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "LOST 1,")) << r.output;
  EXPECT_TRUE(contains(r.output, "timed in BASE, declined in NEW")) << r.output;
  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on slow").code, 1);
  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on any").code, 1);
  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on mismatch").code, 0);
  EXPECT_EQ(run_cli("compare " + base + " " + now + " --fail-on slow,mismatch").code, 1);
}

TEST(CompareCli, UnsettledRowIsAmbigAndABadSettledFieldIsNamed) {
  const std::string base = write_results("uns_base.json", results_doc(json::array({named(timed(), "s")})));
  json slow = json::array({row("s", "k", "graph", "ok", 200, 199, 201)});
  slow[0]["settled"] = false;
  slow[0]["unsettled"] = "relative stdev 2 > max-noise 0.05 at the timeout";
  const std::string now = write_results("uns_new.json", results_doc(slow));
  const Result r = run_cli("compare " + base + " " + now + " --fail-on any");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "AMBIG 1,")) << r.output;
  EXPECT_TRUE(contains(r.output, "NEW unsettled: relative stdev 2 > max-noise 0.05")) << r.output;
  slow[0]["settled"] = "no";
  const std::string bad = write_results("uns_bad.json", results_doc(slow));
  const Result b = run_cli("compare " + base + " " + bad);
  EXPECT_EQ(b.code, 2) << b.output;
  EXPECT_TRUE(contains(b.output, bad + ": row #0: field 'settled'")) << b.output;
}

TEST(CompareCli, AgainstOverSeveralFiles) {
  const std::string ours = write_results("ours.json", results_doc(json::array({row("s", "cuda.unified", "graph", "ok", 50, 49.5, 50.5)})));
  const std::string peer = write_results("peer.json", results_doc(json::array({row("s", "torch.sdpa.flash", "graph", "ok", 100, 99.5, 100.5)})));
  const Result r = run_cli("compare --against torch.sdpa.flash " + ours + " " + peer);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "0.500")) << r.output;
  EXPECT_TRUE(contains(r.output, "FAST")) << r.output;
  const std::string other =
      write_results("other.json", results_doc(json::array({row("s", "cudnn.sdpa", "graph", "ok", 40, 39.5, 40.5)})));
  const Result two = run_cli("compare --against torch.sdpa.flash,cudnn.sdpa " + ours + " " + peer + " " + other);
  EXPECT_EQ(two.code, 0) << two.output;
  EXPECT_TRUE(contains(two.output, "the fastest of torch.sdpa.flash,cudnn.sdpa")) << two.output;
  EXPECT_TRUE(contains(two.output, "1.250")) << two.output;  // 50 against cudnn.sdpa's 40
  EXPECT_TRUE(contains(two.output, "vs cudnn.sdpa")) << two.output;
  // Each name once, spaces around it dropped: the same table.
  const Result spaced =
      run_cli("compare --against 'torch.sdpa.flash, cudnn.sdpa,cudnn.sdpa' " + ours + " " + peer + " " + other);
  EXPECT_EQ(spaced.code, 0) << spaced.output;
  EXPECT_TRUE(contains(spaced.output, "the fastest of torch.sdpa.flash,cudnn.sdpa median")) << spaced.output;
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
  expect2("compare " + good + " " + good + " --ignore-knob ATTNBENCH_SM90_Q0", "unknown knob 'ATTNBENCH_SM90_Q0'");
  expect2("compare --against k " + good + " --ignore-knob ATTNBENCH_SM90_QO", "--ignore-knob is for BASE vs NEW");
  expect2("compare --against k,,j " + good, "--against 'k,,j': an empty kernel name");
  expect2("compare --against k, " + good, "--against 'k,': an empty kernel name");
  expect2("compare --against ,k " + good, "--against ',k': an empty kernel name");
  expect2("compare " + good + " " + good + " --json /nonexistent/dir/c.json", "/nonexistent/dir");
}

// A knob at its default in each row's own file matches whatever the value (a default that changed between the
// builds), and the note names the difference; in a file older than provenance.knob_defaults only today's defaults
// count, so such rows stay apart and fail under --fail-on slow as UNMATCHED.
TEST(CompareRule, KnobsAtTheirFilesDefaultsMatchAndTheNoteSaysSo) {
  json base_doc = results_doc(json::array({row("s", "k", "graph", "ok", 100, 99.5, 100.5,
                                                {{"ATTNBENCH_GATED_FUSE_GATE", "1"}})}));
  base_doc["provenance"]["knob_defaults"] = {{"ATTNBENCH_GATED_FUSE_GATE", "1"}};
  json new_doc = results_doc(json::array({row("s", "k", "graph", "ok", 100, 99.5, 100.5,
                                               {{"ATTNBENCH_GATED_FUSE_GATE", "auto"}})}));
  new_doc["provenance"]["knob_defaults"] = {{"ATTNBENCH_GATED_FUSE_GATE", "auto"}};
  const Comparison c = compare_rows(timed_rows_from_json(base_doc, "b.json"), timed_rows_from_json(new_doc, "n.json"), {});
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::same);
  EXPECT_NE(c.rows[0].note.find("defaults differ: ATTNBENCH_GATED_FUSE_GATE 1 -> auto"), std::string::npos) << c.rows[0].note;
  base_doc["provenance"].erase("knob_defaults");  // an older file: its "1" is a setting, not a default
  const Comparison old = compare_rows(timed_rows_from_json(base_doc, "b.json"), timed_rows_from_json(new_doc, "n.json"), {});
  EXPECT_EQ(old.matched(), 0);
  EXPECT_EQ(compare_exit_code(old, parse_fail_on({"slow"})), 1);
  EXPECT_NE(nothing_compared(old, 1, 1).find("nothing compared"), std::string::npos);
  EXPECT_EQ(nothing_compared(c, 1, 1), "");
}

// A file compared with itself: every timed row is SAME, however noisy (the same measurement on both sides).
TEST(CompareRule, ASelfCompareIsAllSame) {
  const json rows = json::array({row("quiet", "k", "graph", "ok", 100, 99.5, 100.5),
                                 row("noisy", "k", "eager", "ok", 100, 60, 180)});
  const Comparison c = compare_rows(rows_of(rows), rows_of(rows), {});
  EXPECT_EQ(c.counts.at(Verdict::same), 2);
}

// A comparison that matched nothing exits 1 with the reason, whatever --fail-on.
TEST(CompareCli, NothingMatchedIsExitOneWithTheReason) {
  const std::string base = write_results("nm_base.json", results_doc(json::array({row("a", "k", "graph", "ok", 1, 1, 1)})));
  const std::string now = write_results("nm_new.json", results_doc(json::array({row("b", "k", "graph", "ok", 1, 1, 1)})));
  const Result r = run_cli("compare " + base + " " + now);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "nothing compared: none of NEW's 1 row(s) matches one of BASE's 1")) << r.output;
}
