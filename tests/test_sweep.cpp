// sweep: knob validation, the cartesian product, and a real sweep on the CPU backend.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "attnbench/knobs.hpp"
#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "core/errors.hpp"
#include "run/sweep.hpp"

using namespace attnbench;
using namespace testcli;

namespace {
const char* kTinyShapes = R"({"group": "tiny", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "block_size": 16},
  "shapes": [{"name": "prefill", "seqlens": [[3, 40], [17, 17]]},
             {"name": "decode", "batch": 2, "seqlen_q": 1, "seqlen_k": 70}]})";

std::string usage_message(const std::string& spec) {
  try {
    parse_knob_axes({spec});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Sweep, KnobValidation) {
  const std::string unknown = usage_message("ATTNBENCH_BOGUS=1,2");
  EXPECT_TRUE(contains(unknown, "unknown knob 'ATTNBENCH_BOGUS'")) << unknown;
  EXPECT_TRUE(contains(unknown, "ATTNBENCH_SM90_NARROW_WARPS")) << "lists the known knobs: " << unknown;
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_Q_MAJOR_GRID=0,5"), "'5' not in 0|1"));
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_3D_SPLITS=2,x"), "not a non-negative integer"));
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_SM90_NARROW_WARPS"), "NAME=v1,v2"));
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_SM90_NARROW_WARPS="), "NAME=v1,v2"));
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_SM90_NARROW_WARPS=4,4"), "listed twice"));
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_SM90_NARROW_WARPS=4,"), "empty value"));
  EXPECT_THROW(parse_knob_axes({"ATTNBENCH_3D_SPLITS=1", "ATTNBENCH_3D_SPLITS=2"}), UsageError);
  EXPECT_THROW(parse_knob_axes({}), UsageError);
  const auto axes = parse_knob_axes({"ATTNBENCH_SM90_NARROW_WARPS=8,4"});
  ASSERT_EQ(axes.size(), 1u);
  EXPECT_EQ(axes[0].values, (std::vector<std::string>{"8", "4"}));  // order kept: the first is the reference
  // A list knob's commas separate settings here: one mode per setting.
  const auto modes = parse_knob_axes({"ATTNBENCH_CUDNN_HEURISTICS=a,fallback"});
  EXPECT_EQ(modes[0].values, (std::vector<std::string>{"a", "fallback"}));
  EXPECT_TRUE(contains(usage_message("ATTNBENCH_CUDNN_PLAN=first,autotune,2,best"), "'best' is neither"));
}

TEST(Sweep, CartesianProductFirstAxisSlowest) {
  const auto s = knob_settings(parse_knob_axes({"ATTNBENCH_SM90_NARROW_WARPS=4,8", "ATTNBENCH_3D_SPLITS=0,2,16"}));
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].at("ATTNBENCH_SM90_NARROW_WARPS"), "4");
  EXPECT_EQ(s[0].at("ATTNBENCH_3D_SPLITS"), "0");
  EXPECT_EQ(s[2].at("ATTNBENCH_3D_SPLITS"), "16");
  EXPECT_EQ(s[3].at("ATTNBENCH_SM90_NARROW_WARPS"), "8");
  EXPECT_EQ(s[3].at("ATTNBENCH_3D_SPLITS"), "0");
  std::set<std::map<std::string, std::string>> distinct(s.begin(), s.end());
  EXPECT_EQ(distinct.size(), 6u);
}

TEST(Sweep, CpuSweepAppliesEachSettingAndWritesItsRowsInOneFile) {
  // "big" declares 1.07 GFLOP: within ATTNBENCH_CPU_MAX_GFLOP=0 (no limit), above =1, so the two settings' rows
  // differ exactly there; the tiny shapes run under both.
  const std::string shapes = write_text("tiny_big.json", R"({"group": "tiny", "defaults": {"heads": 4, "kv_heads": 2,
    "head_size": 64, "block_size": 16},
    "shapes": [{"name": "prefill", "seqlens": [[3, 40], [17, 17]]},
               {"name": "decode", "batch": 2, "seqlen_q": 1, "seqlen_k": 70},
               {"name": "big", "batch": 1, "seqlen_k": 1024, "causal": false, "kv_heads": 4, "dtypes": ["bf16"]}]})");
  const std::string out = tmp_path("sweep.json");
  // A knob set in the environment outside attnbench is recorded in every row.
  const Result r = run_cli("sweep --shapes " + shapes + " --backend cpu --mode eager --min-samples 2 --max-noise 1 --timeout 1 "
                           "--knob ATTNBENCH_CPU_MAX_GFLOP=0,1 -o " + out,
                           "ATTNBENCH_3D_SPLITS=3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "S1: ATTNBENCH_CPU_MAX_GFLOP=0")) << r.output;
  EXPECT_TRUE(contains(r.output, "S2: ATTNBENCH_CPU_MAX_GFLOP=1")) << r.output;
  EXPECT_TRUE(contains(r.output, "(1.000)")) << "ratio of the first setting to itself:\n" << r.output;
  const auto j = read_json(out);
  EXPECT_EQ(j["schema"], "attnbench.results/1");
  EXPECT_EQ(j["provenance"]["sweep"]["settings"].size(), 2u);
  ASSERT_EQ(j["rows"].size(), 10u);  // 2 settings x (2 shapes x 2 dtypes + big x bf16) x eager
  std::map<std::string, std::set<std::string>> status;  // setting -> "shape/dtype status"
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["knobs"]["ATTNBENCH_3D_SPLITS"], "3");
    const std::string setting = row["knobs"]["ATTNBENCH_CPU_MAX_GFLOP"];
    status[setting].insert(row["shape"].get<std::string>() + "/" + row["dtype"].get<std::string>() + " " +
                           row["status"].get<std::string>());
    if (setting == "1" && row["shape"] == "big") {
      EXPECT_TRUE(contains(row["reason"].get<std::string>(), "above the CPU limit of 1 GFLOP")) << row.dump();
    }
  }
  const std::set<std::string> tiny_ok = {"prefill/bf16 ok", "prefill/fp16 ok", "decode/bf16 ok", "decode/fp16 ok"};
  std::set<std::string> s1 = tiny_ok, s2 = tiny_ok;
  s1.insert("big/bf16 ok");
  s2.insert("big/bf16 declined");
  EXPECT_EQ(status["0"], s1);
  EXPECT_EQ(status["1"], s2);
}

TEST(Sweep, SettingsOfACaseAreTimedTogetherAndLabelledInTheTable) {
  const std::string shapes = write_text("tiny_interleave.json", kTinyShapes);
  const std::string out = tmp_path("sweep_interleave.json");
  const Result r = run_cli("sweep --shapes " + shapes + " --backend cpu --mode eager --dtype bf16 --min-samples 4 "
                           "--max-noise 1 --timeout 1 --rounds 2 --knob ATTNBENCH_CPU_MAX_GFLOP=0,100 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "set")) << r.output;  // the table's setting column
  const auto j = read_json(out);
  ASSERT_EQ(j["rows"].size(), 4u);
  // Case-major: both settings of a case before the next case, since they are bound and timed together.
  std::vector<std::string> order;
  for (const auto& row : j["rows"]) {
    order.push_back(row["shape"].get<std::string>() + " " + row["knobs"]["ATTNBENCH_CPU_MAX_GFLOP"].get<std::string>());
    EXPECT_EQ(row["rounds"]["count"], 2) << row.dump();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"prefill 0", "prefill 100", "decode 0", "decode 100"}));
}

TEST(Sweep, AKnobNoSelectedKernelReadsIsWarnedAbout) {
  const std::string shapes = write_text("sweep_unread.json", kTinyShapes);
  const std::string base = "sweep --shapes " + shapes +
                           " --backend cpu --mode eager --min-samples 2 --max-noise 1 --timeout 0.2 --no-progress ";
  const Result r = run_cli(base + "--knob ATTNBENCH_SM90_PATH=narrow,wide -o " + tmp_path("unread.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "sweep: warning: ATTNBENCH_SM90_PATH is read by cuda.unified,cuda.gated_block only, "
                                 "none of which is selected (cpu.unified)")) << r.output;
  const auto unread = read_json(tmp_path("unread.json"))["provenance"]["unread_knobs"];
  ASSERT_EQ(unread.size(), 1u) << unread.dump();
  EXPECT_EQ(unread[0]["knob"], "ATTNBENCH_SM90_PATH");
  // A knob the selected kernel reads: no warning, no field.
  const Result read = run_cli(base + "--knob ATTNBENCH_CPU_MAX_GFLOP=0,64 -o " + tmp_path("read.json"));
  ASSERT_EQ(read.code, 0) << read.output;
  EXPECT_FALSE(contains(read.output, "warning: ATTNBENCH")) << read.output;
  EXPECT_FALSE(read_json(tmp_path("read.json"))["provenance"].contains("unread_knobs"));
}

TEST(Sweep, EveryKnobNamesTheKernelsThatReadIt) {
  // Every kernel of every build: the GPU ones are registered only where their backend is built.
  std::set<std::string> names = {"hip.unified",      "cuda.unified",     "cuda.gated_block", "cuda.unified_bwd",
                                  "cuda.gated_block_bwd", "cudnn.sdpa", "cudnn.gated_chain", "cudnn.sdpa_backward",
                                  "cudnn.gated_chain_bwd"};
  for (const KernelEntry& e : kernel_registry()) names.insert(e.name);
  for (const KnobSpec& k : knob_table()) {
    const auto globs = glob_list(k.kernels);
    EXPECT_FALSE(globs.empty()) << k.name;
    for (const std::string& g : globs) {
      bool any = false;
      for (const std::string& n : names) any = any || glob_match(g, n);
      EXPECT_TRUE(any) << k.name << ": '" << g << "' matches no kernel";
    }
  }
}

TEST(Sweep, BadKnobFailsBeforeAnyWork) {
  const std::string shapes = write_text("tiny.json", kTinyShapes);
  const std::string out = tmp_path("sweep_bad.json");
  Result r = run_cli("sweep --shapes " + shapes + " --backend cpu --knob ATTNBENCH_NOPE=1 -o " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown knob 'ATTNBENCH_NOPE' (known: ATTNBENCH_CPU_MAX_GFLOP")) << r.output;
  EXPECT_FALSE(contains(r.output, "cpu.unified")) << "nothing should have run:\n" << r.output;
  r = run_cli("sweep --shapes " + shapes + " --backend cpu --knob ATTNBENCH_Q_MAJOR_GRID=0,2 -o " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "not in 0|1")) << r.output;
  EXPECT_EQ(run_cli("sweep --shapes " + shapes + " -o " + out).code, 2);  // --knob is required
  EXPECT_FALSE(std::filesystem::exists(out));
}
