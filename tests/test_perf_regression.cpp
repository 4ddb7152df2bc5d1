// scripts/ci/perf-regression.sh: its exit codes, with a fake nvidia-smi first on PATH so the test behaves the
// same with and without a GPU, and the CPU backend standing in for the GPU run.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "cli_helpers.hpp"

using namespace testcli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
const std::string kScript = ATTNBENCH_SOURCE_DIR "/scripts/ci/perf-regression.sh";

// A folder holding an `nvidia-smi` that exits with `code`.
std::string fake_nvidia_smi(int code) {
  const std::string dir = tmp_path("fakebin" + std::to_string(code));
  fs::create_directories(dir);
  const std::string exe = dir + "/nvidia-smi";
  std::ofstream(exe) << "#!/bin/sh\necho 'GPU 0: fake'\nexit " << code << "\n";
  ::chmod(exe.c_str(), 0755);
  return dir;
}

struct PerfCase {
  std::string root = tmp_path("perf");
  std::string shapes = root + "/shapes", base = root + "/base", results = root + "/results";
  PerfCase() {
    fs::create_directories(shapes);
    fs::create_directories(base);
    std::ofstream(shapes + "/tiny.json") << R"({"defaults": {"heads": 2, "kv_heads": 1, "head_size": 64},
      "shapes": [{"name": "p", "batch": 1, "seqlen_k": 24}, {"name": "d", "batch": 2, "seqlen_q": 1, "seqlen_k": 40}]})";
  }
  // Any noise settles a row (a sanitizer build on a loaded machine read relative stdevs past 2): compare calls a
  // row with an unsettled side AMBIG, however far its ratio.
  Result run(int smi_code,
             const std::string& run_args = "--mode eager --min-samples 3 --max-noise 1e9 --timeout 1") const {
    return shell("PATH=" + fake_nvidia_smi(smi_code) + ":$PATH ATTNBENCH_SHAPES_DIR=" + shapes + " PERF_GROUPS=tiny " +
                 "BASELINE_DIR=" + base + " RESULTS_DIR=" + results + " ATTNBENCH_BIN=" ATTNBENCH_BINARY +
                 " PERF_BACKEND=cpu PERF_RUN_ARGS='" + run_args + "' " + kScript);
  }
  // The latest results as the baseline, every time scaled by `factor`.
  void baseline_from_results(double factor) const {
    json j = read_json(results + "/tiny.json");
    for (auto& r : j["rows"])
      if (r["time_us"].is_object())
        for (const char* k : {"median", "min", "q1", "q3", "mean"}) r["time_us"][k] = r["time_us"][k].get<double>() * factor;
    std::ofstream(base + "/tiny.json") << j.dump();
  }
};
}  // namespace

TEST(PerfRegression, WithoutAGpuItSaysSoAndExitsThree) {
  const Result r = PerfCase().run(1);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(contains(r.output, "cannot run")) << r.output;
}

TEST(PerfRegression, MissingBaselineIsNamed) {
  const PerfCase s;
  const Result r = s.run(0);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_TRUE(contains(r.output, "missing baseline " + s.base + "/tiny.json")) << r.output;
  EXPECT_FALSE(fs::exists(s.results + "/tiny.json")) << "nothing should have run";
}

// Without BASELINE_DIR the baselines are the card's own: an H100 is never compared with an H200's numbers.
TEST(PerfRegression, TheDefaultBaselinesAreTheCardsOwn) {
  const std::string dir = tmp_path("fakebin_h100");
  fs::create_directories(dir);
  std::ofstream(dir + "/nvidia-smi") << "#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\n";
  ::chmod((dir + "/nvidia-smi").c_str(), 0755);
  const std::string cwd = tmp_path("perf_cwd");
  fs::create_directories(cwd);
  const Result r = shell("cd " + cwd + " && PATH=" + dir + ":$PATH PERF_GROUPS=tiny " + kScript);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_TRUE(contains(r.output, "missing baseline baselines/h100/tiny.json")) << r.output;
}

TEST(PerfRegression, PassesWhenFasterFailsWhenSlower) {
  const PerfCase s;
  std::ofstream(s.base + "/tiny.json") << "{}";  // present, so the run happens; compare rejects it
  Result r = s.run(0);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "not an attnbench results file")) << r.output;
  ASSERT_TRUE(fs::exists(s.results + "/tiny.json")) << r.output;

  s.baseline_from_results(1e6);  // the baseline was 10^6x slower: every row FAST, whatever the load here
  r = s.run(0);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "FAST")) << r.output;
  EXPECT_TRUE(fs::exists(s.results + "/tiny.compare.json"));

  s.baseline_from_results(1e-6);  // the baseline was 10^6x faster: every row SLOW
  r = s.run(0);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "FAILED (SLOW, LOST, mismatch or nothing ran) in: tiny")) << r.output;
}

TEST(PerfRegression, FailsWhenNothingRan) {
  // Every row declined (graph mode on the CPU backend) against a baseline with no rows: compare alone finds
  // nothing to fail on, so the run's own exit code must.
  const PerfCase s;
  std::ofstream(s.base + "/tiny.json") << testcli::results_doc(json::array()).dump();
  const Result r = s.run(0, "--mode graph");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "nothing ran: all 4 rows declined (reasons: 4 x \"graph mode needs the CUDA backend\")"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "FAILED (SLOW, LOST, mismatch or nothing ran) in: tiny")) << r.output;
}
