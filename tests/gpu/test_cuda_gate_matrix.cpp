// cuda.unified on the planted-bug matrix's shapes (tests/gate_matrix_shapes.hpp), through every path that serves
// them (auto, narrow and wide 2D, 3D decode with several split counts and both rings), in both dtypes and both
// block orders: the harness's gate (both bounds) must hold, so the bounds the CPU matrix shows catching every
// planted bug are bounds the real GPU kernels meet. Prints each run's worst row error (the README's distribution).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "../gate_matrix_shapes.hpp"
#include "attnbench/reference.hpp"
#include "cases/check_rows.hpp"
#include "cases/gate.hpp"
#include "gpu_case.hpp"

namespace attnbench::gputest {
namespace {

using Knobs = std::map<std::string, std::string>;

std::vector<Knobs> settings_for(const AttentionProblem& p) {
  if (p.is_decode() || p.max_seqlen_q() <= 16)
    return {{},
            {{"ATTNBENCH_3D_SPLITS", "1"}},
            {{"ATTNBENCH_3D_SPLITS", "7"}, {"ATTNBENCH_3D_MERGE", "fused"}},
            {{"ATTNBENCH_3D_SPLITS", "7"}, {"ATTNBENCH_3D_MERGE", "separate"}},
            {{"ATTNBENCH_3D_SPLITS", "64"}, {"ATTNBENCH_3D_MERGE", "fused"}},
            {{"ATTNBENCH_3D_SPLITS", "64"}, {"ATTNBENCH_3D_MERGE", "separate"}},
            {{"ATTNBENCH_3D_STAGES", "6"}},  // declined at d256
            {{"ATTNBENCH_3D_STAGES", "6"}, {"ATTNBENCH_3D_SPLITS", "7"}, {"ATTNBENCH_3D_MERGE", "separate"}}};
  return {{}, {{"ATTNBENCH_SM90_PATH", "narrow"}}, {{"ATTNBENCH_SM90_PATH", "wide"}}};
}

std::string knob_text(const Knobs& k) {
  std::string s;
  for (const auto& [n, v] : k) s += " " + n + "=" + v;
  return s.empty() ? " (defaults)" : s;
}

class CudaGateMatrix : public ::testing::TestWithParam<MatrixShape> {};

TEST_P(CudaGateMatrix, EveryPathPassesTheGate) {
  const MatrixShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    const AttentionProblem p = attnbench::problem_of(m, dt);
    for (BlockOrder order : {BlockOrder::shuffled, BlockOrder::contiguous}) {
      for (const Knobs& k : settings_for(p)) {
        const KnobValues kv = KnobValues::resolve(k, false);
        const Support s = make_cuda_unified()->supports(p, kv);
        if (!s.ok) {
          std::printf("  %-28s %s%s: declined (%s)\n", m.name, dtype_name(dt), knob_text(k).c_str(), s.reason.c_str());
          continue;
        }
        DeviceCase c(p, k, 17, order);
        cuda::Stream stream;
        c.poison();
        c.run(stream.get());
        stream.synchronize();
        std::vector<uint16_t> out(c.out_elems());
        c.out.download(out.data(), out.size() * 2);
        const auto ids = select_check_rows(p, 8e9, 1);
        std::vector<float> ref(ids.size() * p.head_size);
        reference::paged_attention(c.host.params(), ids, ref.data());
        std::vector<int64_t> rows;
        for (const auto& r : ids) rows.push_back(r.token * p.heads + r.head);
        const GateResult g = gate_rows(out.data(), static_cast<int64_t>(out.size()), dt, p.head_size, rows,
                                       ref.data(), default_tolerance(dt));
        std::printf("  %-28s %s %-10s%s row_rel=%.3g max_abs=%.3g [%s]\n", m.name, dtype_name(dt),
                    block_order_name(order), knob_text(k).c_str(), g.max_row_rel, g.max_abs,
                    c.plan->summary.c_str());
        EXPECT_TRUE(g.passed) << m.name << " " << dtype_name(dt) << knob_text(k) << ": " << gate_failure_reason(g);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGateMatrix, ::testing::ValuesIn(matrix_shapes()),
                         [](const ::testing::TestParamInfo<MatrixShape>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attnbench::gputest
