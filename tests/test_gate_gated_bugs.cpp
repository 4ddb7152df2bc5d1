// The gated block's planted-bug matrix: cpu.gated_block made to misbehave (a stage skipped, a wrong option or
// input, a damaged output) fails the harness's gated tolerance rule on every shape, including long non-causal
// rows whose outputs are far below the absolute bound; the bug-free block passes everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gated_case.hpp"

namespace attnbench {
namespace {

enum class GatedBug {
  none,
  zeros,            // writes zeros
  times_half,       // the output scaled by 0.5
  no_norm_rope,     // the norm + RoPE stage skipped
  no_gate,          // the sigmoid-gate stage skipped
  no_qk_norm,       // RoPE without the RMSNorm
  norm_offset,      // the (1 + w) weight convention where the model uses w
  rope_sign,        // RoPE with sin negated (rotating the wrong way)
  no_rope,          // cos = 1, sin = 0
  wrong_scale,      // softmax scale 1 instead of d^-0.5
  mask_flipped,     // causal where the model is not, or the other way
  weight_layout,    // per-head interleaved Q/GATE columns read as flat blocks
  stale_row,        // the last row holds the row before it
};

const std::vector<GatedBug>& every_gated_bug() {
  static const std::vector<GatedBug> all = {
      GatedBug::zeros,     GatedBug::times_half, GatedBug::no_norm_rope, GatedBug::no_gate,
      GatedBug::no_qk_norm, GatedBug::norm_offset, GatedBug::rope_sign,  GatedBug::no_rope,
      GatedBug::wrong_scale, GatedBug::mask_flipped, GatedBug::weight_layout, GatedBug::stale_row};
  return all;
}

const char* gated_bug_name(GatedBug b) {
  const char* names[] = {"none",       "zeros",     "times_half", "no_norm_rope", "no_gate",
                         "no_qk_norm", "norm_offset", "rope_sign", "no_rope",      "wrong_scale",
                         "mask_flipped", "weight_layout", "stale_row"};
  return names[static_cast<int>(b)];
}

struct GatedShapeCase {
  const char* name;
  int batch, seqlen;
  bool causal;
  DType dtype;
};

// One run of cpu.gated_block on the case's inputs with the bug planted; returns the output.
std::vector<uint16_t> run_block(const GatedGeometry& g, const GatedOptions& model, const GatedHostInputs& in,
                                GatedBug bug) {
  GatedOptions o = model;
  if (bug == GatedBug::no_qk_norm) o.qk_norm = false;
  if (bug == GatedBug::norm_offset) o.norm_weight_offset = 1.f;
  if (bug == GatedBug::wrong_scale) o.attn_scale = 1.f;
  if (bug == GatedBug::mask_flipped) o.is_causal = !o.is_causal;
  auto block = make_cpu_gated_block()->create(g, o, KnobValues::resolve({}, false));
  const QGateLayout built = bug == GatedBug::weight_layout ? QGateLayout::interleaved : QGateLayout::flat;
  const auto w = build_w_qkvg(g, built, in.wq.data(), in.wgate.data(), in.wk.data(), in.wv.data());
  std::vector<uint16_t> cos = in.cos, sin = in.sin;
  for (std::size_t i = 0; i < sin.size(); ++i) {
    if (bug == GatedBug::rope_sign) sin[i] ^= 0x8000;
    if (bug == GatedBug::no_rope) {
      cos[i] = float_to_half(1.f, g.dtype());
      sin[i] = 0;
    }
  }
  std::vector<uint16_t> out(static_cast<std::size_t>(g.tokens()) * g.d_model(), 0xFFFF);
  std::vector<unsigned char> ws(block->workspace_size(), 0xFF);
  GatedBlockParams p = make_gated_params(g);
  p.h = in.h.data();
  p.w_qkvg = w.data();
  p.q_norm_weight = in.q_norm_weight.data();
  p.k_norm_weight = in.k_norm_weight.data();
  p.cos = cos.data();
  p.sin = sin.data();
  p.w_o = in.w_o.data();
  p.out = out.data();
  p.workspace = ws.data();
  block->prepare_workspace(ws.data(), nullptr);
  const auto stages = block->stage_names();
  for (int i = 0; i < static_cast<int>(stages.size()); ++i) {
    if (bug == GatedBug::no_norm_rope && stages[i] == "norm_rope") continue;
    if (bug == GatedBug::no_gate && stages[i] == "gate") continue;
    block->execute_stage(i, p, nullptr);
  }
  const std::size_t row = g.d_model();
  if (bug == GatedBug::zeros) std::fill(out.begin(), out.end(), 0);
  if (bug == GatedBug::times_half)
    for (auto& x : out) x = float_to_half(0.5f * half_to_float(x, g.dtype()), g.dtype());
  if (bug == GatedBug::stale_row) std::copy(out.end() - 2 * row, out.end() - row, out.end() - row);
  return out;
}

class GatedGateMatrix : public ::testing::TestWithParam<GatedShapeCase> {};

TEST_P(GatedGateMatrix, EveryPlantedBugFailsAndTheBlockPasses) {
  const GatedShapeCase& c = GetParam();
  GatedDims d;
  d.batch = c.batch;
  d.seqlen = c.seqlen;
  d.d_model = 256;
  d.h_q = 4;
  d.h_kv = 2;
  d.d_head = 64;
  d.rope_dim = 16;
  d.dtype = c.dtype;
  const GatedGeometry g(d);
  GatedOptions model;
  model.is_causal = c.causal;
  const GatedHostInputs in = build_gated_inputs(g, 23);
  const auto rows = gated_check_rows(g, model, nullptr, 8e9, 23);
  std::vector<float> ref(rows.size() * g.d_model());
  reference::gated_block(g, model, in.ref(), rows, ref.data());
  const Tolerance tol = gated_tolerance(default_tolerance(g.dtype()), ref.data(), ref.size());
  auto gate = [&](const std::vector<uint16_t>& out) {
    return gate_rows(out.data(), static_cast<int64_t>(out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
  };
  const GateResult good = gate(run_block(g, model, in, GatedBug::none));
  EXPECT_TRUE(good.passed) << c.name << ": " << gate_failure_reason(good);
  EXPECT_LT(good.max_row_rel, 0.5 * tol.rtol) << c.name;
  std::printf("%-24s correct row_rel %.2e max_abs %.2e (atol %.3g rtol %.3g)\n", c.name, good.max_row_rel,
              good.max_abs, tol.atol, tol.rtol);
  for (GatedBug b : every_gated_bug()) {
    const GateResult r = gate(run_block(g, model, in, b));
    EXPECT_FALSE(r.passed) << c.name << ": planted bug " << gated_bug_name(b) << " passed (row_rel "
                           << r.max_row_rel << ", max_abs " << r.max_abs << ")";
    std::printf("%-24s %-14s row_rel %.2e max_abs %.2e%s\n", c.name, gated_bug_name(b), r.max_row_rel, r.max_abs,
                r.max_abs <= tol.atol ? "  (under atol)" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedGateMatrix,
                         ::testing::Values(GatedShapeCase{"causal_s1024_bf16", 1, 1024, true, DType::bf16},
                                           GatedShapeCase{"full_s1024_bf16", 1, 1024, false, DType::bf16},
                                           GatedShapeCase{"full_b2_s512_fp16", 2, 512, false, DType::f16},
                                           GatedShapeCase{"causal_b2_s96_fp16", 2, 96, true, DType::f16}),
                         [](const ::testing::TestParamInfo<GatedShapeCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attnbench
