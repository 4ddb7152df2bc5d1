// cuda.gated_block_bwd through the runner's own path (the op case's inputs, save set and host reference, the block
// bound to the device, one call, the gradient gate): both recompute policies, both layouts, the need_* selections,
// no norm with a window, the Gemma offset and d256 with a GQA group of 16, in both dtypes. A decline fails too.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device.hpp"
#include "op_case.hpp"
#include "registry.hpp"

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

TEST_P(CudaGatedBwd, PassesTheGradientGate) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  const GbRow& row = GetParam();
  const KernelEntry* entry = nullptr;
  for (const auto& k : kernel_registry())
    if (k.name == "cuda.gated_block_bwd") entry = &k;
  ASSERT_NE(entry, nullptr);
  const KnobValues knobs = KnobValues::resolve(row.knobs, false);
  for (DType dt : {DType::bf16, DType::f16}) {
    ShapeCase c;
    c.op = Op::gated_block_backward;
    c.dtype = dt;
    c.name = row.name;
    c.gated = row.shape;
    const auto op = make_op_case(c);
    const Support s = op->supports(*entry, knobs);
    ASSERT_TRUE(s.ok) << row.name << ": " << s.reason;
    CaseSettings settings;
    settings.seed = 41;
    op->prepare(settings, cuda_device());
    const auto bound = op->bind(*entry, *cuda_device(), knobs);
    bound->call();
    const GateResult g = bound->gate(default_tolerance(dt));
    std::string per;
    for (const TensorGate& t : g.tensors) per += " " + t.name + " " + std::to_string(t.max_row_rel);
    std::printf("%-22s %-4s cuda.gated_block_bwd%s\n", row.name, dtype_name(dt), per.c_str());
    EXPECT_TRUE(g.passed) << row.name << " " << dtype_name(dt) << ": " << gate_failure_reason(g) << " " << g.detail;
    for (const TensorGate& t : g.tensors) EXPECT_LT(t.max_row_rel, 0.5 * t.rtol) << row.name << " " << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGatedBwd, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<GbRow>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attnbench
