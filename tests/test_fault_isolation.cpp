// Worker isolation on the CPU backend: each test-only faulty kernel costs exactly its own rows (error with the
// cause, or mismatch), and every other row of the run is ok, whether or not this process ran OpenMP's threads
// before (they do not survive fork: the workers then run on one).
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_helpers.hpp"
#include "faulty_kernels.hpp"
#include "run/runner.hpp"

namespace attnbench {
namespace {

using testing::Fault;
using testing::fault_name;

const char* kShapes = R"({"group": "faults", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64,
  "block_size": 16, "dtypes": ["bf16"]},
  "shapes": [{"name": "prefill", "seqlens": [[3, 40], [17, 17]]}, {"name": "decode", "batch": 3, "seqlen_q": 1,
             "seqlen_k": 70}]})";

constexpr double kCaseTimeout = 3;

RunOptions fault_run(Isolation iso, const std::vector<Fault>& faults, bool timed) {
  RunOptions o;
  o.shape_files = {testcli::write_text("faults.json", kShapes)};
  o.backend = "cpu";
  o.modes = {Mode::eager};
  o.kernel_glob = "cpu.unified,test.fault_*";
  o.extra_kernels = testing::faulty_entries(faults);
  o.isolate = iso;
  o.case_timeout_s = kCaseTimeout;
  o.gate_only = !timed;
  o.stop.min_samples = 3;
  o.stop.timeout_s = 0.2;
  o.rounds = 2;
  return o;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

// The row a fault must give, and every other row ok.
void expect_own_rows_only(const ResultsFile& f, std::size_t faults, std::size_t cases) {
  ASSERT_EQ(f.rows.size(), (faults + 1) * cases);
  for (const auto& r : f.rows) {
    const std::string k = r.kernel;
    SCOPED_TRACE(r.shape + " " + k + ": " + r.status + " " + r.reason);
    if (k == "cpu.unified") {
      EXPECT_EQ(r.status, "ok");
      continue;
    }
    if (k == "test.fault_oob_write") {
      EXPECT_EQ(r.status, "error");
      // ASan reports the wild write itself, then aborts or exits instead of dying by the signal.
      EXPECT_TRUE(has(r.reason, "SIGSEGV") || (kAsan && (has(r.reason, "killed by") || has(r.reason, "exited"))));
      EXPECT_TRUE(has(r.reason, "first call")) << "names where it failed";
    } else if (k == "test.fault_spin") {
      EXPECT_EQ(r.status, "error");
      EXPECT_TRUE(has(r.reason, "timed out after 3 s"));
    } else if (k == "test.fault_abort") {
      EXPECT_EQ(r.status, "error");
      EXPECT_TRUE(has(r.reason, "SIGABRT"));
    } else if (k == "test.fault_crash_when_timed") {
      EXPECT_EQ(r.status, "error");
      EXPECT_TRUE(has(r.reason, "SIGABRT") && has(r.reason, "timed"));
    } else if (k == "test.fault_nan_element" || k == "test.fault_unwritten_element") {
      EXPECT_EQ(r.status, "mismatch");
      ASSERT_TRUE(r.gate);
      EXPECT_EQ(r.gate->nonfinite, 1);
      EXPECT_EQ(r.gate->failed, std::vector<std::string>{"nonfinite"});
    } else {
      ADD_FAILURE() << "unexpected kernel";
    }
  }
}

TEST(FaultIsolation, EachFaultCostsOnlyItsOwnRowsPerCase) {
  std::ostringstream out;
  const auto faults = testing::every_fault();
  const ResultsFile f = run_benchmarks(fault_run(Isolation::per_case, faults, true), out);
  expect_own_rows_only(f, faults.size(), 2);
  EXPECT_EQ(f.provenance["isolation"], "case");
  for (const auto& r : f.rows) {
    if (r.kernel == "cpu.unified") {
      EXPECT_TRUE(r.time_us) << "the case's good kernel is timed in the fresh worker";
    }
  }
}

TEST(FaultIsolation, EachFaultCostsOnlyItsOwnRowsPerKernel) {
  std::ostringstream out;
  const auto faults = testing::every_fault();
  const ResultsFile f = run_benchmarks(fault_run(Isolation::per_kernel, faults, true), out);
  expect_own_rows_only(f, faults.size(), 2);
  EXPECT_EQ(f.provenance["isolation"], "kernel");
}

TEST(FaultIsolation, EachFaultAloneBesideAGoodKernel) {
  for (Fault fault : testing::every_fault()) {
    SCOPED_TRACE(fault_name(fault));
    std::ostringstream out;
    const ResultsFile f = run_benchmarks(fault_run(Isolation::per_case, {fault}, fault == Fault::crash_when_timed), out);
    expect_own_rows_only(f, 1, 2);
  }
}

// A row as JSON without what the CPU kernel's thread count moves: its plan (threads=N, and the splits that follow from
// them) and the gate's error measures, whose sums round apart in the last bits (returned apart, to compare within a
// tolerance).
nlohmann::json without_thread_count(const ResultRow& r, std::vector<double>& measures) {
  nlohmann::json j = row_to_json(r);
  j.erase("plan");
  if (j.contains("gate") && j["gate"].is_object()) j["gate"].erase("reference_ms");  // a wall time
  if (j.contains("gate") && j["gate"].is_object())
    for (const char* k : {"rel_l2", "max_abs", "max_row_rel"})
      if (j["gate"][k].is_number()) {
        measures.push_back(j["gate"][k].get<double>());
        j["gate"].erase(k);
      }
  return j;
}

TEST(FaultIsolation, GatesAndStatusesMatchAnInProcessRun) {
  // The faults that leave the process alive run in-process too: the same rows, isolated or not (isolated first:
  // the in-process run starts OpenMP's threads here).
  const std::vector<Fault> faults = {Fault::nan_element, Fault::unwritten_element};
  std::ostringstream a, b;
  const ResultsFile isolated = run_benchmarks(fault_run(Isolation::per_case, faults, false), a);
  const ResultsFile in_process = run_benchmarks(fault_run(Isolation::off, faults, false), b);
  ASSERT_EQ(in_process.rows.size(), isolated.rows.size());
  // The workers run OpenMP on one thread where this process ran its threads before (a whole test binary).
  for (std::size_t i = 0; i < isolated.rows.size(); ++i) {
    std::vector<double> m_in, m_iso;
    EXPECT_EQ(without_thread_count(in_process.rows[i], m_in), without_thread_count(isolated.rows[i], m_iso)) << i;
    ASSERT_EQ(m_in.size(), m_iso.size()) << i;
    for (std::size_t k = 0; k < m_in.size(); ++k) EXPECT_NEAR(m_in[k], m_iso[k], 1e-6 * (1 + m_in[k])) << i;
  }
}

TEST(FaultIsolation, AutomaticIsolationOnTheCpu) {
  std::ostringstream out;
  RunOptions o = fault_run(Isolation::automatic, {Fault::nan_element}, false);
  const ResultsFile f = run_benchmarks(o, out);
  EXPECT_EQ(f.provenance["isolation"], isolation_name(kCpuIsolation));
}

}  // namespace
}  // namespace attnbench
