// Worker isolation on the GPU: each test-only faulty CUDA kernel costs exactly its own rows (error with the CUDA
// error or the timeout, or mismatch) and cuda.unified's rows on the same cases stay ok, each worker in a fresh
// device context. This process must touch no GPU before the run (the workers are forked from it): the run's own
// probe, in a worker, says whether there is one.
#include <gtest/gtest.h>

#include <sstream>

#include "cli_helpers.hpp"
#include "faulty_cuda_kernels.hpp"
#include "runner.hpp"

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

}  // namespace
}  // namespace attnbench
