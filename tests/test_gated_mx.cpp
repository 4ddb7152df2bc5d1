// The gated block's MX modes on the CPU: each typed decline of the spec; the whole pipeline (MXFP8 h, MX weights,
// MXFP8 / NVFP4 / MXFP4 O, the per-tensor factors) passing the gate against the reference; the gate failing on the
// bugs such a pipeline can have (a descale ignored, a scale not divided back, a block scale off by one power, fp4
// nibbles swapped, the quantisation skipped); the CUDA block's decline on SM90.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gated_case.hpp"
#include "gated_cpu_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using namespace gatedtest;

MxQuantSpec spec(MxCodes w_qkvg, MxCodes w_o, const char* o_format = "mxfp8") {
  MxQuantSpec s;
  s.w_qkvg = w_qkvg;
  s.w_o = w_o;
  s.o_fp4 = std::string(o_format) != "mxfp8";
  if (s.o_fp4) s.o_format = *parse_fp4_format(o_format);
  return s;
}

GatedOptions mx_options(const MxQuantSpec& s, bool causal = true) {
  GatedOptions o = plain_options(causal);
  o.mx = s;
  return o;
}

std::string mx_decline(const GatedDims& d, const GatedOptions& o) {
  return decline_field([&] { make_cpu_gated_block()->create(GatedGeometry(d), o, knobs()); });
}

TEST(CpuGatedMx, SpecDeclinesNameTheirField) {
  const MxQuantSpec fp8 = spec(MxCodes::e4m3, MxCodes::e4m3);
  EXPECT_EQ(mx_decline(small_dims(64, 1, DType::f16), mx_options(fp8)), "dtype");
  EXPECT_EQ(mx_decline(small_dims(), mx_options(spec(MxCodes::e5m2, MxCodes::e4m3))), "mx.w_qkvg");
  EXPECT_EQ(mx_decline(small_dims(), mx_options(spec(MxCodes::e4m3, MxCodes::e5m2))), "mx.w_o");
  GatedDims odd = small_dims();
  odd.d_model = 264;  // 16-byte rows, not whole MX blocks
  EXPECT_EQ(mx_decline(odd, mx_options(fp8)), "d_model");
  for (float bad : {0.f, -1.f, NAN, INFINITY}) {
    MxQuantSpec s = fp8;
    s.scale_o = bad;
    EXPECT_EQ(mx_decline(small_dims(), mx_options(s)), "mx.scale_o") << bad;
    s = fp8;
    s.descale_w_o = bad;
    EXPECT_EQ(mx_decline(small_dims(), mx_options(s)), "mx.descale_w_o") << bad;
  }
  MxQuantSpec fp4o = spec(MxCodes::e2m1, MxCodes::e2m1, "nvfp4");
  fp4o.scale_o = 2.f;
  EXPECT_EQ(mx_decline(small_dims(), mx_options(fp4o)), "mx.scale_o");
  fp4o.scale_o = 1.f;
  fp4o.descale_w_o = 0.5f;
  EXPECT_EQ(mx_decline(small_dims(), mx_options(fp4o)), "mx.descale_w_o");
  // d_head 64: four NVFP4 blocks of 16, not four MXFP4 blocks of 32.
  EXPECT_TRUE(make_cpu_gated_block()->supports(GatedGeometry(small_dims()),
                                               mx_options(spec(MxCodes::e2m1, MxCodes::e2m1, "nvfp4")), knobs()).ok);
  EXPECT_EQ(mx_decline(small_dims(), mx_options(spec(MxCodes::e2m1, MxCodes::e2m1, "mxfp4"))), "d_head");
  GatedOptions fused = mx_options(spec(MxCodes::e2m1, MxCodes::e4m3));
  fused.fuse_norm_rope = true;
  EXPECT_EQ(mx_decline(small_dims(), fused), "fuse_norm_rope");
  fused.mx = spec(MxCodes::e4m3, MxCodes::e2m1);  // fp4 W_o only: the fused Q prologue is served
  EXPECT_TRUE(make_cpu_gated_block()->supports(GatedGeometry(small_dims()), fused, knobs()).ok);
}

// The MX block's params carry both scale arrays, and a block without mx refuses them.
TEST(CpuGatedMx, ParamsNeedTheScalesExactlyUnderMx) {
  const GatedGeometry g(small_dims(64));
  auto block = make_cpu_gated_block()->create(g, mx_options(spec(MxCodes::e4m3, MxCodes::e4m3)), knobs());
  CpuRun r = run_cpu(g, *block, QGateLayout::flat);
  GatedBlockParams p = r.prm;
  p.w_o_scales = nullptr;
  EXPECT_THROW(block->execute(p, nullptr), std::invalid_argument);
  auto plain = make_cpu_gated_block()->create(g, plain_options(), knobs());
  CpuRun q = run_cpu(g, *plain, QGateLayout::flat);
  p = q.prm;
  p.w_qkvg_scales = r.w.qkvg_scales.data();
  EXPECT_THROW(plain->execute(p, nullptr), std::invalid_argument);
  EXPECT_EQ(block->stage_names().front(), "mx_qkvg_proj");
  EXPECT_EQ(block->stage_names().back(), "mx_out_proj");
}

struct Mode {
  MxQuantSpec s;
  int d_head;
  const char* what;
};

std::vector<Mode> modes() {
  MxQuantSpec factors = spec(MxCodes::e4m3, MxCodes::e4m3);
  factors.scale_o = 0.37f;
  factors.descale_w_o = 1.6f;
  return {{spec(MxCodes::e4m3, MxCodes::e4m3), 64, "mxfp8 weights, mxfp8 O"},
          {spec(MxCodes::e2m1, MxCodes::e2m1), 64, "mxfp4 weights, mxfp8 O"},
          {spec(MxCodes::e2m1, MxCodes::e2m1, "nvfp4"), 64, "mxfp4 weights, nvfp4 O"},
          {spec(MxCodes::e4m3, MxCodes::e2m1, "mxfp4"), 128, "mxfp8 W_qkvg, mxfp4 W_o, mxfp4 O"},
          {factors, 64, "mxfp8 with scale_o 0.37, descale_w_o 1.6"}};
}

GatedDims mode_dims(const Mode& m) {
  GatedDims d = small_dims(96, 2);
  d.d_head = m.d_head;
  return d;
}

// Every mode passes the gate, causal and not, fused gate and not; the same output fails against the reference that
// skips the quantisation (the plain block's), so the gate sees the modes' rounding.
TEST(CpuGatedMx, EveryModePassesTheGateAndTheQuantisationMatters) {
  for (const Mode& m : modes())
    for (bool causal : {true, false}) {
      const GatedGeometry g(mode_dims(m));
      GatedOptions o = mx_options(m.s, causal);
      o.fuse_gate = !causal;
      auto block = make_cpu_gated_block()->create(g, o, knobs());
      const CpuRun r = run_cpu(g, *block, QGateLayout::flat);
      const GateResult gr = compare_with_reference(g, o, r);
      EXPECT_TRUE(gr.passed) << m.what << (causal ? " causal: " : " full: ") << gate_failure_reason(gr);
      GatedOptions unquantised = o;
      unquantised.mx.reset();
      if (m.s.o_fp4) {
        EXPECT_FALSE(compare_with_reference(g, unquantised, r).passed) << m.what << ": passes without quantisation";
      }
    }
}

// Planted bugs: the output of a block run with one factor or array wrong fails the gate of the right reference.
TEST(CpuGatedMx, PlantedBugsFailTheGate) {
  const Mode m = modes().back();  // scale_o 0.37, descale_w_o 1.6
  const GatedGeometry g(mode_dims(m));
  const GatedOptions right = mx_options(m.s);
  auto fails = [&](const GatedOptions& run_with, auto plant, const char* what) {
    auto block = make_cpu_gated_block()->create(g, run_with, knobs());
    CpuRun r = run_cpu(g, *block, QGateLayout::flat);
    if (plant(r)) block->execute(r.prm, nullptr);
    EXPECT_FALSE(compare_with_reference(g, right, r).passed) << what;
  };
  auto none = [](CpuRun&) { return false; };
  GatedOptions o = right;
  o.mx->descale_w_o = 1.f;
  fails(o, none, "descale_w_o ignored");
  o = right;
  o.mx->descale_w_o = m.s.descale_w_o * m.s.scale_o;  // O * scale_o quantised, never divided back
  o.mx->scale_o = 1.f;
  fails(o, none, "scale_o not divided back");
  fails(right, [](CpuRun& r) {
    for (uint8_t& s : r.w.o_scales) ++s;  // every W_o block one power of two too large
    return true;
  }, "E8M0 scale off by one");
  const GatedGeometry g4(small_dims(96, 2));
  const GatedOptions fp4 = mx_options(spec(MxCodes::e2m1, MxCodes::e2m1));
  auto block = make_cpu_gated_block()->create(g4, fp4, knobs());
  CpuRun r = run_cpu(g4, *block, QGateLayout::flat);
  for (uint8_t& c : r.w.qkvg_codes) c = static_cast<uint8_t>((c >> 4) | (c << 4));
  block->execute(r.prm, nullptr);
  EXPECT_FALSE(compare_with_reference(g4, fp4, r).passed) << "fp4 nibbles swapped";
}

// The reference reads what the codes stand for: the weights the inputs keep are the codes' values exactly.
TEST(CpuGatedMx, InputsHoldTheValuesOfTheKernelsCodes) {
  const GatedGeometry g(small_dims(32));
  for (const Mode& m : modes()) {
    GatedHostInputs in = build_gated_inputs(g, 3);
    apply_mx_weights(g, m.s, in);
    GatedOptions o = mx_options(m.s);
    const GatedKernelWeights w = gated_kernel_weights(g, o, in);
    const std::vector<uint16_t> fused = build_w_qkvg(g, o.q_gate_layout, in.wq.data(), in.wgate.data(),
                                                     in.wk.data(), in.wv.data());
    const mx::MxFormat f = mx_format_of(m.s.w_qkvg);
    std::vector<float> row(g.d_model());
    for (int64_t n = 0; n < g.n_qkvg(); ++n) {
      mx::dequantize_row(f, w.qkvg_codes.data() + mx::mx_code_bytes(f, n, g.d_model()),
                         w.qkvg_scales.data() + mx::mx_scale_bytes(f, n, g.d_model()), g.d_model(), 1.f, row.data());
      for (int k = 0; k < g.d_model(); ++k)
        ASSERT_EQ(row[k], bf16_to_float(fused[n * g.d_model() + k])) << m.what << " W_qkvg " << n << "," << k;
    }
  }
}

#ifdef ATTNBENCH_WITH_CUDA
TEST(CudaGatedMx, DeclinesOnSm90WithTheReason) {
  const Support s = make_cuda_gated_block()->supports(GatedGeometry(small_dims()),
                                                      mx_options(spec(MxCodes::e4m3, MxCodes::e4m3)), knobs());
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("field 'mx': block-scaled MMA needs SM100 or newer"), std::string::npos) << s.reason;
}
#endif

}  // namespace
}  // namespace attnbench
