// cpu.gated_block_bwd against the fp32 reference under the gradient gate (both recompute policies, both layouts,
// the need_* selections, masks, GQA, no norm, the Gemma offset), the selection's stages and workspace, the params
// check, and every typed decline of the design.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "gated_bwd_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using gatedtest::knobs;

struct BwdCase {
  std::string name;
  GatedDims dims;
  bool causal = true, qk_norm = true;
  float offset = 0.f;
  int window_left = -1;
  QGateLayout layout = QGateLayout::flat;
  RecomputePolicy recompute = RecomputePolicy::recompute_qk_pre;
};

GatedDims dims(int batch, int seqlen, int h_q, int h_kv, int d, int rope, DType dt = DType::bf16) {
  GatedDims x = gatedtest::small_dims(seqlen, batch, dt);
  x.h_q = h_q;
  x.h_kv = h_kv;
  x.d_head = d;
  x.rope_dim = rope;
  return x;
}

GatedOptions options_of(const BwdCase& c) {
  GatedOptions o = gatedtest::plain_options(c.causal);
  o.qk_norm = c.qk_norm;
  o.norm_weight_offset = c.offset;
  o.window_left = c.window_left;
  o.q_gate_layout = c.layout;
  return o;
}

class GatedBwdCpu : public ::testing::TestWithParam<BwdCase> {};

TEST_P(GatedBwdCpu, PassesTheGradientGate) {
  const BwdCase& c = GetParam();
  const GatedGeometry g(c.dims);
  const GatedOptions o = options_of(c);
  GatedBwdOptions b;
  b.recompute = c.recompute;
  const GatedBwdHost host = build_gated_bwd_host(g, o, 5);
  auto block = make_cpu_gated_block_bwd()->create(g, o, b, knobs());
  const gatedtest::BwdRun r = gatedtest::run_bwd(*block, host);
  EXPECT_TRUE(r.gate.passed) << gate_failure_reason(r.gate) << " " << r.gate.detail;
  const std::size_t want = 3 + (c.qk_norm ? 2 : 0);
  EXPECT_EQ(r.gate.tensors.size(), want);
  for (const TensorGate& t : r.gate.tensors)
    EXPECT_LT(t.max_row_rel, 0.5 * t.rtol) << t.name << ": a correct kernel sits well inside its bound";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GatedBwdCpu,
    ::testing::Values(
        BwdCase{"causal_gqa2", dims(1, 100, 4, 2, 64, 16)},
        BwdCase{"save_all", dims(2, 64, 4, 2, 64, 16), true, true, 0.f, -1, QGateLayout::flat, RecomputePolicy::save_all},
        BwdCase{"interleaved", dims(1, 80, 4, 1, 64, 32), true, true, 0.f, -1, QGateLayout::interleaved},
        BwdCase{"interleaved_save_all", dims(1, 80, 2, 2, 128, 64), false, true, 0.f, -1, QGateLayout::interleaved,
                RecomputePolicy::save_all},
        BwdCase{"gemma_offset_f16", dims(2, 48, 4, 4, 64, 64, DType::f16), true, true, 1.f},
        BwdCase{"no_norm_window", dims(1, 130, 4, 2, 64, 16), true, false, 0.f, 20},
        BwdCase{"no_norm_no_rope", dims(1, 64, 2, 1, 64, 0), false, false},
        BwdCase{"d256_gqa4", dims(1, 70, 4, 1, 256, 64)}),
    [](const auto& info) { return info.param.name; });

GatedBwdOptions only(bool dh, bool dw_qkvg, bool dw_o, std::optional<bool> norms = std::nullopt) {
  GatedBwdOptions b;
  b.need_dh = dh;
  b.need_dw_qkvg = dw_qkvg;
  b.need_dw_o = dw_o;
  b.need_dw_norms = norms;
  return b;
}

std::vector<std::string> stages(const GatedOptions& o, const GatedBwdOptions& b) {
  const GatedGeometry g(gatedtest::small_dims(64));
  std::vector<std::string> out;
  for (GatedBwdStage s : gated_bwd_stages(g, o, b)) out.emplace_back(gated_bwd_stage_name(s));
  return out;
}

TEST(GatedBwdSelection, TheNeedsDecideWhichGemmsRun) {
  const GatedOptions o = gatedtest::plain_options();
  using V = std::vector<std::string>;
  EXPECT_EQ(stages(o, GatedBwdOptions{}),
            (V{"qk_pre_proj", "dy_proj", "gate_bwd", "dw_o", "sdpa_bwd", "norm_rope_bwd", "dw_qkvg", "dh"}));
  EXPECT_EQ(stages(o, only(false, false, true, false)), (V{"gate_bwd", "dw_o"}));
  EXPECT_EQ(stages(o, only(true, false, false, false)),
            (V{"qk_pre_proj", "dy_proj", "gate_bwd", "sdpa_bwd", "norm_rope_bwd", "dh"}));
  GatedBwdOptions save = only(false, true, false);
  save.recompute = RecomputePolicy::save_all;
  EXPECT_EQ(stages(o, save), (V{"dy_proj", "gate_bwd", "sdpa_bwd", "norm_rope_bwd", "dw_qkvg"}));
  GatedOptions plain = o;
  plain.qk_norm = false;  // no norm: nothing reads the pre-norm rows, so nothing recomputes them
  EXPECT_EQ(stages(plain, only(true, false, false)), (V{"dy_proj", "gate_bwd", "sdpa_bwd", "norm_rope_bwd", "dh"}));
}

TEST(GatedBwdSelection, EachSelectionWritesOnlyWhatItAsksAndPassesTheGate) {
  const GatedGeometry g(gatedtest::small_dims(64));
  const GatedOptions o = gatedtest::plain_options();
  const GatedBwdHost host = build_gated_bwd_host(g, o, 9);
  std::size_t full_ws = 0;
  for (const GatedBwdOptions& b :
       {GatedBwdOptions{}, only(false, false, true, false), only(true, false, false, false), only(false, true, false),
        only(false, false, false, true)}) {
    auto block = make_cpu_gated_block_bwd()->create(g, o, b, knobs());
    if (full_ws == 0) full_ws = block->workspace_size();
    EXPECT_LE(block->workspace_size(), full_ws) << block->summary();
    const gatedtest::BwdRun r = gatedtest::run_bwd(*block, host);
    EXPECT_TRUE(r.gate.passed) << block->summary() << ": " << gate_failure_reason(r.gate);
  }
  auto dw_o_only = make_cpu_gated_block_bwd()->create(g, o, only(false, false, true, false), knobs());
  EXPECT_LT(dw_o_only->workspace_size(), full_ws / 2) << "dW_o alone needs no projection gradient";
}

TEST(GatedBwdParams, ANeededPointerNullOrAnUnwantedOneSetIsNamed) {
  const GatedGeometry g(gatedtest::small_dims(64));
  const GatedOptions o = gatedtest::plain_options();
  const GatedBwdHost host = build_gated_bwd_host(g, o, 3);
  auto block = make_cpu_gated_block_bwd()->create(g, o, only(true, false, false), knobs());
  gatedtest::BwdRun r = gatedtest::run_bwd(*block, host);
  auto expect_throw = [&](GatedBlockBwdParams p, const std::string& what) {
    try {
      block->execute(p, nullptr);
      ADD_FAILURE() << "no throw for " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  GatedBlockBwdParams p = r.prm;
  p.dh = nullptr;
  expect_throw(p, "params.dh is null");
  p = r.prm;
  p.dw_o = r.dh.data();
  expect_throw(p, "params.dw_o is set but not asked for");
  p = r.prm;
  p.saved.q_pre = host.q_pre.data();
  expect_throw(p, "params.saved.q_pre is set but not asked for");
  p = r.prm;
  p.seqlen = 32;
  expect_throw(p, "dims do not match");
  std::vector<unsigned char> other(block->workspace_size());
  p = r.prm;
  p.workspace = other.data();
  expect_throw(p, "workspace not prepared");
}

TEST(GatedBwdDeclines, EachDesignDeclineNamesItsField) {
  const GatedGeometry g(gatedtest::small_dims(64));
  const auto k = make_cpu_gated_block_bwd();
  auto field = [&](const GatedOptions& o, const GatedBwdOptions& b) {
    const Support s = k->supports(g, o, b, knobs());
    EXPECT_FALSE(s.ok);
    EXPECT_THROW(k->create(g, o, b, knobs()), GatedDecline);
    return gatedtest::decline_field([&] { k->create(g, o, b, knobs()); });
  };
  GatedOptions o = gatedtest::plain_options();
  GatedOptions fp8 = o;
  fp8.fp8 = Fp8QuantSpec{};
  EXPECT_EQ(field(fp8, {}), "fp8");
  GatedOptions mx = o;
  mx.mx = MxQuantSpec{};
  EXPECT_EQ(field(mx, {}), "mx");
  GatedOptions fg = o;
  fg.fuse_gate = true;
  EXPECT_EQ(field(fg, {}), "fuse_gate");
  GatedOptions fn = o;
  fn.fuse_norm_rope = true;
  EXPECT_EQ(field(fn, {}), "fuse_norm_rope");
  GatedOptions no_norm = o;
  no_norm.qk_norm = false;
  EXPECT_EQ(field(no_norm, only(true, true, true, true)), "need_dw_norms");
  EXPECT_EQ(field(o, only(false, false, false, false)), "need");
  EXPECT_TRUE(k->supports(g, no_norm, GatedBwdOptions{}, knobs()).ok) << "unset need_dw_norms follows qk_norm";
  const GatedGeometry big(gatedtest::small_dims(1 << 15));
  EXPECT_EQ(gatedtest::decline_field([&] { k->create(big, o, {}, knobs({{"ATTNBENCH_CPU_MAX_GFLOP", "1"}})); }),
            "work");
  EXPECT_THROW(parse_recompute_policy("recompute"), GatedDecline);
  EXPECT_EQ(parse_recompute_policy("save_all"), RecomputePolicy::save_all);
}

TEST(GatedBwdWork, CountsTheSelectedGemmsAndTheSdpaBackward) {
  const GatedGeometry g(gatedtest::small_dims(64));
  const GatedOptions o = gatedtest::plain_options();
  const double t = 64, dm = 256, aw = 256, n = 768;
  EXPECT_DOUBLE_EQ(gated_block_bwd_work(g, o, only(false, false, true, false)).flops, 2 * t * dm * aw);
  const double sdpa = attention_bwd_work(gated_bwd_sdpa_problem(g, o)).flops;
  GatedBwdOptions dh = only(true, false, false, false);
  dh.recompute = RecomputePolicy::save_all;
  EXPECT_DOUBLE_EQ(gated_block_bwd_work(g, o, dh).flops, 2 * t * dm * aw + sdpa + 2 * t * n * dm);
}

}  // namespace
}  // namespace attnbench
