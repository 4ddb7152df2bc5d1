// The gated block's FP8 mode on the CPU: the spec's declines; the stages it runs, fused and not; the whole pipeline
// (e4m3 h and weights, FP8 projections, Q, K, V and the gated O quantised, the FP8 SDPA) passing the gate against
// the reference, with the fused passes bit-identical to the unfused ones; the gate failing on a descale or scale
// applied wrong; the inputs holding what the codes stand for.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "cases/gated_case.hpp"
#include "gated_cpu_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using namespace gatedtest;

GatedOptions fp8_options(const GatedGeometry& g, bool causal = true) {
  GatedOptions o = plain_options(causal);
  o.fp8 = gated_fp8_defaults(g.d_model(), g.attn_width());
  return o;
}

TEST(CpuGatedFp8, SpecDeclinesNameTheirField) {
  const GatedGeometry g(small_dims());
  ASSERT_EQ(std::size(kFp8Factors), 7u);
  EXPECT_STREQ(kFp8Factors[0].name, "descale_h");
  EXPECT_STREQ(kFp8Factors[6].name, "scale_o");
  for (const Fp8Factor& f : kFp8Factors)
    for (float bad : {0.f, -2.f, NAN, INFINITY, 1e-45f}) {
      GatedOptions o = fp8_options(g);
      (*o.fp8).*f.field = bad;
      EXPECT_EQ(decline_field([&] { make_cpu_gated_block()->create(g, o, knobs()); }), std::string("fp8.") + f.name)
          << bad;
    }
  GatedOptions both = fp8_options(g);
  both.mx = MxQuantSpec{};
  EXPECT_EQ(decline_field([&] { make_cpu_gated_block()->create(g, both, knobs()); }), "fp8");
  GatedDims odd = small_dims();
  odd.d_model = 264;  // 16-byte rows of halves, not of codes
  EXPECT_EQ(decline_field([&] { make_cpu_gated_block()->create(GatedGeometry(odd), fp8_options(GatedGeometry(odd)), knobs()); }),
            "d_model");
  EXPECT_TRUE(make_cpu_gated_block()->supports(g, fp8_options(g), knobs()).ok);
}

// Unfused: seven stages; fused (gate and norm + RoPE): the quantisation of Q, K, V in the norm pass and the gate
// in the O quantisation.
TEST(CpuGatedFp8, StagesUnfusedAndFused) {
  const GatedGeometry g(small_dims());
  GatedOptions o = fp8_options(g);
  EXPECT_EQ(make_cpu_gated_block()->create(g, o, knobs())->stage_names(),
            (std::vector<std::string>{"fp8_qkvg_proj", "norm_rope", "quantize_qkv", "sdpa", "gate", "quantize_o",
                                      "fp8_out_proj"}));
  o.fuse_gate = o.fuse_norm_rope = true;
  EXPECT_EQ(make_cpu_gated_block()->create(g, o, knobs())->stage_names(),
            (std::vector<std::string>{"fp8_qkvg_proj", "norm_rope+quantize", "sdpa", "gate+quantize_o",
                                      "fp8_out_proj"}));
  o.qk_norm = false;
  GatedDims no_rope = small_dims();
  no_rope.rope_dim = 0;  // nothing to fuse into: the quantisation is its own pass
  EXPECT_EQ(make_cpu_gated_block()->create(GatedGeometry(no_rope), o, knobs())->stage_names(),
            (std::vector<std::string>{"fp8_qkvg_proj", "quantize_qkv", "sdpa", "gate+quantize_o", "fp8_out_proj"}));
}

struct Variant {
  GatedDims d;
  bool causal;
  QGateLayout layout;
  const char* what;
};

std::vector<Variant> variants() {
  GatedDims d128 = small_dims(96, 2);
  d128.d_head = 128;
  d128.rope_dim = 32;
  GatedDims fp16 = small_dims(80, 1, DType::f16);
  return {{small_dims(100), true, QGateLayout::flat, "d64 causal flat"},
          {small_dims(96, 2), false, QGateLayout::interleaved, "d64 B2 full interleaved"},
          {d128, true, QGateLayout::interleaved, "d128 B2 causal interleaved"},
          {fp16, true, QGateLayout::flat, "fp16 d64 causal"}};
}

// Every variant passes the gate; the fused passes write the unfused passes' bits (each value is rounded to the
// dtype before it is quantised, as the unfused passes store it).
TEST(CpuGatedFp8, EveryVariantPassesTheGateFusedAndNot) {
  for (const Variant& v : variants()) {
    const GatedGeometry g(v.d);
    GatedOptions o = fp8_options(g, v.causal);
    o.q_gate_layout = v.layout;
    auto unfused = make_cpu_gated_block()->create(g, o, knobs());
    const CpuRun a = run_cpu(g, *unfused, v.layout);
    const GateResult ga = compare_with_reference(g, o, a);
    EXPECT_TRUE(ga.passed) << v.what << ": " << gate_failure_reason(ga);
    EXPECT_LT(ga.max_row_rel, 0.5 * ga.rtol) << v.what << ": a correct pipeline should sit well inside the bound";
    o.fuse_norm_rope = true;
    auto fused = make_cpu_gated_block()->create(g, o, knobs());
    const CpuRun b = run_cpu(g, *fused, v.layout);
    EXPECT_EQ(a.out, b.out) << v.what << ": the fused quantisation differs from the unfused passes";
    o.fuse_gate = true;  // the gate in the O quantisation pass, rounded as the gate pass stores it
    auto both = make_cpu_gated_block()->create(g, o, knobs());
    EXPECT_EQ(a.out, run_cpu(g, *both, v.layout).out) << v.what << ": the fused gate differs from the unfused one";
  }
}

// Planted bugs: a block told one factor wrong (what a kernel applying it wrong computes) fails the gate.
TEST(CpuGatedFp8, PlantedBugsFailTheGate) {
  const GatedGeometry g(small_dims(96, 2));
  const GatedOptions right = fp8_options(g);
  auto fails = [&](auto plant, const char* what) {
    GatedOptions o = right;
    plant(*o.fp8);
    auto block = make_cpu_gated_block()->create(g, o, knobs());
    GatedOptions data = right;  // the codes are the right spec's
    CpuRun r = run_cpu(g, *block, QGateLayout::flat);
    GatedHostInputs in = build_gated_inputs(g, 11);
    apply_fp8_inputs(g, *right.fp8, in);
    const GatedKernelWeights w = gated_kernel_weights(g, data, in);
    r.w = w;
    r.prm.h = r.w.h_codes.data();
    r.prm.w_qkvg = r.w.qkvg_codes.data();
    r.prm.w_o = r.w.o_codes.data();
    block->execute(r.prm, nullptr);
    const GateResult gr = compare_with_reference(g, right, r);
    EXPECT_FALSE(gr.passed) << what << ": row error " << gr.max_row_rel << " within " << gr.rtol;
  };
  fails([](Fp8QuantSpec& s) { s.descale_h *= 2; }, "descale_h off by 2");
  fails([](Fp8QuantSpec& s) { s.descale_w_qkvg *= 2; }, "descale_w_qkvg off by 2");
  fails([](Fp8QuantSpec& s) { s.descale_w_o *= 2; }, "descale_w_o off by 2");
  fails([](Fp8QuantSpec& s) { s.descale_w_o *= s.scale_o; }, "scale_o not divided back");
}

// The reference reads what the codes stand for: the inputs hold each code's value times its descale exactly.
TEST(CpuGatedFp8, InputsHoldTheValuesOfTheKernelsCodes) {
  const GatedGeometry g(small_dims(32));
  const GatedOptions o = fp8_options(g);
  GatedHostInputs in = build_gated_inputs(g, 3);
  apply_fp8_inputs(g, *o.fp8, in);
  const GatedKernelWeights w = gated_kernel_weights(g, o, in);
  ASSERT_EQ(w.h_codes.size(), in.h.size());
  for (std::size_t i = 0; i < in.h.size(); ++i)
    ASSERT_EQ(bf16_to_float(in.h[i]), fp8_to_float(w.h_codes[i], DType::e4m3) * o.fp8->descale_h) << i;
  ASSERT_EQ(w.o_codes.size(), in.w_o.size());
  int saturated = 0;
  for (std::size_t i = 0; i < in.w_o.size(); ++i) {
    ASSERT_EQ(bf16_to_float(in.w_o[i]), fp8_to_float(w.o_codes[i], DType::e4m3) * o.fp8->descale_w_o) << i;
    saturated += (w.o_codes[i] & 0x7f) == 0x7e;
  }
  EXPECT_EQ(saturated, 0) << "the default descale keeps W_o's codes below 448";
  EXPECT_TRUE(w.w_qkvg.empty());
  EXPECT_EQ(w.qkvg_codes.size(), static_cast<std::size_t>(g.n_qkvg() * g.d_model()));
}

}  // namespace
}  // namespace attnbench
