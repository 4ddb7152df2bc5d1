// Worker isolation on the GPU: each test-only faulty CUDA kernel costs exactly its own rows (error with the CUDA
// error or the timeout, or mismatch) and cuda.unified's rows on the same cases stay ok, each worker in a fresh
// device context. This process must touch no GPU before the run (the workers are forked from it): the run's own
// probe, in a worker, says whether there is one.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "cli_helpers.hpp"
#include "faulty_cuda_kernels.hpp"
#include "run/runner.hpp"

namespace attnbench {
namespace {

const char* kShapes = R"({"group": "faults", "defaults": {"heads": 8, "kv_heads": 2, "head_size": 128,
  "block_size": 64, "dtypes": ["bf16"]},
  "shapes": [{"name": "prefill", "seqlens": [[130, 300], [17, 17]]}, {"name": "decode", "batch": 4, "seqlen_q": 1,
             "seqlen_k": 700}]})";

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ResultsFile fault_run(Isolation iso) {
  RunOptions o;
  o.shape_files = {testcli::write_text("gpu_faults.json", kShapes)};
  o.backend = "cuda";
  o.modes = {Mode::eager, Mode::graph};
  o.kernel_glob = "cuda.unified,test.cuda_fault_*";
  o.extra_kernels = gputest::faulty_cuda_entries();
  o.isolate = iso;
  o.case_timeout_s = 10;  // the spin row costs this, each worker start a second or two
  o.stop.min_samples = 3;
  o.stop.timeout_s = 0.3;
  o.settle_s = 0.2;
  o.rounds = 2;
  std::ostringstream out;
  return run_benchmarks(o, out);
}

void expect_own_rows_only(const ResultsFile& f) {
  ASSERT_EQ(f.rows.size(), 2u * 6u * 2u);
  for (const auto& r : f.rows) {
    SCOPED_TRACE(r.shape + " " + r.kernel + " " + r.mode + ": " + r.status + " " + r.reason);
    const std::string k = r.kernel;
    if (k == "cuda.unified") {
      EXPECT_EQ(r.status, "ok");
      EXPECT_TRUE(r.time_us);
    } else if (k == "test.cuda_fault_oob_write") {
      EXPECT_EQ(r.status, "error");
      EXPECT_TRUE(has(r.reason, "device fault") && has(r.reason, "cudaErrorIllegalAddress"));
    } else if (k == "test.cuda_fault_trap") {
      EXPECT_EQ(r.status, "error");
      EXPECT_TRUE(has(r.reason, "device fault") && has(r.reason, "cudaError"));
    } else if (k == "test.cuda_fault_spin") {
      EXPECT_EQ(r.status, "error");
      EXPECT_TRUE(has(r.reason, "timed out after 10 s"));
    } else if (k == "test.cuda_fault_nan_element" || k == "test.cuda_fault_unwritten_element") {
      EXPECT_EQ(r.status, "mismatch");
      ASSERT_TRUE(r.gate);
      EXPECT_EQ(r.gate->nonfinite, 1);
    } else {
      ADD_FAILURE() << "unexpected kernel";
    }
  }
}

bool gpu_ran(const ResultsFile& f) {
  for (const auto& r : f.rows)
    if (r.kernel == "cuda.unified" && r.status != "declined") return true;
  return false;
}

TEST(CudaFaultIsolation, EachFaultCostsOnlyItsOwnRowsPerCase) {
  const ResultsFile f = fault_run(Isolation::per_case);
  if (!gpu_ran(f)) GTEST_SKIP() << "no CUDA device";
  expect_own_rows_only(f);
  EXPECT_EQ(f.provenance["isolation"], "case");
}

TEST(CudaFaultIsolation, EachFaultCostsOnlyItsOwnRowsPerKernel) {
  const ResultsFile f = fault_run(Isolation::per_kernel);
  if (!gpu_ran(f)) GTEST_SKIP() << "no CUDA device";
  expect_own_rows_only(f);
}

// A local defect (one 64-row tile of one head, or one (sequence, head) pair, x 0.95) is a mismatch through the full
// run path: the GPU reference checks every row; with --reference cpu the sampled rows still cover every (tile, head)
// unit of these shapes, the prefill's full reference being past the CPU budget. cuda.unified passes both ways.
// In-process (isolation off), so it runs after the tests above have forked their workers.
TEST(CudaLocalFaults, OneWrongTileOrHeadIsAMismatchThroughRun) {
  const char* shapes = R"({"group": "local", "defaults": {"heads": 32, "kv_heads": 8, "head_size": 128,
    "dtypes": ["bf16", "fp16"]}, "shapes": [{"name": "prefill_s4096", "batch": 1, "seqlen_k": 4096},
    {"name": "ragged", "seqlens": [[300, 900], [1000, 1000], [77, 5000]]},
    {"name": "decode_b16", "batch": 16, "seqlen_q": 1, "seqlen_k": 4096}]})";
  for (ReferenceWhere where : {ReferenceWhere::automatic, ReferenceWhere::cpu}) {
    RunOptions o;
    o.shape_files = {testcli::write_text("gpu_local.json", shapes)};
    o.backend = "cuda";
    o.modes = {Mode::graph};
    o.kernel_glob = "cuda.unified,test.cuda_wrong_*";
    o.extra_kernels = gputest::local_fault_entries();
    o.isolate = Isolation::off;
    o.gate_only = true;
    o.reference = where;
    std::ostringstream out;
    const ResultsFile f = run_benchmarks(o, out);
    if (!gpu_ran(f)) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(f.rows.size(), 3u * 2u * 3u);
    for (const auto& r : f.rows) {
      SCOPED_TRACE(r.shape + " " + r.dtype + " " + r.kernel + " (reference " + reference_where_name(where) + "): " +
                   r.status + " " + r.reason);
      ASSERT_TRUE(r.gate);
      EXPECT_EQ(r.status, r.kernel == "cuda.unified" ? "ok" : "mismatch");
      EXPECT_EQ(r.gate->reference, where == ReferenceWhere::cpu ? "cpu" : "gpu");
      EXPECT_TRUE(r.gate->coverage.complete());
      const std::map<std::string, int64_t> tokens = {{"prefill_s4096", 4096}, {"ragged", 1377}, {"decode_b16", 16}};
      if (where != ReferenceWhere::cpu) {
        EXPECT_EQ(r.gate->rows_checked, tokens.at(r.shape) * 32);  // every row
      }
    }
    for (const auto& r : f.rows)
      if (where == ReferenceWhere::cpu && r.shape == "prefill_s4096") {
        EXPECT_LT(r.gate->rows_checked, 4096 * 32 / 4);  // sampled
      }
  }
}

}  // namespace
}  // namespace attnbench
