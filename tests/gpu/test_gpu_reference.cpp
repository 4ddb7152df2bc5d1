// The GPU reference (reference_gpu.hpp) against the Eigen reference: every row of every planted-bug matrix shape
// (both dtypes, normal and wide scores, shuffled pages, the LSE too), every row of the small cases of every shipped
// attention group and the Eigen sample's rows of the large ones (the features group's softcap, window, sinks, ALiBi,
// qq-bias and 8-bit caches among them, and the FP8 SDPA's 8-bit Q). Both are fp32; they differ by summation order
// and the device's expf/tanhf, so they must agree to about 1e-6 relative (1e-5 per row, 1e-5 on the LSE); on wide
// scores (|s| ~ 100) fp32's 2^-24 of each score reaches e^s as ~1e-5 of it, so those rows get 1e-4. Past 16384
// keys both bounds grow with sqrt(keys): the two sums' rounding errors walk apart with the count of terms (an fp16
// decode over 131072 keys read 1.09e-5 on an H100).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "../gate_matrix_shapes.hpp"
#include "../planted_attention.hpp"
#include "../planted_gate.hpp"
#include "attnbench/reference.hpp"
#include "attnbench/reference_gpu.hpp"
#include "cases/check_rows.hpp"
#include "cases/gpu_reference.hpp"
#include "cases/shapes.hpp"
#include "device/device.hpp"

namespace attnbench {
namespace {

constexpr double kRowRel = 1e-5, kWideRowRel = 1e-4, kLse = 1e-5;

Device* cuda_device() {
  static std::string why;
  static std::unique_ptr<Device> dev = make_cuda_device(&why);
  return dev.get();
}

struct Agreement {
  double worst_row_rel = 0, worst_lse = 0;
  int64_t rows = 0;
};

// The GPU's every row against Eigen's on `ids` (all rows when empty); the LSE as well.
Agreement compare(const HostInputs& in, std::vector<reference::RowId> ids) {
  const AttentionProblem& p = in.problem;
  const int d = p.head_size;
  const int64_t n = p.total_q() * p.heads;
  std::vector<float> gpu(static_cast<std::size_t>(n) * d), gpu_lse(n);
  reference_on_device(*cuda_device(), in, gpu.data(), gpu_lse.data());
  if (ids.empty())
    for (int64_t t = 0; t < p.total_q(); ++t)
      for (int h = 0; h < p.heads; ++h) ids.push_back({t, h});
  std::vector<float> cpu(ids.size() * d), cpu_lse(ids.size());
  reference::paged_attention(in.params(), ids, cpu.data(), cpu_lse.data());
  Agreement a;
  a.rows = static_cast<int64_t>(ids.size());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const int64_t flat = ids[r].token * p.heads + ids[r].head;
    double err2 = 0, ref2 = 0;
    for (int x = 0; x < d; ++x) {
      const double want = cpu[r * d + x], got = gpu[flat * d + x];
      err2 += (got - want) * (got - want);
      ref2 += want * want;
    }
    const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
    a.worst_row_rel = std::max(a.worst_row_rel, std::isnan(rel) ? INFINITY : rel);
    const double lw = cpu_lse[r], lg = gpu_lse[flat];
    const double le = lw == lg ? 0.0 : std::fabs(lg - lw) / std::max(1.0, std::fabs(lw));
    a.worst_lse = std::max(a.worst_lse, std::isnan(le) ? INFINITY : le);
  }
  return a;
}

void expect_agree(const HostInputs& in, bool wide, const std::string& what, std::vector<reference::RowId> ids = {}) {
  const Agreement a = compare(in, std::move(ids));
  const double keys = std::max(1.0, in.problem.max_seqlen_k() / 16384.0);
  EXPECT_LE(a.worst_row_rel, (wide ? kWideRowRel : kRowRel) * std::sqrt(keys)) << what;
  EXPECT_LE(a.worst_lse, kLse) << what;
  std::printf("%-58s rows %8lld  row_rel %.2e  lse %.2e\n", what.c_str(), static_cast<long long>(a.rows),
              a.worst_row_rel, a.worst_lse);
}

class GpuReferenceMatrix : public ::testing::TestWithParam<MatrixShape> {};

TEST_P(GpuReferenceMatrix, AgreesWithEigenOnEveryRow) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  const MatrixShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16})
    for (bool wide : {false, true}) {
      const AttentionProblem p = problem_of(m, dt);
      const HostInputs in = build_inputs(p, 17, BlockOrder::shuffled, wide ? wide_scores(p) : InputSpread{});
      expect_agree(in, wide, std::string(m.name) + " " + dtype_name(dt) + (wide ? " wide" : ""));
    }
}

// The gate on the GPU reference's every row: every planted bug, the local ones among them, fails on every matrix
// shape it can change; the correct planted kernel passes.
TEST_P(GpuReferenceMatrix, EveryPlantedBugFailsAgainstIt) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  const MatrixShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    const HostInputs in = build_inputs(problem_of(m, dt), 17, BlockOrder::shuffled);
    testing::Checked every;
    const int64_t n = in.problem.total_q() * in.problem.heads;
    every.ref.resize(static_cast<std::size_t>(n) * in.problem.head_size);
    reference_on_device(*cuda_device(), in, every.ref.data(), nullptr);
    for (int64_t r = 0; r < n; ++r) every.rows.push_back(r);
    const testing::PlantedKernel kernel(in);
    EXPECT_TRUE(testing::gate(in, every, kernel.run(testing::Bug::none)).passed) << m.name << " " << dtype_name(dt);
    std::vector<testing::Bug> bugs = testing::every_bug();
    for (testing::Bug b : testing::every_local_bug()) bugs.push_back(b);
    for (testing::Bug b : bugs) {
      if (!testing::bug_shows_on(b, in.problem, false).empty()) continue;
      const GateResult g = testing::gate(in, every, kernel.run(b));
      EXPECT_FALSE(g.passed) << m.name << " " << dtype_name(dt) << " " << testing::bug_name(b) << " passed (row_rel "
                             << g.max_row_rel << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuReferenceMatrix, ::testing::ValuesIn(matrix_shapes()),
                         [](const ::testing::TestParamInfo<MatrixShape>& i) { return std::string(i.param.name); });

// Every attention shape of a shipped group, as the runner builds it (its first dtype: the reference's indexing and
// features do not depend on the 16-bit type), the largest caches included (a byte offset past 2^31 is where an
// index would overflow): every row where Eigen's full reference is cheap, else the rows the CPU gate samples.
class GpuReferenceGroup : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuReferenceGroup, AgreesWithEigen) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  std::set<std::string> seen;
  for (const ShapeCase& c : load_group(GetParam())) {
    if (c.op != Op::attention || !seen.insert(c.name).second) continue;
    const HostInputs in = build_inputs(c.attention, 1234, BlockOrder::shuffled, c.input_spread);
    const bool cheap = attention_work(c.attention).flops <= 5e8;
    expect_agree(in, c.input_spread.qk_std != 1.f, GetParam() + "/" + c.name + "/" + c.dtype_label(),
                 cheap ? std::vector<reference::RowId>{} : select_check_rows(c.attention, 5e8, 1234));
  }
  if (seen.empty()) GTEST_SKIP() << GetParam() << " has no attention case (the gated block's reference is the CPU's)";
}

INSTANTIATE_TEST_SUITE_P(Shipped, GpuReferenceGroup, ::testing::ValuesIn(list_groups()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(GpuReference, DeclinesTheGatedBlocksFusionsByName) {
  AttentionProblem p;
  p.q_lens = {4};
  p.kv_lens = {4};
  p.heads = p.kv_heads = 1;
  p.head_size = 64;
  EXPECT_EQ(reference::gpu_reference_conflict(p), "");
  p.fusion.output_gate = true;
  EXPECT_NE(reference::gpu_reference_conflict(p).find("fusion"), std::string::npos);
}

}  // namespace
}  // namespace attnbench
