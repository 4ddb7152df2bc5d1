// cpu.gated_block's save_for_backward: the output is bit-identical with and without it; every saved tensor matches
// the reference's save set (both layouts, with and without qk_norm, with and without q_pre / k_pre); the backward on
// that save set passes the gradient gate under both recompute policies; the stages, the work model, the declines
// and the params check.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "gated_save_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using namespace gatedtest;

GatedOptions save_options(bool norm, QGateLayout layout, bool lse = false) {
  GatedOptions o = plain_options(true);
  o.qk_norm = norm;
  o.q_gate_layout = layout;
  o.return_lse = lse;
  o.save_for_backward = true;
  return o;
}

std::unique_ptr<GatedBlock> cpu_block(const GatedGeometry& g, const GatedOptions& o) {
  return make_cpu_gated_block()->create(g, o, knobs());
}

struct SaveCase {
  const char* name;
  GatedDims dims;
  bool norm;
  QGateLayout layout;
};

std::vector<SaveCase> save_cases() {
  GatedDims no_rope = small_dims(64, 2);
  no_rope.rope_dim = 0;
  return {{"flat_norm_ragged", small_dims(100), true, QGateLayout::flat},
          {"interleaved_norm_b2", small_dims(48, 2), true, QGateLayout::interleaved},
          {"flat_no_norm", small_dims(80), false, QGateLayout::flat},
          {"interleaved_no_norm_no_rope", no_rope, false, QGateLayout::interleaved},
          {"f16_norm", small_dims(64, 2, DType::f16), true, QGateLayout::flat}};
}

class CpuGatedSave : public ::testing::TestWithParam<SaveCase> {};

// (1) out, and the [B, h_q, S] LSE of return_lse (the reorder pass's), are bit-identical with and without the save.
TEST_P(CpuGatedSave, OutputIsBitIdentical) {
  const SaveCase& c = GetParam();
  const GatedGeometry g(c.dims);
  GatedOptions on = save_options(c.norm, c.layout, true), off = on;
  off.save_for_backward = false;
  const GatedHostInputs in = build_gated_inputs(g, 5);
  auto with = cpu_block(g, on), without = cpu_block(g, off);
  const SaveRun a = run_save(*with, in, true), b = run_save(*without, in, false);
  EXPECT_EQ(a.out, b.out);
  ASSERT_EQ(a.lse.size(), b.lse.size());
  for (std::size_t i = 0; i < a.lse.size(); ++i) ASSERT_EQ(a.lse[i], b.lse[i]) << i;
  // Each stage alone, in order (the breakdown), leaves the same output.
  SaveRun s = run_save(*with, in, false);
  std::fill(s.out.begin(), s.out.end(), uint16_t{0xFFFF});
  for (int i = 0; i < static_cast<int>(with->stage_names().size()); ++i) with->execute_stage(i, s.prm, nullptr);
  EXPECT_EQ(s.out, b.out);
}

// (2) Every saved tensor against the reference's save set (expect_save_matches).
TEST_P(CpuGatedSave, SavedTensorsMatchTheReference) {
  const SaveCase& c = GetParam();
  const GatedGeometry g(c.dims);
  const GatedOptions o = save_options(c.norm, c.layout);
  const GatedBwdHost host = build_gated_bwd_host(g, o, 23);
  auto block = cpu_block(g, o);
  for (bool pre : {false, true}) {
    const SaveRun r = run_save(*block, host.in, pre);
    EXPECT_EQ(r.save.q_pre.empty(), !pre);
    expect_save_matches(c.name, g, o, r.save, host.ref);
  }
}

// (3) The chain: the forward's save set into cpu.gated_block_bwd passes the gradient gate, both recompute policies.
TEST_P(CpuGatedSave, BackwardOnTheSaveSetPassesTheGradientGate) {
  const SaveCase& c = GetParam();
  const GatedGeometry g(c.dims);
  const GatedOptions o = save_options(c.norm, c.layout);
  const GatedBwdHost host = build_gated_bwd_host(g, o, 29);
  auto block = cpu_block(g, o);
  for (RecomputePolicy rp : {RecomputePolicy::recompute_qk_pre, RecomputePolicy::save_all}) {
    GatedBwdOptions b;
    b.recompute = rp;
    const SaveRun fwd = run_save(*block, host.in, rp == RecomputePolicy::save_all);
    auto bwd = make_cpu_gated_block_bwd()->create(g, o, b, knobs());
    const GateResult gr = run_bwd_on_save(*bwd, host, fwd);
    EXPECT_TRUE(gr.passed) << c.name << " " << recompute_policy_name(rp) << ": " << gate_failure_reason(gr) << " "
                           << gr.detail;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuGatedSave, ::testing::ValuesIn(save_cases()),
                         [](const ::testing::TestParamInfo<SaveCase>& i) { return std::string(i.param.name); });

TEST(CpuGatedSave, StagesWorkAndWorkspace) {
  const GatedGeometry g(small_dims(64, 2));
  using V = std::vector<std::string>;
  EXPECT_EQ(cpu_block(g, save_options(true, QGateLayout::flat))->stage_names(),
            (V{"qkvg_proj", "norm_rope+save", "sdpa", "gate+save", "out_proj"}));
  EXPECT_EQ(cpu_block(g, save_options(true, QGateLayout::flat, true))->stage_names(),
            (V{"qkvg_proj", "norm_rope+save", "sdpa", "lse_reorder", "gate+save", "out_proj"}));
  GatedDims plain = small_dims(64, 2);
  plain.rope_dim = 0;
  const GatedGeometry gp(plain);
  EXPECT_EQ(cpu_block(gp, save_options(false, QGateLayout::flat))->stage_names(),
            (V{"qkvg_proj", "save_qkv", "sdpa", "gate+save", "out_proj"}));
  GatedOptions on = save_options(true, QGateLayout::flat), off = on;
  off.save_for_backward = false;
  const WorkModel a = gated_block_work(g, on), b = gated_block_work(g, off);
  EXPECT_DOUBLE_EQ(a.flops, b.flops);
  const double t = static_cast<double>(g.tokens()), qw = g.attn_width(), kw = g.h_kv() * g.d_head();
  const double save = 2 * t * (3 * qw + 2 * kw) + 4 * t * g.h_q() + 4 * t * (g.h_q() + g.h_kv());
  EXPECT_DOUBLE_EQ(a.bytes - b.bytes, save);
  EXPECT_DOUBLE_EQ(gated_save_bytes(g, on, true) - gated_save_bytes(g, on, false), 2 * t * (qw + kw));
  EXPECT_EQ(gated_save_bytes(g, off, true), 0.0);
  // The SDPA writes save.o: no attention region in the workspace.
  EXPECT_LE(cpu_block(g, on)->workspace_size() + static_cast<std::size_t>(2 * t * qw),
            cpu_block(g, off)->workspace_size() + kGatedWorkspaceAlign);
}

// (4) The declines, each under its field, in supports() and create().
TEST(CpuGatedSave, DeclinesQuantizedPipelinesAndFusions) {
  const GatedGeometry g(small_dims(64, 2));
  const auto kernel = make_cpu_gated_block();
  auto field = [&](const GatedOptions& o) {
    EXPECT_FALSE(kernel->supports(g, o, knobs()).ok);
    return decline_field([&] { kernel->create(g, o, knobs()); });
  };
  GatedOptions fp8 = save_options(true, QGateLayout::flat), mx = fp8, gate = fp8, nr = fp8;
  fp8.fp8 = Fp8QuantSpec{};
  mx.mx = MxQuantSpec{};
  gate.fuse_gate = true;
  nr.fuse_norm_rope = true;
  EXPECT_EQ(field(fp8), "fp8");
  EXPECT_EQ(field(mx), "mx");
  EXPECT_EQ(field(gate), "fuse_gate");
  EXPECT_EQ(field(nr), "fuse_norm_rope");
  EXPECT_TRUE(kernel->supports(g, save_options(false, QGateLayout::interleaved, true), knobs()).ok);
}

// (4) The params check: each required save pointer, none without the option, rstd only under qk_norm, q_pre and
// k_pre together, no seq_lens; each message names the field.
TEST(CpuGatedSave, ParamsCheckNamesTheField) {
  const GatedGeometry g(small_dims(64, 2));
  const GatedHostInputs in = build_gated_inputs(g, 3);
  auto refused = [](GatedBlock& b, const GatedBlockParams& p, const std::string& what) {
    try {
      b.execute(p, nullptr);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "no refusal naming " << what;
  };
  auto on = cpu_block(g, save_options(true, QGateLayout::flat));
  const SaveRun r = run_save(*on, in, true);
  for (const char* f : {"q", "k", "v", "gate", "o", "lse", "rstd_q", "rstd_k"}) {
    GatedBlockParams p = r.prm;
    GatedSaveOut& s = p.save;
    const std::string name = f;
    for (auto [n, ptr] : {std::pair<const char*, void**>{"q", &s.q}, {"k", &s.k}, {"v", &s.v}, {"gate", &s.gate},
                          {"o", &s.o}})
      if (name == n) *ptr = nullptr;
    if (name == "lse") s.lse = nullptr;
    if (name == "rstd_q") s.rstd_q = nullptr;
    if (name == "rstd_k") s.rstd_k = nullptr;
    refused(*on, p, "params.save." + name + " is null");
  }
  GatedBlockParams half = r.prm;
  half.save.k_pre = nullptr;
  refused(*on, half, "params.save.q_pre and k_pre");
  GatedBlockParams lens = r.prm;
  const std::vector<int32_t> sl = {64, 64};
  lens.seq_lens = sl.data();
  refused(*on, lens, "params.seq_lens");

  GatedOptions no_norm_o = save_options(false, QGateLayout::flat);
  auto no_norm = cpu_block(g, no_norm_o);
  refused(*no_norm, r.prm, "params.save.rstd_q is set for a block without qk_norm");
  GatedOptions off_o = no_norm_o;
  off_o.save_for_backward = false;
  auto off = cpu_block(g, off_o);
  SaveRun plain = run_save(*off, in, false);
  GatedBlockParams stray = plain.prm;
  stray.save.gate = r.prm.save.gate;
  refused(*off, stray, "params.save.gate is set for a block without save_for_backward");
}

}  // namespace
}  // namespace attnbench
