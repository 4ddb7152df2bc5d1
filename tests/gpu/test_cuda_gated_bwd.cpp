// cuda.gated_block_bwd through the runner's own path (the op case's inputs, save set and host reference, the block
// bound to the device, one call, the gradient gate): both recompute policies, both layouts, the need_* selections,
// no norm with a window, the Gemma offset and d256 with a GQA group of 16, in both dtypes. A decline fails too.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

struct GbRow {
  const char* name;
  GatedShape shape;
  std::map<std::string, std::string> knobs;
};

GatedShape shape(int batch, int seqlen, int h_q, int h_kv, int d, int rope) {
  GatedShape s;
  s.batch = batch;
  s.seqlen = seqlen;
  s.d_model = 512;
  s.h_q = h_q;
  s.h_kv = h_kv;
  s.d_head = d;
  s.rope_dim = rope;
  return s;
}

std::vector<GbRow> rows() {
  std::vector<GbRow> r;
  r.push_back({"causal_gqa4_d128", shape(2, 256, 8, 2, 128, 64), {}});
  GatedShape save = shape(1, 333, 4, 2, 64, 32);
  save.bwd.recompute = RecomputePolicy::save_all;
  r.push_back({"save_all_ragged_len", save, {}});
  r.push_back({"interleaved_d64", shape(2, 128, 4, 1, 64, 64), {{"ATTNBENCH_GATED_QGATE_LAYOUT", "interleaved"}}});
  GatedShape plain = shape(1, 500, 4, 4, 64, 16);
  plain.qk_norm = false;
  plain.window_left = 100;
  r.push_back({"no_norm_window", plain, {}});
  r.push_back({"d256_gqa16", shape(1, 384, 16, 1, 256, 64), {}});
  GatedShape full = shape(1, 256, 4, 2, 256, 64);
  full.causal = false;
  full.bwd.recompute = RecomputePolicy::save_all;
  r.push_back({"full_d256_save_all", full, {}});
  GatedShape dwo = shape(1, 256, 4, 2, 64, 16);
  dwo.bwd.need_dh = dwo.bwd.need_dw_qkvg = false;
  dwo.bwd.need_dw_norms = false;
  r.push_back({"dw_o_only", dwo, {}});
  GatedShape dh = shape(1, 256, 4, 2, 64, 16);
  dh.bwd.need_dw_o = dh.bwd.need_dw_qkvg = false;
  r.push_back({"dh_and_norms", dh, {}});
  return r;
}

class CudaGatedBwd : public ::testing::TestWithParam<GbRow> {};

const KernelEntry* registry_entry(const std::string& name) {
  for (const auto& k : kernel_registry())
    if (k.name == name) return &k;
  return nullptr;
}

void expect_passes(const KernelEntry& entry, const GbRow& row) {
  const KnobValues knobs = KnobValues::resolve(row.knobs, false);
  for (DType dt : {DType::bf16, DType::f16}) {
    ShapeCase c;
    c.op = Op::gated_block_backward;
    c.dtype = dt;
    c.name = row.name;
    c.gated = row.shape;
    const auto op = make_op_case(c);
    const Support s = op->supports(entry, knobs);
    ASSERT_TRUE(s.ok) << entry.name << " " << row.name << ": " << s.reason;
    CaseSettings settings;
    settings.seed = 41;
    op->prepare(settings, cuda_device());
    const auto bound = op->bind(entry, *cuda_device(), knobs);
    bound->call();
    const GateResult g = bound->gate(default_tolerance(dt));
    EXPECT_EQ(g.reference, "gpu");
    std::string per;
    for (const TensorGate& t : g.tensors) per += " " + t.name + " " + std::to_string(t.max_row_rel);
    std::printf("%-22s %-4s %s%s\n", row.name, dtype_name(dt), entry.name.c_str(), per.c_str());
    EXPECT_TRUE(g.passed) << entry.name << " " << row.name << " " << dtype_name(dt) << ": " << gate_failure_reason(g)
                          << " " << g.detail;
    for (const TensorGate& t : g.tensors) EXPECT_LT(t.max_row_rel, 0.5 * t.rtol) << row.name << " " << t.name;
  }
}

TEST_P(CudaGatedBwd, PassesTheGradientGate) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  const KernelEntry* entry = registry_entry("cuda.gated_block_bwd");
  ASSERT_NE(entry, nullptr);
  expect_passes(*entry, GetParam());
}

// The vendor chain, where this build has cuDNN; not at d256, where cuDNN's SDPA backward leaves part of dK and dV
// unwritten (README, "The gradient gate").
TEST_P(CudaGatedBwd, VendorChainPassesTheGradientGate) {
  const KernelEntry* entry = registry_entry("cudnn.gated_chain_bwd");
  if (!cuda_device() || !entry) GTEST_SKIP() << "no CUDA device or no cuDNN in this build";
  if (GetParam().shape.d_head == 256) GTEST_SKIP() << "cuDNN's d256 backward fails the gate";
  expect_passes(*entry, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGatedBwd, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<GbRow>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attnbench
