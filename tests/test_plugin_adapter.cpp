// The C ABI's core in this process: a descriptor table written here goes through the same registration as a
// --plugin file (attnbench_register_plugin, as a host over ctypes would call it) and the runner's own path: the
// problem and params it sees, one release per plan, declines, typed no-instance declines, plan and run errors as
// error rows, and the descriptor checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "attnbench/plugin.h"
#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "core/errors.hpp"
#include "plugins/plugin.hpp"
#include "run/journal.hpp"
#include "run/runner.hpp"

namespace attnbench {
namespace {

struct Calls {
  int plans = 0, releases = 0, runs = 0;
  bool stream_null = true, params_match = true;
};
Calls calls;

int32_t supports_d64(void*, const attnbench_problem* p, char* reason, size_t size) {
  if (p->head_size == 64 && p->heads == 4 && p->kv_heads == 2 && p->q_lens && p->num_seqs == 2) return ATTNBENCH_OK;
  std::snprintf(reason, size, "test.zeros: only d64 h4/2, got d%d", p->head_size);
  return ATTNBENCH_DECLINE;
}
int32_t supports_no_instance(void*, const attnbench_problem*, char* reason, size_t size) {
  std::snprintf(reason, size, "test.no_instance: its instance is left out of this build");
  return ATTNBENCH_NO_INSTANCE;
}
int32_t plan_heads(void*, const attnbench_problem* p, attnbench_plan* out, char*, size_t) {
  ++calls.plans;
  out->handle = new int(p->heads);
  out->workspace_bytes = 256;
  std::snprintf(out->summary, sizeof out->summary, "zeros h%d", p->heads);
  return ATTNBENCH_OK;
}
int32_t plan_fails(void*, const attnbench_problem*, attnbench_plan*, char* error, size_t size) {
  std::snprintf(error, size, "no plan today");
  return -1;
}
// Writes zeros (a wrong answer the gate must catch), checking what it was handed.
int32_t run_zeros(void*, void* handle, const attnbench_params* a, void* stream, char*, size_t) {
  ++calls.runs;
  calls.stream_null = calls.stream_null && stream == nullptr;
  calls.params_match = calls.params_match && *static_cast<int*>(handle) == a->heads && a->workspace &&
                       a->q_stride_token == a->heads * a->head_size && a->q_dtype == ATTNBENCH_BF16 &&
                       a->block_size == 16;
  std::memset(a->out, 0, static_cast<size_t>(a->total_q * a->heads * a->head_size) * 2);
  return ATTNBENCH_OK;
}
int32_t run_fails(void*, void*, const attnbench_params*, void*, char* error, size_t size) {
  std::snprintf(error, size, "boom");
  return 7;
}
void release_heads(void*, void* handle) {
  ++calls.releases;
  delete static_cast<int*>(handle);
}

const attnbench_kernel kKernels[] = {
    {"test.zeros", "zeros", ATTNBENCH_BACKEND_CPU, ATTNBENCH_OP_ATTENTION, nullptr, supports_d64, plan_heads,
     run_zeros, release_heads},
    {"test.run_fails", nullptr, ATTNBENCH_BACKEND_CPU, ATTNBENCH_OP_ATTENTION, nullptr, supports_d64, plan_heads,
     run_fails, release_heads},
    {"test.plan_fails", nullptr, ATTNBENCH_BACKEND_CPU, ATTNBENCH_OP_ATTENTION, nullptr, supports_d64, plan_fails,
     run_zeros, nullptr},
    {"test.no_instance", nullptr, ATTNBENCH_BACKEND_CPU, ATTNBENCH_OP_ATTENTION, nullptr, supports_no_instance,
     plan_heads, run_zeros, release_heads},
};
const attnbench_plugin kTable = {ATTNBENCH_PLUGIN_ABI_VERSION, 4, kKernels};

const char* kShapes = R"({"group": "pa", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "block_size": 16,
  "dtypes": ["bf16"]}, "shapes": [{"name": "a", "seqlens": [[3, 40], [17, 17]]},
  {"name": "d128", "head_size": 128, "seqlens": [[3, 40], [17, 17]]}]})";

void register_table() {
  char error[256] = {0};
  ASSERT_EQ(attnbench_register_plugin(&kTable, "test-table", error, sizeof error), ATTNBENCH_OK) << error;
  ASSERT_EQ(attnbench_register_plugin(&kTable, "test-table", error, sizeof error), ATTNBENCH_OK) << "again: no-op";
}

RunOptions run_options(bool timed) {
  RunOptions o;
  o.shape_files = {testcli::write_text("plugin_adapter.json", kShapes)};
  o.backend = "cpu";
  o.modes = {Mode::eager};
  o.kernel_glob = "test.*";
  o.gate_only = !timed;
  o.no_gate = timed;  // timed: zeros are a wrong answer, so time them ungated
  o.stop.min_samples = 3;
  o.stop.timeout_s = 0.05;
  o.rounds = 1;
  return o;
}

const ResultRow& row(const ResultsFile& f, const std::string& shape, const std::string& kernel) {
  for (const auto& r : f.rows)
    if (r.shape == shape && r.kernel == kernel) return r;
  throw std::runtime_error("no row " + shape + "/" + kernel);
}

}  // namespace

TEST(PluginAdapter, RowsOfEveryOutcomeAndOneReleasePerPlan) {
  register_table();
  std::ostringstream table;
  const ResultsFile f = run_benchmarks(run_options(false), table);
  ASSERT_EQ(f.rows.size(), 8u) << table.str();
  EXPECT_EQ(row(f, "a", "test.zeros").status, "mismatch") << "gated like ours";
  EXPECT_EQ(row(f, "a", "test.zeros").plan, "zeros h4");
  EXPECT_EQ(row(f, "a", "test.zeros").plugin, "test-table");
  EXPECT_EQ(row(f, "a", "test.zeros").plugin_sha256, "") << "not a file";
  EXPECT_EQ(row(f, "a", "test.zeros").repro.find("--plugin"), std::string::npos) << "no file to name";
  EXPECT_EQ(row(f, "d128", "test.zeros").status, "declined");
  EXPECT_EQ(row(f, "d128", "test.zeros").reason, "test.zeros: only d64 h4/2, got d128");
  EXPECT_EQ(row(f, "a", "test.run_fails").status, "error");
  EXPECT_EQ(row(f, "a", "test.run_fails").reason, "test.run_fails: run failed: boom");
  EXPECT_EQ(row(f, "a", "test.plan_fails").status, "error");
  EXPECT_EQ(row(f, "a", "test.plan_fails").reason, "test.plan_fails: plan failed: no plan today");
  EXPECT_EQ(row(f, "a", "test.no_instance").status, "declined");
  EXPECT_EQ(row(f, "a", "test.no_instance").reason, "test.no_instance: its instance is left out of this build");
  EXPECT_EQ(calls.plans, 2);
  EXPECT_EQ(calls.releases, calls.plans) << "every plan released once";
  EXPECT_TRUE(calls.stream_null) << "a CPU kernel gets no stream";
  EXPECT_TRUE(calls.params_match);
}

TEST(PluginAdapter, TimedLikeOursAndReleasedAfterTheLastCall) {
  register_table();
  std::ostringstream table;
  const ResultsFile f = run_benchmarks(run_options(true), table);
  const ResultRow& r = row(f, "a", "test.zeros");
  EXPECT_EQ(r.status, "ok") << r.reason;
  ASSERT_TRUE(r.time_us.has_value());
  EXPECT_GE(calls.runs, 4) << "the first call, then at least min_samples timed";
  EXPECT_EQ(calls.releases, calls.plans);
}

TEST(PluginAdapter, DescriptorChecksNameTheField) {
  const auto refused = [](attnbench_kernel k, const std::string& fragment) {
    const attnbench_plugin t = {ATTNBENCH_PLUGIN_ABI_VERSION, 1, &k};
    try {
      register_plugin(&t, "checks", "--plugin checks.so");
      ADD_FAILURE() << "accepted; expected: " << fragment;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--plugin checks.so: " + fragment), std::string::npos) << e.what();
    }
  };
  attnbench_kernel good = kKernels[0];
  good.name = "checks.good";
  attnbench_kernel k = good;
  k.name = "has space";
  refused(k, "kernels[0].name 'has space': letters, digits");
  k = good;
  k.name = nullptr;
  refused(k, "kernels[0].name NULL");
  k = good;
  k.name = "x#control";
  refused(k, "kernels[0].name 'x#control'");
  k = good;
  k.name = "x.backend";
  k.backend = 9;
  refused(k, "kernels[0].backend: 9 is not");
  k = good;
  k.name = "x.op";
  k.op = 3;
  refused(k, "kernels[0].op: 3 is not ATTNBENCH_OP_ATTENTION");
  k = good;
  k.name = "x.run";
  k.run = nullptr;
  refused(k, "kernels[0].run: NULL");
  const attnbench_kernel twice[] = {good, good};
  const attnbench_plugin t2 = {ATTNBENCH_PLUGIN_ABI_VERSION, 2, twice};
  try {
    register_plugin(&t2, "checks", "--plugin checks.so");
    ADD_FAILURE() << "a name given twice was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("kernels[1].name 'checks.good': given twice in this plugin"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(find_kernel("checks.good"), nullptr) << "a refused table registers none of its kernels";
  const attnbench_plugin v2 = {2, 1, &good};
  char error[256] = {0};
  EXPECT_NE(attnbench_register_plugin(&v2, "v2.so", error, sizeof error), ATTNBENCH_OK);
  EXPECT_STREQ(error, "plugin v2.so: plugin ABI version 2, expected 1 (rebuild it against this attnbench's "
                      "kernels/include/attnbench/plugin.h)");
}

TEST(PluginAdapter, ResumeRefusesAJournalWrittenWithOtherPluginFiles) {
  JournalHeader h;
  h.command = {"run", "--group", "g"};
  h.binary_sha256 = "b";
  h.seed = 1;
  h.cases = 1;
  h.plugins = nlohmann::json::array({{{"path", "/p.so"}, {"sha256", "aa"}}});
  const std::string path = testcli::tmp_path("plugins.partial.jsonl");
  { Journal j = Journal::create(path, h); }
  JournalHeader rebuilt = h;
  rebuilt.plugins[0]["sha256"] = "bb";
  std::map<std::size_t, JournalCase> done;
  try {
    Journal::resume(path, rebuilt, {"g/s/bf16"}, &done);
    ADD_FAILURE() << "resumed with a rebuilt plugin";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'plugins' differs"), std::string::npos) << e.what();
  }
  Journal::resume(path, h, {"g/s/bf16"}, &done);  // the same files: resumed
}

}  // namespace attnbench
