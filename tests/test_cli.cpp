// The command line as a user meets it: exit codes, error messages, and the result files of a small run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "results/results.hpp"

namespace fs = std::filesystem;

namespace {
using testcli::Result;
using testcli::run_cli;
using testcli::tmp_path;

const char* kSmallShapes = R"({"group": "tiny", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "block_size": 16},
  "shapes": [{"name": "prefill", "seqlens": [[3, 40], [17, 17]]},
             {"name": "decode", "batch": 3, "seqlen_q": 1, "seqlen_k": 70}]})";

std::string write_small_shapes() {
  const std::string p = tmp_path("tiny.json");
  std::ofstream(p) << kSmallShapes;
  return p;
}

void expect_usage_error(const std::string& args, const std::string& fragment) {
  const Result r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}
}  // namespace

TEST(Cli, HelpAndVersion) {
  EXPECT_EQ(run_cli("--help").code, 0);
  const Result v = run_cli("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.output.find("attnbench"), std::string::npos);
  EXPECT_EQ(run_cli("run --help").code, 0);
}

// Each kernel's line: its name, a space, then its backend, however long the names in this build.
TEST(Cli, ListKernelsKeepsEveryNameApartFromItsBackend) {
  const Result r = run_cli("list --kernels");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& k : attnbench::kernel_registry())
    EXPECT_NE(r.output.find("  " + k.name + " "), std::string::npos) << k.name << "\n" << r.output;
}

TEST(Cli, UsageErrorsExitTwoAndNameTheProblem) {
  expect_usage_error("", "subcommand");
  expect_usage_error("run", "--group");
  expect_usage_error("run --group nope", "unknown group 'nope'");
  expect_usage_error("run --group decode --kernel nope.*", "no kernel matches 'nope.*'");
  expect_usage_error("run --group decode --mode fast", "--mode: 'fast'");
  expect_usage_error("run --group decode --dtype fp8", "fp8");
  expect_usage_error("run --group decode --set ATTNBENCH_BOGUS=1", "unknown knob 'ATTNBENCH_BOGUS'");
  expect_usage_error("run --group decode --set ATTNBENCH_SM90_NARROW_WARPS=5", "not in 4|8");
  expect_usage_error("run --group decode --set ATTNBENCH_CUDNN_HEURISTICS=a,c",
                     "knob ATTNBENCH_CUDNN_HEURISTICS: value 'a,c' has 'c', not in a|b|fallback");
  expect_usage_error("run --group decode --set ATTNBENCH_CUDNN_PLAN=best",
                     "knob ATTNBENCH_CUDNN_PLAN: value 'best' is neither first|autotune nor a non-negative integer");
  expect_usage_error("run --group decode --filter '('", "--filter");
  expect_usage_error("run --group decode --filter '" + std::string(65, '(') + "a" + std::string(65, ')') + "'",
                     "--filter: groups nested more than 64 deep");
  expect_usage_error("run --group decode --backend tpu", "--backend");
  expect_usage_error("run --group decode --l2 warm", "--l2");
  expect_usage_error("run --group decode --gate-only --no-gate -o " + tmp_path("x.json"), "exclude");
  expect_usage_error("run --shapes /nonexistent/shapes.json", "/nonexistent/shapes.json");
}

TEST(Cli, BadShapeFileNamesFileShapeAndField) {
  const std::string p = tmp_path("cli_bad_shapes.json");
  std::ofstream(p) << R"({"shapes": [{"name": "s1", "heads": 8, "kv_heads": 3, "head_size": 64, "seqlen_k": 10}]})";
  const Result r = run_cli("run --shapes " + p + " -o " + tmp_path("bad_out.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find(p), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'s1'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kv_heads"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp_path("bad_out.json")));
}

TEST(Cli, UnwritableOutputFailsBeforeAnyWork) {
  const Result r = run_cli("run --shapes " + write_small_shapes() + " -o /nonexistent/dir/r.json");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/dir"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("cpu.unified"), std::string::npos) << "nothing should have run:\n" << r.output;
}

TEST(Cli, SmallRunWritesJsonAndCsvWithTheSchema) {
  const std::string out = tmp_path("run.json"), csv = tmp_path("run.csv");
  const Result r = run_cli("run --shapes " + write_small_shapes() + " --backend cpu --min-samples 3 --timeout 1 -o " +
                           out + " --csv " + csv + " --set ATTNBENCH_CPU_MAX_GFLOP=10");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["schema"], "attnbench.results/1");
  for (const char* k : {"attnbench_version", "git_sha", "command", "host", "device", "seed", "timestamp", "knobs"})
    EXPECT_TRUE(j["provenance"].contains(k)) << k;
  EXPECT_NE(j["provenance"]["command"].get<std::string>().find("--set ATTNBENCH_CPU_MAX_GFLOP=10"), std::string::npos);
  const auto& rows = j["rows"];
  ASSERT_EQ(rows.size(), 4u);  // 2 shapes x 2 dtypes, eager: a CPU kernel gets no graph row unless --mode asks
  int ok = 0, declined = 0;
  for (const auto& row : rows) {
    for (const char* k : {"group", "shape", "dtype", "kernel", "backend", "mode", "status", "reason", "gate", "time_us",
                          "tflops", "gbps", "knobs", "repro", "flops", "bytes", "dims"})
      EXPECT_TRUE(row.contains(k)) << k;
    EXPECT_EQ(row["group"], "tiny");
    EXPECT_EQ(row["kernel"], "cpu.unified");
    EXPECT_EQ(row["knobs"]["ATTNBENCH_CPU_MAX_GFLOP"], "10");
    EXPECT_NE(row["repro"].get<std::string>().find("attnbench run"), std::string::npos);
    if (row["mode"] == "eager") {
      EXPECT_EQ(row["status"], "ok");
      EXPECT_TRUE(row["gate"]["passed"].get<bool>());
      EXPECT_GT(row["gate"]["rows_checked"].get<int>(), 0);
      for (const char* k : {"median", "min", "q1", "q3", "mean", "stdev", "n"}) EXPECT_TRUE(row["time_us"].contains(k));
      EXPECT_GE(row["time_us"]["n"].get<int>(), 1);
      ++ok;
    } else {
      EXPECT_EQ(row["status"], "declined");
      EXPECT_NE(row["reason"].get<std::string>().find("CUDA"), std::string::npos);
      ++declined;
    }
  }
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(declined, 0);
  std::ifstream c(csv);
  std::string line;
  int lines = 0;
  std::getline(c, line);
  EXPECT_EQ(line.rfind("group,shape,op,dtype,kernel,backend,mode", 0), 0u);
  while (std::getline(c, line)) ++lines;
  EXPECT_EQ(lines, 4);
  // Named, graph mode gets its declined rows, saying why.
  const Result named = run_cli("run --shapes " + write_small_shapes() + " --backend cpu --mode eager,graph --gate-only "
                               "--no-progress -o " + tmp_path("named_modes.json"));
  ASSERT_EQ(named.code, 0) << named.output;
  int graph = 0;
  const nlohmann::json named_rows = testcli::read_json(tmp_path("named_modes.json"))["rows"];
  for (const auto& row : named_rows)
    if (row["mode"] == "graph") {
      EXPECT_EQ(row["status"], "declined");
      EXPECT_NE(row["reason"].get<std::string>().find("CUDA"), std::string::npos);
      ++graph;
    }
  EXPECT_EQ(graph, 4);
}

// A gated shape with seq_lens aligned top-left and an attention shape aligned top-left run end to end on the CPU:
// rows ok, gated, and the fields in their dims.
TEST(Cli, SeqLensAndTopLeftShapesRunAndPassTheGate) {
  const std::string gated = tmp_path("seq_lens.json"), attn = tmp_path("top_left.json");
  std::ofstream(gated) << R"({"group": "pad", "op": "gated_block", "shapes": [{"name": "g", "batch": 2, "seqlen": 64,
      "d_model": 64, "h_q": 2, "h_kv": 1, "d_head": 64, "rope_dim": 16, "seq_lens": [64, 20],
      "causal_bottom_right": false, "dtypes": ["bf16"]}]})";
  std::ofstream(attn) << R"({"group": "tl", "shapes": [{"name": "a", "heads": 4, "kv_heads": 2, "head_size": 64,
      "seqlens": [[30, 200], [7, 7]], "causal_bottom_right": false, "dtypes": ["fp16"]}]})";
  for (const std::string& file : {gated, attn}) {
    const std::string out = file + ".out.json";
    const Result r = run_cli("run --shapes " + file + " --backend cpu --mode eager --min-samples 1 --timeout 1 -o " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    std::ifstream f(out);
    const auto rows = nlohmann::json::parse(f)["rows"];
    ASSERT_EQ(rows.size(), 1u) << file;
    EXPECT_EQ(rows[0]["status"], "ok") << rows[0].dump();
    EXPECT_TRUE(rows[0]["gate"]["passed"].get<bool>()) << rows[0].dump();
    EXPECT_EQ(rows[0]["dims"]["causal_bottom_right"], false);
    if (file == gated) {
      EXPECT_EQ(rows[0]["dims"]["seq_lens"], nlohmann::json::array({64, 20}));
    }
  }
}

TEST(Cli, CpuWorkLimitDeclinesWithAReason) {
  const std::string out = tmp_path("declined.json");
  const Result r = run_cli("run --group long_prefill --filter d128_h32kv32_b1_s8192/bf16 --backend cpu -o " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["rows"].size(), 1u);  // eager only: a CPU kernel's graph row is not made without --mode
  EXPECT_EQ(j["rows"][0]["status"], "declined");
  EXPECT_EQ(j["rows"][0]["mode"], "eager");
  EXPECT_NE(j["rows"][0]["reason"].get<std::string>().find("ATTNBENCH_CPU_MAX_GFLOP"), std::string::npos);
  EXPECT_TRUE(j["rows"][0]["time_us"].is_null());
}

TEST(Cli, ListShowsGroupsKernelsKnobs) {
  const Result r = run_cli("list");
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"decode", "gated_397b", "cpu.unified", "ATTNBENCH_3D_SPLITS", "a|b|fallback[,...]",
                        "first|autotune|N"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
  const Result s = run_cli("list --shapes --group gqa");
  EXPECT_NE(s.output.find("d128_h32kv8_chunked_q512_kv4096"), std::string::npos) << s.output;
}

TEST(Cli, CudaBackendWithoutADeviceIsDeclinedNotACrash) {
  // Without a GPU (or without the CUDA build) the CUDA kernels are declined rows naming why; with a GPU they run
  // and must pass the gate. Either way the run ends with exit 0 and a row for every (shape, dtype, mode).
  const std::string out = tmp_path("cuda.json");
  const Result r = run_cli("run --shapes " + write_small_shapes() + " --backend cuda --gate-only -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  // 4 cases x 2 modes, per CUDA attention kernel of this build (one "-" row each without any).
  std::size_t cuda_kernels = 0;
  for (const auto& k : attnbench::kernel_registry())
    cuda_kernels += k.backend == attnbench::Backend::cuda && k.op == attnbench::Op::attention;
  ASSERT_EQ(j["rows"].size(), 8u * std::max<std::size_t>(cuda_kernels, 1));
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["backend"], "cuda");
    if (row["status"] == "declined") {
      const std::string why = row["reason"];
      EXPECT_TRUE(why.find("no CUDA device") != std::string::npos || why.find("without the CUDA backend") != std::string::npos)
          << why;
    } else {
      EXPECT_EQ(row["status"], "ok") << row["reason"];
      EXPECT_TRUE(row["gate"]["passed"].get<bool>());
    }
  }
}

TEST(Cli, OutAndCsvMayNotBeTheSameFile) {
  const Result r = run_cli("run --shapes " + write_small_shapes() + " --backend cpu -o " + tmp_path("same.csv"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("same file"), std::string::npos) << r.output;
  const Result r2 = run_cli("run --shapes " + write_small_shapes() + " --backend cpu -o " + tmp_path("a.json") +
                            " --csv " + tmp_path("a.json"));
  EXPECT_EQ(r2.code, 2) << r2.output;
}

TEST(Cli, ReproLineRerunsExactlyItsRow) {
  const std::string shapes = tmp_path("repro_shapes.json");
  std::ofstream(shapes) << R"({"group": "rp", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64},
    "shapes": [{"name": "a+b", "batch": 1, "seqlen_k": 20}, {"name": "aab", "batch": 1, "seqlen_k": 30}]})";
  const std::string out = tmp_path("repro.json");
  ASSERT_EQ(run_cli("run --shapes " + shapes + " --backend cpu --mode eager --gate-only --atol 0.03 -o " + out).code, 0);
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["rows"].size(), 4u);
  const std::string repro = j["rows"][0]["repro"];
  EXPECT_NE(repro.find("--backend cpu"), std::string::npos) << repro;
  EXPECT_NE(repro.find("--atol 0.03"), std::string::npos) << repro;
  const std::string again = tmp_path("repro_again.json");
  const Result r = run_cli(repro.substr(std::string("attnbench ").size()) + " --gate-only -o " + again);
  ASSERT_EQ(r.code, 0) << repro << "\n" << r.output;
  std::ifstream g(again);
  const auto k = nlohmann::json::parse(g);
  ASSERT_EQ(k["rows"].size(), 1u) << repro;  // the regex in the name matched only itself
  EXPECT_EQ(k["rows"][0]["shape"], "a+b");
}

TEST(Cli, EmptyShardIsNamed) {
  const Result r = run_cli("run --shapes " + write_small_shapes() + " --backend cpu --shard 9/9 -o " + tmp_path("s.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--shard 9/9"), std::string::npos) << r.output;
}

// The gated block's backward end to end on the CPU: each gradient asked for gated as its own tensor, a smaller
// selection's work smaller, an inference-only mode declined by name.
TEST(Cli, GatedBlockBackwardRunsGatedPerGradient) {
  const std::string file = tmp_path("gbwd.json"), out = tmp_path("gbwd.out.json");
  std::ofstream(file) << R"({"group": "gb", "op": "gated_block_backward", "defaults": {"seqlen": 64, "d_model": 256,
      "h_q": 4, "h_kv": 2, "d_head": 64, "rope_dim": 16, "dtypes": ["bf16"]},
      "shapes": [{"name": "all"}, {"name": "dwo", "need": ["dw_o"]}, {"name": "mx", "mx": {}}]})";
  const Result r = run_cli("run --shapes " + file + " --backend cpu --mode eager --min-samples 1 --timeout 1 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto rows = nlohmann::json::parse(f)["rows"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["op"], "gated_block_backward");
  EXPECT_EQ(rows[0]["kernel"], "cpu.gated_block_bwd");
  EXPECT_EQ(rows[0]["status"], "ok") << rows[0].dump();
  std::vector<std::string> names;
  for (const auto& t : rows[0]["gate"]["tensors"]) names.push_back(t["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"dh", "dw_qkvg", "dw_o", "dw_q_norm", "dw_k_norm"}));
  EXPECT_EQ(rows[0]["gate"]["rows_checked"], 64 + 768 + 256 + 1 + 1);  // tokens, W_qkvg rows, W_o rows, two norms
  EXPECT_EQ(rows[1]["status"], "ok");
  ASSERT_EQ(rows[1]["gate"]["tensors"].size(), 1u);
  EXPECT_LT(rows[1]["flops"].get<double>(), rows[0]["flops"].get<double>() / 4);
  EXPECT_EQ(rows[2]["status"], "declined");
  EXPECT_NE(rows[2]["reason"].get<std::string>().find("field 'mx'"), std::string::npos) << rows[2].dump();
}

// The backward op end to end on the CPU: a row per (shape, dtype), gated tensor by tensor, timed, its work the
// backward's; the rows read back as a results file (compare and merge take them).
TEST(Cli, BackwardShapesRunGatedPerTensor) {
  const std::string file = tmp_path("bwd.json"), out = tmp_path("bwd.out.json");
  std::ofstream(file) << R"({"group": "bw", "op": "attention_backward", "shapes": [{"name": "a", "heads": 4,
      "kv_heads": 2, "head_size": 64, "seqlens": [[30, 200], [70, 70]], "softcap": 20, "dtypes": ["bf16"]}]})";
  const Result r = run_cli("run --shapes " + file + " --backend cpu --mode eager --min-samples 1 --timeout 1 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto rows = nlohmann::json::parse(f)["rows"];
  ASSERT_EQ(rows.size(), 1u);
  const auto& row = rows[0];
  EXPECT_EQ(row["op"], "attention_backward");
  EXPECT_EQ(row["kernel"], "cpu.unified_bwd");
  EXPECT_EQ(row["status"], "ok") << row.dump();
  EXPECT_EQ(row["dims"]["total_k"], 270);
  ASSERT_EQ(row["gate"]["tensors"].size(), 3u);
  EXPECT_EQ(row["gate"]["tensors"][1]["name"], "dk");
  EXPECT_EQ(row["gate"]["rows_checked"], 100 * 4 + 2 * 270 * 2);
  EXPECT_FALSE(row["time_us"].is_null());
  const attnbench::ResultRow back = attnbench::row_from_json(row);  // compare and merge read rows this way
  ASSERT_TRUE(back.gate.has_value());
  ASSERT_EQ(back.gate->tensors.size(), 3u);
  EXPECT_EQ(back.gate->tensors[2].name, "dv");
  EXPECT_EQ(back.gate->tensors[2].rows_checked, 270 * 2);
}
