// The host's side of a CPU measurement: the threads a run used and where that number came from, the load around it,
// the warning when the host was busier than its cores, and rates that stay readable at CPU speeds.
#include <gtest/gtest.h>

#include "cli_helpers.hpp"
#include "results/printer.hpp"
#include "run/host_load.hpp"

using namespace attnbench;
using namespace testcli;
using nlohmann::json;

namespace {
const char* kTiny = R"({"group": "tiny", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "block_size": 16},
  "shapes": [{"name": "p", "batch": 1, "seqlen_k": 24}]})";

json host_of(const std::string& args, const std::string& env, const std::string& name) {
  const std::string shapes = write_text("load_shapes.json", kTiny), out = tmp_path(name);
  const Result r = run_cli("run --shapes " + shapes + " --dtype bf16 --backend cpu --mode eager --min-samples 3 "
                           "--timeout 1 --no-progress -o " + out + " " + args, env);
  EXPECT_EQ(r.code, 0) << r.output;
  const json j = read_json(out);
  EXPECT_FALSE(j["rows"].empty());
  for (const auto& row : j["rows"]) {
    if (!args.empty()) {
      EXPECT_NE(row["repro"].get<std::string>().find(args), std::string::npos) << row.dump();
    }
  }
  return j["provenance"]["host_cpu"];
}
}  // namespace

TEST(HostLoad, ThreadsAndTheirSourceAreRecorded) {
  const json flag = host_of("--threads 1", "OMP_NUM_THREADS=2", "threads_flag.json");
  EXPECT_EQ(flag["threads"], 1) << flag.dump();
  EXPECT_EQ(flag["threads_from"], "--threads") << "the flag wins over the environment: " << flag.dump();
  EXPECT_GT(flag["cores"].get<int>(), 0);
  EXPECT_FALSE(flag["cpu_model"].get<std::string>().empty());
  for (const char* k : {"load_start", "load_end"}) {
    ASSERT_TRUE(flag[k].is_array()) << k << ": " << flag.dump();
    EXPECT_EQ(flag[k].size(), 3u) << k;
  }
  const json env = host_of("", "OMP_NUM_THREADS=1", "threads_env.json");
  EXPECT_EQ(env["threads"], 1);
  EXPECT_EQ(env["threads_from"], "OMP_NUM_THREADS");
  const json def = host_of("", "env -u OMP_NUM_THREADS", "threads_default.json");
  EXPECT_EQ(def["threads_from"], "default: one per core");
  EXPECT_GE(def["threads"].get<int>(), 1);
}

TEST(HostLoad, ThreadsOutOfRangeIsAnInputError) {
  const Result r = run_cli("run --group decode --backend cpu --threads 0 --no-progress -o " + tmp_path("t0.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--threads")) << r.output;
}

TEST(HostLoad, ABusyHostIsSaid) {
  json facts = {{"cores", 2}, {"load_start", {1.5, 1, 1}}, {"load_end", {1.9, 1, 1}}};
  EXPECT_EQ(load_warning(facts), "");
  facts["load_end"] = {3.25, 2, 1};
  const std::string w = load_warning(facts);
  EXPECT_EQ(w.rfind("warning: the host's load average reached 3.25 on 2 cores", 0), 0u) << w;
  facts["load_start"] = nullptr;  // /proc/loadavg unreadable at the start: the end still counts
  EXPECT_NE(load_warning(facts), "");
  EXPECT_EQ(load_warning(json()), "") << "an older file without host facts";
  EXPECT_EQ(load_warning(json{{"cores", 4}}), "");
}

TEST(HostLoad, SmallRatesKeepThreeSignificantDigits) {
  EXPECT_EQ(rate_text(0.0123456), "0.0123");
  EXPECT_EQ(rate_text(1.23456), "1.23");
  EXPECT_EQ(rate_text(9.876), "9.88");
  EXPECT_EQ(rate_text(12.34), "12.3");
  EXPECT_EQ(rate_text(0), "0.0");
  EXPECT_EQ(rate_text(1234.56), "1234.6");
}
