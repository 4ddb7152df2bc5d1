// The backward on the GPU: the GPU reference against Eigen's on the gradient gate's matrix, and cuda.unified_bwd
// gated on every row of it and on d256 rows of every mask path (d256 runs kernels of its own), on both dK/dV kernels
// and with the GQA group split and not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "bwd_matrix_shapes.hpp"
#include "cases/bwd_inputs.hpp"
#include "cases/gpu_reference.hpp"
#include "cases/op_case.hpp"
#include "cases/registry.hpp"
#include "device/device.hpp"

namespace attnbench {
namespace {

Device* cuda_device() {
  static std::string why;
  static std::unique_ptr<Device> dev = make_cuda_device(&why);
  return dev.get();
}

// The largest per-row relative L2 difference of two [rows, d] fp32 tensors (against b's row norm).
double worst_row(const std::vector<float>& a, const std::vector<float>& b, int d) {
  double worst = 0;
  for (std::size_t r = 0; r < b.size() / d; ++r) {
    double e2 = 0, n2 = 0;
    for (int c = 0; c < d; ++c) {
      const double x = a[r * d + c], y = b[r * d + c];
      e2 += (x - y) * (x - y);
      n2 += y * y;
    }
    worst = std::max(worst, n2 > 0 ? std::sqrt(e2 / n2) : std::sqrt(e2));
  }
  return worst;
}

class GpuBackward : public ::testing::TestWithParam<BwdShape> {};

TEST_P(GpuBackward, ReferenceAgreesWithEigen) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  const BwdShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    BwdReference cpu, gpu;
    BwdInputs in = build_bwd_inputs(problem_of(m, dt), 31, cpu);
    const std::vector<float> lse_cpu = in.lse;
    gpu.dq.resize(cpu.dq.size());
    gpu.dk.resize(cpu.dk.size());
    gpu.dv.resize(cpu.dv.size());
    std::vector<float> o(in.q.size());
    reference_bwd_on_device(*cuda_device(), in, o.data(), gpu);
    double lse = 0;
    for (std::size_t i = 0; i < lse_cpu.size(); ++i) lse = std::max(lse, std::fabs(double(in.lse[i]) - lse_cpu[i]));
    const int d = m.head_size;
    const double dq = worst_row(gpu.dq, cpu.dq, d), dk = worst_row(gpu.dk, cpu.dk, d), dv = worst_row(gpu.dv, cpu.dv, d);
    std::printf("%-24s %-4s gpu vs eigen: dq %.2e dk %.2e dv %.2e lse %.2e (gpu %.0f ms, eigen %.0f ms)\n", m.name,
                dtype_name(dt), dq, dk, dv, lse, gpu.ms, cpu.ms);
    // Each side rounds its own O for D, where one element's rounding may flip: a dQ row of few keys moves by a few
    // 1e-4 (measured up to 4.5% of the gradient bound in bf16, 8% in fp16, whose bound is 4x tighter); fp32 sums in
    // other orders alone read ~1e-6 (dV). A planted bug reads above the whole bound.
    EXPECT_LT(std::max({dq, dk, dv}), 0.15 * gradient_tolerance(dt, default_tolerance(dt)).rtol) << m.name;
    EXPECT_LT(dv, 1e-5) << m.name;
    EXPECT_LT(lse, 1e-4) << m.name;
  }
}

// Through the runner's own path: the op case's inputs and GPU reference, the kernel bound to the device, one call,
// the gate. Every head size of the matrix is served, so a decline fails too.
void expect_path_passes(const AttentionProblem& problem, const char* name, const char* path, const char* splits) {
  const KernelEntry* entry = nullptr;
  for (const auto& k : kernel_registry())
    if (k.name == "cuda.unified_bwd") entry = &k;
  ASSERT_NE(entry, nullptr);
  const KnobValues knobs =
      KnobValues::resolve({{"ATTNBENCH_SM90_BWD_PATH", path}, {"ATTNBENCH_SM90_BWD_SPLITS", splits}}, false);
  for (DType dt : {DType::bf16, DType::f16}) {
    ShapeCase c;
    c.op = Op::attention_backward;
    c.dtype = dt;
    c.name = name;
    c.attention = problem;
    c.attention.types = AttentionTypes::all(dt);
    const auto op = make_op_case(c);
    const Support s = op->supports(*entry, knobs);
    ASSERT_TRUE(s.ok) << name << ": " << s.reason;
    CaseSettings settings;
    settings.seed = 37;
    op->prepare(settings, cuda_device());
    const auto bound = op->bind(*entry, *cuda_device(), knobs);
    bound->call();
    const GateResult g = bound->gate(default_tolerance(dt));
    ASSERT_EQ(g.tensors.size(), 3u);
    EXPECT_EQ(g.reference, "gpu");
    std::printf("%-24s %-4s cuda.unified_bwd %-5s splits %s row_rel %.2e max_abs %.2e (dq %.2e dk %.2e dv %.2e)\n",
                name, dtype_name(dt), path, splits, g.max_row_rel, g.max_abs, g.tensors[0].max_row_rel, g.tensors[1].max_row_rel,
                g.tensors[2].max_row_rel);
    EXPECT_TRUE(g.passed) << name << " " << dtype_name(dt) << " " << path << " splits " << splits << ": "
                          << gate_failure_reason(g);
  }
}

// Both dK/dV kernels (wgmma: d256 its own, 64-key tiles with dV and dK in different warpgroups); a GQA group split
// as the heuristic picks (on these small grids the whole group), unsplit, and in halves.
void expect_cuda_unified_bwd_passes(const AttentionProblem& problem, const char* name) {
  const int group = problem.heads / problem.kv_heads;
  for (const char* path : {"mma", "wgmma"}) {
    expect_path_passes(problem, name, path, "0");
    if (group > 1) expect_path_passes(problem, name, path, "1");
    if (group > 2 && group % 2 == 0) expect_path_passes(problem, name, path, "2");
  }
}

TEST_P(GpuBackward, CudaUnifiedBwdPassesTheGate) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  expect_cuda_unified_bwd_passes(problem_of(GetParam(), DType::bf16), GetParam().name);
}

// The matrix has one d256 row (causal, GQA 16, whole tiles). d256's kernels are their own (mma.sync: column chunks
// and 32-row query tiles; wgmma: 64-key tiles, P^T passed between warpgroups), and the d64/d128 wgmma kernel's
// 128-key tiles and TMA boxes past a sequence's end are too, so every other mask path meets each: ragged tails (a partial key tile, a partial query tile), non-causal, window + softcap, queries
// shorter than keys, top-left (key tiles no query sees: zero dK/dV), a two-sided window.
struct MaskRow {
  BwdShape shape;
  bool top_left = false;
  int window_right = -1;
};

// Test names outlive the rows (BwdShape names are C strings).
const char* intern(std::string s) {
  static std::deque<std::string> names;
  names.push_back(std::move(s));
  return names.back().c_str();
}

std::vector<MaskRow> mask_rows() {
  std::vector<MaskRow> rows;
  for (int d : {256, 128, 64}) {
    auto name = [d](const char* base) { return intern(std::string(base) + "_d" + std::to_string(d)); };
    rows.push_back({{name("ragged_g4"), d, 8, 2, {{300, 300}, {1000, 1000}, {77, 77}, {640, 640}}, true}});
    rows.push_back({{name("full_g2_b2"), d, 4, 2, {{700, 700}, {700, 700}}, false}});
    rows.push_back({{name("window_softcap_g2"), d, 4, 2, {{1500, 1500}}, true, 256, 30.f}});
    rows.push_back({{name("q_short_g4"), d, 8, 2, {{200, 900}, {64, 64}}, true}});
    rows.push_back({{name("top_left_g2"), d, 4, 2, {{200, 900}, {333, 1000}}, true}, true});
    rows.push_back({{name("window_lr_g2"), d, 4, 2, {{600, 600}}, false, 100}, false, 50});
  }
  return rows;
}

class GpuBackwardMasks : public ::testing::TestWithParam<MaskRow> {};

TEST_P(GpuBackwardMasks, CudaUnifiedBwdPassesTheGate) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  const MaskRow& r = GetParam();
  AttentionProblem p = problem_of(r.shape, DType::bf16);
  p.top_left = r.top_left;
  p.features.window_right = r.window_right;
  expect_cuda_unified_bwd_passes(p, r.shape.name);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuBackward, ::testing::ValuesIn(bwd_matrix()),
                         [](const ::testing::TestParamInfo<BwdShape>& i) { return std::string(i.param.name); });
INSTANTIATE_TEST_SUITE_P(Shapes, GpuBackwardMasks, ::testing::ValuesIn(mask_rows()),
                         [](const ::testing::TestParamInfo<MaskRow>& i) { return std::string(i.param.shape.name); });

}  // namespace
}  // namespace attnbench
