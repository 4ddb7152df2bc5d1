// Plugins as a user meets them: the example plugin (examples/plugin) loaded with --plugin or ATTNBENCH_PLUGINS on
// the CPU backend, gated, timed and recorded like a built-in kernel; its planted-bug build a mismatch; and each
// way a plugin can fail to load a usage error naming the file.
#include <gtest/gtest.h>

#include <string>

#include "cli_helpers.hpp"

using testcli::contains;
using testcli::read_json;
using testcli::Result;
using testcli::run_cli;
using testcli::tmp_path;

namespace {

const std::string kExample = ATTNBENCH_EXAMPLE_PLUGIN;
const std::string kPlanted = ATTNBENCH_PLANTED_PLUGIN;
// Two sequences, GQA 4/2, a prefill and a partly-causal ragged pair, blocks of 16 (so the table is walked).
const std::string kShape = "--shape 'd64 h4/2 seqlens=[[3,40],[17,17]] bs16'";

const nlohmann::json* find_row(const nlohmann::json& doc, const std::string& kernel, const std::string& dtype) {
  for (const auto& r : doc["rows"])
    if (r["kernel"] == kernel && r["dtype"] == dtype) return &r;
  return nullptr;
}

void expect_usage_error(const Result& r, const std::string& file, const std::string& fragment) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, file)) << "names the file " << file << "\n" << r.output;
  EXPECT_TRUE(contains(r.output, fragment)) << fragment << "\n" << r.output;
}

}  // namespace

TEST(Plugin, ExamplePassesTheGateAndIsTimedBesideTheBuiltInKernel) {
  const std::string out = tmp_path("plugin_run.json");
  const Result r = run_cli("run --plugin " + kExample + " --backend cpu " + kShape +
                           " --kernel 'cpu.unified,example.*' --mode eager --min-samples 3 --timeout 0.2 --rounds 2 "
                           "--no-progress -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json doc = read_json(out);
  for (const char* dtype : {"bf16", "fp16"}) {
    const nlohmann::json* row = find_row(doc, "example.naive", dtype);
    ASSERT_NE(row, nullptr) << r.output;
    EXPECT_EQ((*row)["status"], "ok") << row->dump();
    EXPECT_TRUE((*row)["gate"]["passed"].get<bool>());
    EXPECT_FALSE((*row)["time_us"].is_null()) << "timed like ours";
    EXPECT_EQ((*row)["rounds"]["count"], 2) << "in the same interleaved rounds";
    EXPECT_EQ((*row)["plan"], "naive fp32, one row at a time") << "the plan's summary comes through";
    EXPECT_EQ((*row)["plugin"]["path"].get<std::string>().find('/'), 0u) << "an absolute path";
    EXPECT_EQ((*row)["plugin"]["sha256"].get<std::string>().size(), 64u);
    EXPECT_TRUE(contains((*row)["repro"], "--plugin ")) << (*row)["repro"];
    const nlohmann::json* ours = find_row(doc, "cpu.unified", dtype);
    ASSERT_NE(ours, nullptr);
    EXPECT_FALSE(ours->contains("plugin")) << "a built-in kernel's rows name no plugin";
  }
  const nlohmann::json& plugins = doc["provenance"]["plugins"];
  ASSERT_EQ(plugins.size(), 1u) << doc["provenance"].dump();
  EXPECT_EQ(plugins[0]["kernels"], nlohmann::json::array({"example.naive"}));
  EXPECT_EQ(plugins[0]["abi_version"], 1);
  EXPECT_EQ(plugins[0]["sha256"], find_row(doc, "example.naive", "bf16")->at("plugin")["sha256"]);
  EXPECT_EQ(doc["provenance"]["isolation"], "case") << "run in a worker process, as ours are";
}

TEST(Plugin, PlantedWrongHeadIsAMismatchBesideTheCorrectBuild) {
  const std::string out = tmp_path("plugin_planted.json");
  const Result r = run_cli("run --plugin " + kExample + " --plugin " + kPlanted + " --backend cpu " + kShape +
                           " --kernel 'example.*' --gate-only --no-progress -o " + out);
  EXPECT_EQ(r.code, 1) << "a mismatch fails the run\n" << r.output;
  const nlohmann::json doc = read_json(out);
  for (const char* dtype : {"bf16", "fp16"}) {
    const nlohmann::json* good = find_row(doc, "example.naive", dtype);
    const nlohmann::json* bad = find_row(doc, "example.naive_planted", dtype);
    ASSERT_TRUE(good && bad) << r.output;
    EXPECT_EQ((*good)["status"], "ok") << good->dump();
    EXPECT_EQ((*bad)["status"], "mismatch") << bad->dump();
    // The planted head is the last of 4: the worst row is one of its rows (flat index token * heads + head).
    EXPECT_EQ((*bad)["gate"]["worst_row"].get<int64_t>() % 4, 3) << bad->dump();
  }
  EXPECT_EQ(doc["provenance"]["plugins"].size(), 2u);
}

TEST(Plugin, DeclineCarriesThePluginsReason) {
  const Result r = run_cli("run --plugin " + kExample + " --backend cpu --shape 'd64 h4/2 b1 q4 kv40 softcap=30' "
                           "--kernel example.naive --gate-only --no-progress -o " + tmp_path("plugin_decline.json"));
  EXPECT_EQ(r.code, 0) << r.output;
  const nlohmann::json doc = read_json(tmp_path("plugin_decline.json"));
  const nlohmann::json* row = find_row(doc, "example.naive", "bf16");
  ASSERT_NE(row, nullptr) << r.output;
  EXPECT_EQ((*row)["status"], "declined");
  EXPECT_EQ((*row)["reason"], "example.naive: feature 'softcap' not implemented");
}

TEST(Plugin, EnvironmentVariableLoadsPluginsForRunSweepAndList) {
  const std::string env = "ATTNBENCH_PLUGINS=" + kPlanted + "::" + kExample;  // empty entries are skipped
  const Result list = run_cli("list --kernels", env);
  EXPECT_EQ(list.code, 0) << list.output;
  EXPECT_TRUE(contains(list.output, "example.naive ")) << list.output;
  EXPECT_TRUE(contains(list.output, "example.naive_planted")) << list.output;
  EXPECT_TRUE(contains(list.output, "(plugin " + kExample + ")")) << list.output;
  // The same file from the environment and from --plugin is loaded once.
  const Result run = run_cli("run --plugin " + kExample + " --backend cpu " + kShape +
                             " --kernel example.naive --gate-only --dtype bf16 --no-progress -o " +
                             tmp_path("plugin_env.json"), env);
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_FALSE(contains(run.output, "ATTNBENCH_PLUGINS is not")) << "a known variable: no warning\n" << run.output;
  EXPECT_EQ(read_json(tmp_path("plugin_env.json"))["provenance"]["plugins"].size(), 2u);
  const Result sweep = run_cli("sweep --backend cpu " + kShape + " --kernel example.naive --dtype bf16 "
                               "--knob ATTNBENCH_CPU_MAX_GFLOP=10,20 --min-samples 3 --timeout 0.05 --rounds 1 "
                               "--no-progress -o " + tmp_path("plugin_sweep.json"), env);
  EXPECT_EQ(sweep.code, 0) << sweep.output;
  EXPECT_EQ(read_json(tmp_path("plugin_sweep.json"))["rows"].size(), 2u) << "one row per setting";
  const Result missing = run_cli("list --kernels", "ATTNBENCH_PLUGINS=/nonexistent/p.so");
  expect_usage_error(missing, "/nonexistent/p.so", "ATTNBENCH_PLUGINS entry /nonexistent/p.so: no such file");
}

TEST(Plugin, LoadFailuresAreUsageErrorsNamingTheFile) {
  const std::string run = "run --backend cpu " + kShape + " --gate-only --no-progress -o " + tmp_path("x.json") +
                          " --plugin ";
  expect_usage_error(run_cli(run + "/nonexistent/p.so"), "/nonexistent/p.so", "no such file");
  expect_usage_error(run_cli(run + testtmp::dir().string()), testtmp::dir().string(), "is a folder");
  const std::string text = testcli::write_text("not_a_library.so", "hello\n");
  expect_usage_error(run_cli(run + text), text, "cannot load it as a shared library");
  expect_usage_error(run_cli(run + ATTNBENCH_NO_ENTRY_PLUGIN), ATTNBENCH_NO_ENTRY_PLUGIN,
                     "no symbol attnbench_plugin_entry");
  expect_usage_error(run_cli(run + ATTNBENCH_VERSION_PLUGIN), ATTNBENCH_VERSION_PLUGIN,
                     "plugin ABI version 999, expected 1");
  expect_usage_error(run_cli(run + ATTNBENCH_CLASH_PLUGIN), ATTNBENCH_CLASH_PLUGIN,
                     "kernels[0].name 'cpu.unified': the name of a built-in kernel");
  expect_usage_error(run_cli("list --kernels --plugin " + kExample + " --plugin " + kExample), kExample,
                     "given twice");
  // Two builds of one kernel name: the second file is refused, naming the first.
  const std::string copy = tmp_path("copy_of_example.so");
  ASSERT_EQ(testcli::shell("cp " + kExample + " " + copy).code, 0);
  expect_usage_error(run_cli("list --kernels --plugin " + kExample + " --plugin " + copy), copy,
                     "already provided by plugin " + kExample);
  EXPECT_FALSE(testcli::shell("test -e " + tmp_path("x.json")).code == 0) << "nothing is written";
}
