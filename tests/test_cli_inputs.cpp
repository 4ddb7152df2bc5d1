// Bad input on the command line ends in a usage error (exit 2) that names the file, the field and the value as
// given, never an internal error (exit 1) or a run that silently does something else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_helpers.hpp"
#include "device/device.hpp"

namespace fs = std::filesystem;
using namespace testcli;

namespace {
const char* kTiny = R"({"group": "tiny", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64},
  "shapes": [{"name": "a", "batch": 1, "seqlen_k": 20}]})";

// Exit 2, every fragment in the output, no internal error.
void expect_usage(const Result& r, const std::string& what, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.code, 2) << what << "\n" << r.output;
  EXPECT_FALSE(contains(r.output, "internal error")) << what << "\n" << r.output;
  for (const auto& f : fragments) EXPECT_TRUE(contains(r.output, f)) << what << ": '" << f << "' not in\n" << r.output;
}

// A folder of its own under the temp folder, for runs whose default output lands in the current folder.
std::string own_folder(const std::string& name) {
  const std::string d = tmp_path(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string in_folder(const std::string& dir, const std::string& args, const std::string& env = "") {
  return "cd " + dir + " && " + env + " ATTNBENCH_SHAPES_DIR=" ATTNBENCH_SOURCE_DIR "/shapes " ATTNBENCH_BINARY " " + args;
}
}  // namespace

TEST(CliInputs, DirectoriesInPlaceOfFilesAreUsageErrors) {
  const std::string dir = own_folder("a_dir");
  expect_usage(run_cli("run --shapes " + dir + " -o " + tmp_path("d.json")), "run --shapes DIR", {dir, "is a directory"});
  expect_usage(run_cli("compare " + dir + " " + dir), "compare DIR DIR", {dir, "is a directory"});
  expect_usage(run_cli("merge " + dir + " -o " + tmp_path("m.json")), "merge DIR", {dir, "is a directory"});
  EXPECT_FALSE(fs::exists(tmp_path("m.json")));
}

TEST(CliInputs, NumberOutOfRangeInAShapeFileNamesFileAndField) {
  const std::string p = write_text("range.json", R"({"shapes": [{"name": "a", "heads": 2, "kv_heads": 1,
    "head_size": 64, "seqlen_k": 9, "scale": 1e400}]})");
  expect_usage(run_cli("run --shapes " + p + " -o " + tmp_path("r.json")), "1e400", {p, "shapes[0].scale", "1e400"});
}

TEST(CliInputs, NonFiniteAndOutOfRangeNumbersAreRefusedAsGiven) {
  const std::string shapes = write_text("tiny.json", kTiny);
  const std::string base = "run --shapes " + shapes + " --backend cpu -o " + tmp_path("nf.json") + " ";
  for (const char* opt : {"--timeout", "--max-noise", "--atol", "--rtol", "--reference-gflop", "--peak-tflops",
                          "--peak-gbps"})
    for (const char* v : {"nan", "inf", "-inf", "1e400"}) {
      const Result r = run_cli(base + opt + " " + v);
      expect_usage(r, std::string(opt) + " " + v, {opt, std::string("'") + v + "'", "finite"});
    }
  for (const char* v : {"1e309", "99999999999", "0", "2.5"})
    expect_usage(run_cli(base + "--min-samples " + v), v, {"--min-samples", std::string("'") + v + "'", "2147483647"});
  // The message prints the value as given, shortened, never a bound with hundreds of digits.
  const Result r = run_cli(base + "--timeout " + std::string(400, '9'));
  expect_usage(r, "--timeout 999...", {"--timeout", "characters"});
  EXPECT_LT(r.output.size(), 400u) << r.output;
  EXPECT_FALSE(contains(run_cli(base + "--min-samples 1e309").output, "1797693134862315"));
  expect_usage(run_cli("sweep --shapes " + shapes + " --knob ATTNBENCH_3D_SPLITS=0,1 --timeout nan -o " +
                       tmp_path("sw.json")),
               "sweep --timeout nan", {"--timeout", "'nan'"});
}

TEST(CliInputs, SeedsOutsideTheirRangeAreRefused) {
  const std::string base = "run --shapes " + write_text("tiny.json", kTiny) + " --backend cpu -o " + tmp_path("s.json");
  for (const char* v : {"-1", "99999999999999999999999", "1.5", "0x10"})
    expect_usage(run_cli(base + " --seed " + v), v, {"--seed", std::string("'") + v + "'", "[0, 18446744073709551615]"});
  const Result ok = run_cli(base + " --seed 18446744073709551615 --mode eager --gate-only");
  ASSERT_EQ(ok.code, 0) << ok.output;
  EXPECT_EQ(read_json(tmp_path("s.json"))["provenance"]["seed"].get<uint64_t>(), 18446744073709551615ull);
}

TEST(CliInputs, RepeatedSelectionsAreRefusedNamingOptionAndValue) {
  const std::string shapes = write_text("tiny.json", kTiny);
  const std::string out = " -o " + tmp_path("dup.json");
  expect_usage(run_cli("run --group decode --group decode" + out), "--group twice", {"--group", "'decode'", "twice"});
  expect_usage(run_cli("run --shapes " + shapes + " --shapes " + shapes + out), "--shapes twice", {"--shapes", shapes});
  const std::string dotted = fs::path(shapes).parent_path().string() + "/./" + fs::path(shapes).filename().string();
  expect_usage(run_cli("run --shapes " + shapes + " --shapes " + dotted + out), "--shapes same file",
               {"--shapes", "the same file"});
  expect_usage(run_cli("run --shapes " + shapes + " --mode eager,eager" + out), "--mode", {"--mode", "'eager'", "twice"});
  expect_usage(run_cli("run --shapes " + shapes + " --dtype bf16,bf16" + out), "--dtype", {"--dtype", "'bf16'", "twice"});
  expect_usage(run_cli("sweep --shapes " + shapes + " --knob ATTNBENCH_3D_SPLITS=0,1 --mode graph,graph" + out),
               "sweep --mode", {"--mode", "'graph'", "twice"});
  expect_usage(run_cli("run --shapes " + shapes + " --set ATTNBENCH_3D_SPLITS=1 --set ATTNBENCH_3D_SPLITS=2" + out),
               "--set twice", {"--set", "ATTNBENCH_3D_SPLITS", "twice"});
  // Two files whose cases share (group, shape, dtype): the rows could not be told apart.
  const std::string copy = write_text("tiny_copy.json", kTiny);
  expect_usage(run_cli("run --shapes " + shapes + " --shapes " + copy + out), "same case twice",
               {"tiny/a/bf16", shapes, copy});
  const std::string dtypes = write_text("dup_dtypes.json", R"({"shapes": [{"name": "a", "heads": 2, "kv_heads": 1,
    "head_size": 64, "seqlen_k": 9, "dtypes": ["bf16", "bf16"]}]})");
  expect_usage(run_cli("run --shapes " + dtypes + out), "dtypes twice", {dtypes, "'a'", "field 'dtypes'", "bf16"});
  EXPECT_FALSE(fs::exists(tmp_path("dup.json")));
}

TEST(CliInputs, DefaultResultsFolderThatCannotBeMadeSuggestsOut) {
  const std::string dir = own_folder("no_results");
  std::ofstream(dir + "/results") << "a file where the folder would go";
  const std::string shapes = write_text("tiny.json", kTiny);
  const Result run = shell(in_folder(dir, "run --shapes " + shapes + " --backend cpu"));
  expect_usage(run, "run without -o", {dir + "/results", "-o"});
  const Result sweep = shell(in_folder(dir, "sweep --shapes " + shapes + " --backend cpu --knob ATTNBENCH_3D_SPLITS=0,1"));
  expect_usage(sweep, "sweep without -o", {dir + "/results", "-o"});
}

TEST(CliInputs, MisspelledEnvironmentVariableIsWarnedAtRunStart) {
  const std::string out = tmp_path("env.json");
  const Result r = run_cli("run --shapes " + write_text("tiny.json", kTiny) + " --backend cpu --mode eager --gate-only -o " +
                           out, "ATTNBENCH_SM90_STAGE=3 ATTNBENCH_3D_SPLITS=2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: environment variable ATTNBENCH_SM90_STAGE")) << r.output;
  EXPECT_TRUE(contains(r.output, "did you mean ATTNBENCH_SM90_STAGES?")) << r.output;
  EXPECT_FALSE(contains(r.output, "variable ATTNBENCH_3D_SPLITS")) << "a knob is not warned about:\n" << r.output;
  EXPECT_FALSE(contains(r.output, "variable ATTNBENCH_SHAPES_DIR")) << r.output;
  const Result s = run_cli("sweep --group nope --knob ATTNBENCH_3D_SPLITS=0,1", "ATTNBENCH_GATED_FUSE_GAT=1");
  EXPECT_TRUE(contains(s.output, "did you mean ATTNBENCH_GATED_FUSE_GATE?")) << s.output;
}

TEST(CliInputs, CaseTooLargeForMemoryIsDeclinedBeforeAllocating) {
  // 1024 sequences of one token, each owning a block of 2^20 tokens: hundreds of TiB of K/V cache.
  const std::string shapes = write_text("huge.json", R"({"shapes": [{"name": "huge", "heads": 64, "kv_heads": 64,
    "head_size": 512, "batch": 1024, "seqlen_q": 1, "seqlen_k": 1, "block_size": 1048576, "dtypes": ["bf16"]}]})");
  const std::string out = tmp_path("huge.json_out.json");
  const Result r = run_cli("run --shapes " + shapes + " --backend cpu --mode eager -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto rows = read_json(out)["rows"];
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["status"], "declined");
  const std::string why = rows[0]["reason"];
  EXPECT_TRUE(contains(why, "TiB of host memory,") && contains(why, "available")) << why;
}

TEST(CliInputs, AllocationFailureAfterTheEstimateIsAnErrorRow) {
  // Two 512 MiB cache blocks (one sequence's, one spare) under a 900 MB address-space limit: the estimate passes
  // on a machine with the memory, the allocation itself fails.
  const auto avail = attnbench::host_available_bytes();
  if (!avail || *avail < 8.0 * (1 << 30)) GTEST_SKIP() << "needs 8 GiB of available memory for the estimate to pass";
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "ASan's shadow memory does not fit under the address-space limit this test sets";
#endif
#endif
  const std::string shapes = write_text("mid.json", R"({"shapes": [{"name": "mid", "heads": 8, "kv_heads": 8,
    "head_size": 128, "batch": 1, "seqlen_q": 1, "seqlen_k": 1, "block_size": 262144, "dtypes": ["bf16"]}]})");
  const std::string out = tmp_path("mid_out.json");
  const Result r = shell("ulimit -v 900000; ATTNBENCH_SHAPES_DIR=" ATTNBENCH_SOURCE_DIR "/shapes " ATTNBENCH_BINARY
                         " run --shapes " + shapes + " --backend cpu --mode eager --gate-only -o " + out);
  EXPECT_EQ(r.code, 1) << r.output;
  const auto rows = read_json(out)["rows"];
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["status"], "error");
  EXPECT_TRUE(contains(rows[0]["reason"].get<std::string>(), "out of memory")) << rows[0].dump();
}
