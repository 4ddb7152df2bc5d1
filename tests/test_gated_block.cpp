// The gated attention block: geometry validation and every typed decline, the W_qkvg builder, norm/RoPE against
// a naive loop, cpu.gated_block against the fp32 reference, the work model, the harness's rows and tolerance rule,
// and a CLI run of a small shape file (the workspace: test_gated_workspace.cpp; the window, seq_lens and return_lse:
// test_gated_masks.cpp).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../kernels/common/gated_orchestrator.hpp"
#include "../kernels/cpu/gated_block.hpp"
#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gated_case.hpp"
#include "cli_helpers.hpp"
#include "gated_cpu_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using namespace gatedtest;

TEST(GatedGeometry, ValidDimsAndDerivedSizes) {
  const GatedGeometry g(small_dims(100, 2));
  EXPECT_EQ(g.tokens(), 200);
  EXPECT_EQ(g.n_qkvg(), (2 * 4 + 2 * 2) * 64);
  EXPECT_EQ(g.attn_width(), 256);
}

TEST(GatedGeometry, EveryInvalidFieldIsATypedDeclineNamingIt) {
  auto with = [](auto edit) {
    GatedDims d = small_dims();
    edit(d);
    return decline_field([&] { GatedGeometry g(d); });
  };
  EXPECT_EQ(with([](GatedDims& d) { d.batch = 0; }), "batch");
  EXPECT_EQ(with([](GatedDims& d) { d.seqlen = 0; }), "seqlen");
  EXPECT_EQ(with([](GatedDims& d) { d.batch = 1 << 16; d.seqlen = 1 << 16; }), "seqlen");
  EXPECT_EQ(with([](GatedDims& d) { d.d_model = 0; }), "d_model");
  EXPECT_EQ(with([](GatedDims& d) { d.d_model = 260; }), "d_model");  // not 16-byte rows
  EXPECT_EQ(with([](GatedDims& d) { d.h_q = 0; }), "h_q");
  EXPECT_EQ(with([](GatedDims& d) { d.h_kv = 0; }), "h_kv");
  EXPECT_EQ(with([](GatedDims& d) { d.h_q = 3; }), "h_kv");  // 3 % 2
  EXPECT_EQ(with([](GatedDims& d) { d.d_head = 96; }), "d_head");
  EXPECT_EQ(with([](GatedDims& d) { d.rope_dim = 15; }), "rope_dim");
  EXPECT_EQ(with([](GatedDims& d) { d.rope_dim = 66; }), "rope_dim");
  EXPECT_EQ(with([](GatedDims& d) { d.rope_dim = -2; }), "rope_dim");
  EXPECT_EQ(with([](GatedDims& d) { d.rope_dim = 0; }), "<no decline>");
  EXPECT_EQ(with([](GatedDims& d) { d.rope_dim = 64; }), "<no decline>");
}

TEST(GatedOptions, InvalidValuesAndLayoutNames) {
  GatedOptions o;
  o.attn_scale = -1.f;
  EXPECT_EQ(decline_field([&] { validate_gated_options(o); }), "attn_scale");
  o.attn_scale = NAN;
  EXPECT_EQ(decline_field([&] { validate_gated_options(o); }), "attn_scale");
  o.attn_scale = 0.f;
  o.norm_weight_offset = INFINITY;
  EXPECT_EQ(decline_field([&] { validate_gated_options(o); }), "norm_weight_offset");
  o.norm_weight_offset = 0.f;
  o.window_left = -2;
  EXPECT_EQ(decline_field([&] { validate_gated_options(o); }), "window_left");
  o.window_left = 0;
  o.window_right = -3;
  EXPECT_EQ(decline_field([&] { validate_gated_options(o); }), "window_right");
  o.window_right = -1;
  EXPECT_EQ(decline_field([] { parse_q_gate_layout("rows"); }), "q_gate_layout");
  EXPECT_EQ(parse_q_gate_layout("interleaved"), QGateLayout::interleaved);
  EXPECT_FLOAT_EQ(GatedOptions{}.softmax_scale(64), 0.125f);
  o.attn_scale = 0.5f;
  EXPECT_FLOAT_EQ(o.softmax_scale(64), 0.5f);
}

TEST(GatedOptions, KnobsSelectTheOptions) {
  GatedShape s;
  s.causal = false;
  s.qk_norm = false;
  const GatedOptions def = gated_options(s, knobs());
  EXPECT_FALSE(def.fuse_gate);  // auto: the plain 16-bit block runs both passes apart
  EXPECT_FALSE(def.fuse_norm_rope);
  EXPECT_EQ(def.q_gate_layout, QGateLayout::flat);
  EXPECT_FALSE(def.is_causal);
  EXPECT_FALSE(def.qk_norm);
  const GatedOptions o = gated_options(s, knobs({{"ATTNBENCH_GATED_FUSE_GATE", "0"},
                                                 {"ATTNBENCH_GATED_FUSE_NORM_ROPE", "1"},
                                                 {"ATTNBENCH_GATED_QGATE_LAYOUT", "interleaved"}}));
  EXPECT_FALSE(o.fuse_gate);
  EXPECT_TRUE(o.fuse_norm_rope);
  EXPECT_EQ(o.q_gate_layout, QGateLayout::interleaved);
  EXPECT_THROW(knobs({{"ATTNBENCH_GATED_QGATE_LAYOUT", "rows"}}), std::invalid_argument);
}

// auto reads the block's mode: the FP8 block fuses both passes, an MX block the gate only; a value given wins.
TEST(GatedOptions, AutoFusionsFollowTheMode) {
  GatedShape fp8;
  fp8.fp8 = Fp8QuantSpec{};
  const GatedOptions f = gated_options(fp8, knobs());
  EXPECT_TRUE(f.fuse_gate);
  EXPECT_TRUE(f.fuse_norm_rope);
  const GatedOptions f0 = gated_options(fp8, knobs({{"ATTNBENCH_GATED_FUSE_GATE", "0"}}));
  EXPECT_FALSE(f0.fuse_gate);
  EXPECT_TRUE(f0.fuse_norm_rope);
  GatedShape mx;
  mx.mx = MxQuantSpec{};
  const GatedOptions m = gated_options(mx, knobs());
  EXPECT_TRUE(m.fuse_gate);
  EXPECT_FALSE(m.fuse_norm_rope);
  GatedShape plain;
  const GatedOptions p1 = gated_options(plain, knobs({{"ATTNBENCH_GATED_FUSE_GATE", "1"}}));
  EXPECT_TRUE(p1.fuse_gate);
  EXPECT_THROW(knobs({{"ATTNBENCH_GATED_FUSE_GATE", "yes"}}), std::invalid_argument);
}

TEST(CpuGatedBlock, TypedDeclines) {
  const auto k = make_cpu_gated_block();
  const GatedGeometry g(small_dims());
  auto field = [&](const GatedGeometry& geo, const GatedOptions& o, const KnobValues& kv) {
    const Support s = k->supports(geo, o, kv);
    const std::string f = decline_field([&] { k->create(geo, o, kv); });
    EXPECT_EQ(s.ok, f == "<no decline>") << f;
    if (!s.ok) {
      EXPECT_NE(s.reason.find("field '" + f + "'"), std::string::npos) << s.reason;
    }
    return f;
  };
  EXPECT_EQ(field(g, plain_options(), knobs()), "<no decline>");
  GatedOptions o = plain_options();
  o.fuse_gate = true;  // cpu.unified's epilogue applies the gate
  EXPECT_EQ(field(g, o, knobs()), "<no decline>");
  o = plain_options();
  o.fuse_norm_rope = true;  // K's pass + cpu.unified's Q prologue
  EXPECT_EQ(field(g, o, knobs()), "<no decline>");
  o = plain_options();
  o.attn_scale = -1.f;
  EXPECT_EQ(field(g, o, knobs()), "attn_scale");
  EXPECT_EQ(field(GatedGeometry(small_dims(100, 2)), plain_options(), knobs()), "seqlen");  // 100 % 16 != 0
  EXPECT_EQ(field(GatedGeometry(small_dims(96, 2)), plain_options(), knobs()), "<no decline>");
  GatedDims big = small_dims(4096);
  big.d_model = 4096;
  EXPECT_EQ(field(GatedGeometry(big), plain_options(), knobs({{"ATTNBENCH_CPU_MAX_GFLOP", "10"}})), "work");
  EXPECT_EQ(field(GatedGeometry(big), plain_options(), knobs({{"ATTNBENCH_CPU_MAX_GFLOP", "0"}})), "<no decline>");
}

#ifdef ATTNBENCH_WITH_CUDA
// Declines are decided on the host: these run without a device.
TEST(CudaGatedBlock, TypedDeclinesWithoutADevice) {
  const auto k = make_cuda_gated_block();
  const GatedGeometry g(small_dims());
  EXPECT_TRUE(k->supports(g, plain_options(), knobs()).ok);
  // fuse_norm_rope: the Q prologue is in the wide kernel only (auto keeps 100 d64 queries on the narrow one) and
  // rotates 16-byte chunks (rope_dim a multiple of 16).
  GatedOptions o = plain_options();
  o.fuse_norm_rope = true;
  Support s = k->supports(g, o, knobs());
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("field 'fuse_norm_rope': the SDPA kernel has no Q prologue here"), std::string::npos)
      << s.reason;
  EXPECT_NE(s.reason.find("narrow kernel"), std::string::npos) << s.reason;
  EXPECT_TRUE(k->supports(g, o, knobs({{"ATTNBENCH_SM90_PATH", "wide"}})).ok);
  GatedDims rope8 = small_dims();
  rope8.rope_dim = 8;
  s = k->supports(GatedGeometry(rope8), o, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}));
  EXPECT_NE(s.reason.find("field 'fuse_norm_rope'"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("q_rope_dim 8 is not a multiple of 16"), std::string::npos) << s.reason;
  EXPECT_TRUE(k->supports(GatedGeometry(rope8), plain_options(), knobs({{"ATTNBENCH_SM90_PATH", "wide"}})).ok);
  s = k->supports(GatedGeometry(small_dims(100, 2)), plain_options(), knobs());
  EXPECT_NE(s.reason.find("field 'seqlen'"), std::string::npos) << s.reason;
  // cuda.unified has the gate epilogue on both paths, so fuse_gate is served on the narrow and the wide kernel.
  o = plain_options();
  o.fuse_gate = true;
  EXPECT_TRUE(make_cuda_unified()->supports(gated_sdpa_problem(g, o, 64), knobs()).ok);
  EXPECT_TRUE(k->supports(g, o, knobs()).ok);
  EXPECT_TRUE(k->supports(g, o, knobs({{"ATTNBENCH_SM90_PATH", "wide"}})).ok);
  // An SDPA decline that no fusion causes is the block's 'sdpa' field, with cuda.unified's reason (a GQA pack of 3
  // does not divide the group of 2, and the wide path is forced).
  s = k->supports(g, plain_options(), knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_GQA_PACK", "3"}}));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("field 'sdpa': cuda.unified declines: "), std::string::npos) << s.reason;
}
#endif

TEST(GatedWeights, BuilderPlacesEveryBlockForBothLayouts) {
  const GatedGeometry g(small_dims());
  const int dm = g.d_model(), d = g.d_head(), hq = g.h_q(), hkv = g.h_kv();
  // Every element encodes (matrix, row): the check below reads back where each source row landed.
  auto make = [&](int id, int rows) {
    std::vector<uint16_t> w(static_cast<std::size_t>(rows) * dm);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < dm; ++c) w[static_cast<std::size_t>(r) * dm + c] = static_cast<uint16_t>(id * 4096 + r);
    return w;
  };
  const auto wq = make(1, hq * d), wg = make(2, hq * d), wk = make(3, hkv * d), wv = make(4, hkv * d);
  for (QGateLayout layout : {QGateLayout::flat, QGateLayout::interleaved}) {
    const auto w = build_w_qkvg(g, layout, wq.data(), wg.data(), wk.data(), wv.data());
    ASSERT_EQ(w.size(), static_cast<std::size_t>(g.n_qkvg()) * dm);
    auto row_tag = [&](int64_t n) {
      const uint16_t v = w[static_cast<std::size_t>(n) * dm];
      for (int c = 1; c < dm; ++c) EXPECT_EQ(w[static_cast<std::size_t>(n) * dm + c], v);
      return v;
    };
    for (int h = 0; h < hq; ++h)
      for (int i = 0; i < d; ++i) {
        const int64_t q_row = layout == QGateLayout::flat ? h * d + i : 2 * h * d + i;
        const int64_t g_row = layout == QGateLayout::flat ? hq * d + h * d + i : 2 * h * d + d + i;
        EXPECT_EQ(row_tag(q_row), 1 * 4096 + h * d + i);
        EXPECT_EQ(row_tag(g_row), 2 * 4096 + h * d + i);
      }
    for (int i = 0; i < hkv * d; ++i) {
      EXPECT_EQ(row_tag(2 * hq * d + i), 3 * 4096 + i);
      EXPECT_EQ(row_tag(2 * hq * d + hkv * d + i), 4 * 4096 + i);
    }
    const GatedColumns c = gated_columns(g, layout);
    EXPECT_EQ(c.q_head_stride, layout == QGateLayout::flat ? d : 2 * d);
    EXPECT_EQ(c.g0, layout == QGateLayout::flat ? hq * d : d);
    EXPECT_EQ(c.k0, 2 * hq * d);
    EXPECT_EQ(c.v0, 2 * hq * d + hkv * d);
  }
}

// Naive norm + RoPE in double: x * w / rms, then x * cos + rotate_half(x) * sin with rotate_half = [-x2, x1].
std::vector<double> naive_norm_rope(std::vector<double> x, bool norm, const std::vector<double>& w, double offset,
                                    int rope_dim, const std::vector<double>& cos, const std::vector<double>& sin) {
  const int d = static_cast<int>(x.size());
  if (norm) {
    double ms = 0;
    for (double v : x) ms += v * v / d;
    for (int i = 0; i < d; ++i) x[i] = x[i] / std::sqrt(ms + 1e-6) * (offset + w[i]);
  }
  std::vector<double> rot(rope_dim);
  for (int i = 0; i < rope_dim; ++i) rot[i] = i < rope_dim / 2 ? -x[i + rope_dim / 2] : x[i - rope_dim / 2];
  for (int i = 0; i < rope_dim; ++i) x[i] = x[i] * cos[i] + rot[i] * sin[i];
  return x;
}

TEST(GatedNormRope, RowMatchesANaiveLoop) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (int d : {64, 256})
    for (int rope : {0, 16, 64, d})
      for (bool norm : {false, true})
        for (float offset : {0.f, 1.f}) {
          std::vector<float> x(d), w(d), c(rope), s(rope);
          for (auto& v : x) v = nd(rng);
          for (auto& v : w) v = 1.f + 0.1f * nd(rng);
          for (int i = 0; i < rope; ++i) {
            const float a = 0.37f * (i % std::max(1, rope / 2)) + 0.5f;
            c[i] = std::cos(a);
            s[i] = std::sin(a);
          }
          const auto want = naive_norm_rope({x.begin(), x.end()}, norm, {w.begin(), w.end()}, offset, rope,
                                            {c.begin(), c.end()}, {s.begin(), s.end()});
          cpu::norm_rope_row(x.data(), d, norm, w.data(), offset, kGatedNormEps, rope, c.data(), s.data());
          for (int i = 0; i < d; ++i)
            ASSERT_NEAR(x[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "d " << d << " rope " << rope << " i " << i;
        }
}

TEST(GatedWork, ModelCountsBothProjectionsAndTheVisibleSdpa) {
  const GatedGeometry g(small_dims());
  const double T = 100, dm = 256, N = 768, aw = 256;
  const WorkModel full = gated_block_work(g, plain_options(false));
  EXPECT_DOUBLE_EQ(full.flops, 2 * T * dm * (N + aw) + 4.0 * T * T * 4 * 64);
  const WorkModel causal = gated_block_work(g, plain_options(true));
  EXPECT_DOUBLE_EQ(causal.flops, 2 * T * dm * (N + aw) + 4.0 * (T * (T + 1) / 2) * 4 * 64);
  EXPECT_DOUBLE_EQ(full.bytes, 2 * (T * dm + N * dm + dm * aw + 2 * T * 16 + 2 * 64 + T * dm));
  GatedOptions windowed = plain_options(true);
  windowed.window_left = 9;  // rows 0..8 see s + 1 keys, the other 91 see 10
  EXPECT_DOUBLE_EQ(gated_block_work(g, windowed).flops, 2 * T * dm * (N + aw) + 4.0 * (45 + 91 * 10) * 4 * 64);
}

struct CpuCase {
  int batch, seqlen;
  bool causal;
  DType dtype;
  QGateLayout layout;
  bool qk_norm;
  float offset;
  bool fuse_gate = false;
  bool fuse_norm_rope = false;
};

class CpuGatedVsReference : public ::testing::TestWithParam<CpuCase> {};

TEST_P(CpuGatedVsReference, PassesTheGate) {
  const CpuCase c = GetParam();
  const GatedGeometry g(small_dims(c.seqlen, c.batch, c.dtype));
  GatedOptions o = plain_options(c.causal);
  o.q_gate_layout = c.layout;
  o.qk_norm = c.qk_norm;
  o.norm_weight_offset = c.offset;
  o.fuse_gate = c.fuse_gate;
  o.fuse_norm_rope = c.fuse_norm_rope;
  auto block = make_cpu_gated_block()->create(g, o, knobs());
  const CpuRun r = run_cpu(g, *block, c.layout);
  const GateResult gr = compare_with_reference(g, o, r);
  EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
  // the rounded stages stay well inside the gate (measured: max_abs <= 0.48 atol)
  EXPECT_LT(gr.max_abs, 0.6 * gr.atol);
  EXPECT_LT(gr.max_row_rel, 0.6 * gr.rtol);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuGatedVsReference,
    ::testing::Values(CpuCase{1, 100, true, DType::bf16, QGateLayout::flat, true, 0.f},
                      CpuCase{1, 100, false, DType::bf16, QGateLayout::flat, true, 0.f},
                      CpuCase{1, 100, true, DType::bf16, QGateLayout::interleaved, true, 1.f},
                      CpuCase{2, 48, true, DType::f16, QGateLayout::flat, false, 0.f},
                      CpuCase{2, 64, false, DType::bf16, QGateLayout::interleaved, true, 0.f},
                      CpuCase{1, 100, true, DType::bf16, QGateLayout::flat, true, 0.f, true},
                      CpuCase{2, 48, true, DType::f16, QGateLayout::interleaved, true, 1.f, true},
                      CpuCase{1, 100, true, DType::bf16, QGateLayout::flat, true, 0.f, true, true},
                      CpuCase{2, 48, false, DType::f16, QGateLayout::interleaved, true, 1.f, true, true},
                      CpuCase{2, 64, true, DType::bf16, QGateLayout::flat, false, 0.f, false, true}));

// fuse_norm_rope moves Q's norm + RoPE into cpu.unified's Q load: the same fp32 math and the same single rounding
// as the separate pass, so the block's output is bit-identical; with the prologue reading a wrong weight (a
// planted bug: the activations' first row) the output moves and the gate catches it.
TEST(CpuGatedBlock, FusedNormRopeEqualsTheSeparatePassAndAWrongWeightFailsTheGate) {
  const GatedGeometry g(small_dims(100, 1));
  GatedOptions o = plain_options();
  o.norm_weight_offset = 1.f;
  auto separate = make_cpu_gated_block()->create(g, o, knobs());
  GatedOptions f = o;
  f.fuse_norm_rope = true;
  auto fused = make_cpu_gated_block()->create(g, f, knobs());
  EXPECT_EQ(fused->stage_names(),
            (std::vector<std::string>{"qkvg_proj", "k_norm_rope", "q_norm_rope+sdpa", "gate", "out_proj"}));
  const CpuRun a = run_cpu(g, *separate, QGateLayout::flat);
  const CpuRun b = run_cpu(g, *fused, QGateLayout::flat);
  EXPECT_EQ(a.out, b.out);
  CpuRun bad = run_cpu(g, *fused, QGateLayout::flat);
  bad.prm.q_norm_weight = bad.in.h.data();
  fused->execute(bad.prm, nullptr);
  EXPECT_FALSE(compare_with_reference(g, f, bad).passed);
}

TEST(GatedReference, SampledRowsEqualTheSameRowsOfTheFullComputation) {
  for (bool causal : {true, false}) {
    const GatedGeometry g(small_dims(80, 2));
    const GatedOptions o = plain_options(causal);
    const GatedHostInputs in = build_gated_inputs(g, 5);
    std::vector<int64_t> all(g.tokens());
    for (int64_t t = 0; t < g.tokens(); ++t) all[t] = t;
    std::vector<float> full(all.size() * g.d_model());
    reference::gated_block(g, o, in.ref(), all, full.data());
    const std::vector<int64_t> some = {97, 0, 79, 80, 5};  // any order; K/V only up to what these rows see
    std::vector<float> part(some.size() * g.d_model());
    reference::gated_block(g, o, in.ref(), some, part.data());
    for (std::size_t r = 0; r < some.size(); ++r)
      for (int c = 0; c < g.d_model(); ++c)
        ASSERT_NEAR(part[r * g.d_model() + c], full[some[r] * g.d_model() + c], 1e-5) << "row " << some[r];
    EXPECT_LT(reference::gated_block_ref_flops(g, o, nullptr, some), reference::gated_block_ref_flops(g, o, nullptr, all));
    EXPECT_THROW(reference::gated_block(g, o, in.ref(), {160}, part.data()), std::out_of_range);
  }
}

TEST(CpuGatedBlock, WrongWeightLayoutFailsTheGate) {
  const GatedGeometry g(small_dims());
  GatedOptions o = plain_options();
  o.q_gate_layout = QGateLayout::interleaved;
  auto block = make_cpu_gated_block()->create(g, o, knobs());
  const CpuRun r = run_cpu(g, *block, QGateLayout::flat);  // the block reads columns the weights don't have
  EXPECT_FALSE(compare_with_reference(g, o, r).passed);
}

TEST(CpuGatedBlock, StagesOneByOneEqualExecuteAndParamsAreChecked) {
  const GatedGeometry g(small_dims());
  auto block = make_cpu_gated_block()->create(g, plain_options(), knobs());
  EXPECT_EQ(block->stage_names(), (std::vector<std::string>{"qkvg_proj", "norm_rope", "sdpa", "gate", "out_proj"}));
  CpuRun r = run_cpu(g, *block, QGateLayout::flat);
  const std::vector<uint16_t> whole = r.out;
  std::fill(r.out.begin(), r.out.end(), 0xFFFF);
  for (int s = 0; s < static_cast<int>(block->stage_names().size()); ++s) block->execute_stage(s, r.prm, nullptr);
  EXPECT_EQ(r.out, whole);
  GatedBlockParams bad = r.prm;
  bad.seqlen = 99;
  EXPECT_THROW(block->execute(bad, nullptr), std::invalid_argument);
  bad = r.prm;
  bad.w_o = nullptr;
  EXPECT_THROW(block->execute(bad, nullptr), std::invalid_argument);
  EXPECT_THROW(block->execute_stage(5, r.prm, nullptr), std::invalid_argument);
}

TEST(GatedHarness, ToleranceRuleScalesWithTheOutputRms) {
  const std::vector<float> small = {0.1f, -0.2f, 0.3f}, big = {3.f, -3.f, 3.f, -3.f};
  const Tolerance base{4e-2, 1e-2};
  EXPECT_DOUBLE_EQ(gated_tolerance(base, small.data(), small.size()).atol, 4e-2);
  EXPECT_NEAR(gated_tolerance(base, big.data(), big.size()).atol, 12e-2, 1e-12);
  EXPECT_DOUBLE_EQ(gated_tolerance(base, big.data(), big.size()).rtol, 1e-2 * kGatedRtolFactor);
  // The MX modes: both bounds grow by 1 + sqrt(d / r), d the O format's widest relative code gap.
  MxQuantSpec mx;
  const double r = 1e-2 * kGatedRtolFactor;
  EXPECT_NEAR(gated_tolerance(base, big.data(), big.size(), mx).rtol, r * (1 + std::sqrt(0.125 / r)), 1e-12);
  mx.o_fp4 = true;
  const Tolerance fp4 = gated_tolerance(base, big.data(), big.size(), mx);
  EXPECT_NEAR(fp4.rtol, r * (1 + std::sqrt(0.5 / r)), 1e-12);
  EXPECT_NEAR(fp4.atol, 12e-2 * (1 + std::sqrt(0.5 / r)), 1e-12);
  // The FP8 mode: four e4m3 quantisations of values 16-bit rounding apart, then e4m3 P's 1/16.
  const double g8 = 1 + std::sqrt(4 * 0.125 * 1e-2) / r;
  const Tolerance fp8 = gated_tolerance(base, big.data(), big.size(), std::nullopt, true);
  EXPECT_NEAR(fp8.rtol, r * g8 + 0.0625, 1e-12);
  EXPECT_NEAR(fp8.atol, (4e-2 * g8 + 0.25) * 3, 1e-12);
}

TEST(GatedHarness, CheckedRowsAllWhenCheapElseBoundariesAndRandom) {
  const GatedGeometry small(small_dims(100, 2));
  EXPECT_EQ(gated_check_rows(small, plain_options(), nullptr, 8e9, 1).size(), 200u);
  GatedDims d;
  d.seqlen = 32768;
  d.d_model = 5120;
  d.h_q = 32;
  d.h_kv = 2;
  d.d_head = 256;
  d.rope_dim = 64;
  const GatedGeometry big(d);
  const auto rows = gated_check_rows(big, plain_options(), nullptr, 8e9, 1);
  EXPECT_GE(rows.size(), 16u);
  EXPECT_LT(rows.size(), 64u);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end());
  for (int64_t must : {0, 63, 64, 127, 128, 32767 - 128, 32767 - 64, 32767})
    EXPECT_TRUE(std::binary_search(rows.begin(), rows.end(), static_cast<int64_t>(must))) << must;
  EXPECT_EQ(rows, gated_check_rows(big, plain_options(), nullptr, 8e9, 1));  // deterministic
}

// The CLI on tests/data/gated_small.json, CPU backend.
using CliResult = testcli::Result;
using testcli::run_cli;
using testcli::tmp_path;

const std::string kSmallShapes = ATTNBENCH_SOURCE_DIR "/tests/data/gated_small.json";

TEST(GatedCli, SmallShapeFilePassesTheGateWithABreakdown) {
  const std::string out = tmp_path("run.json");
  const CliResult r = run_cli("run --shapes " + kSmallShapes + " --backend cpu --mode eager --min-samples 2 "
                              "--timeout 0.5 --breakdown --set ATTNBENCH_GATED_FUSE_GATE=0 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["rows"].size(), 4u);  // s100, s100_full, b2_s80 bf16 + fp16
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["op"], "gated_block");
    EXPECT_EQ(row["kernel"], "cpu.gated_block");
    EXPECT_EQ(row["status"], "ok") << row["reason"];
    EXPECT_TRUE(row["gate"]["passed"].get<bool>());
    EXPECT_EQ(row["gate"]["rows_checked"].get<int>(), row["dims"]["batch"].get<int>() * row["dims"]["seqlen"].get<int>());
    EXPECT_GT(row["flops"].get<double>(), 0);
    ASSERT_TRUE(row.contains("breakdown")) << row.dump();
    EXPECT_EQ(row["breakdown"]["stages"].size(), 5u);
    EXPECT_EQ(row["breakdown"]["stages"][0]["name"], "qkvg_proj");
    EXPECT_GT(row["breakdown"]["sum_us"].get<double>(), 0);
    EXPECT_EQ(row["knobs"]["ATTNBENCH_GATED_FUSE_GATE"], "0");
  }
  EXPECT_NE(r.output.find("breakdown (median us): qkvg_proj"), std::string::npos) << r.output;
}

TEST(GatedCli, FusedGateRunsInTheSdpaEpilogueOnTheCpu) {
  const std::string out = tmp_path("fused.json");
  const CliResult r = run_cli("run --shapes " + kSmallShapes + " --backend cpu --mode eager --filter s100_full "
                              "--min-samples 2 --timeout 0.5 --breakdown --set ATTNBENCH_GATED_FUSE_GATE=1 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["rows"].size(), 1u);  // s100_full, bf16, eager
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["status"], "ok") << row["reason"];
    EXPECT_TRUE(row["gate"]["passed"].get<bool>());
    ASSERT_EQ(row["breakdown"]["stages"].size(), 4u) << row.dump();  // no separate gate stage
    EXPECT_EQ(row["breakdown"]["stages"][2]["name"], "sdpa+gate");
  }
}

TEST(GatedCli, CpuWorkLimitDeclinesTheBigGeometry) {
  const CliResult r = run_cli("run --group gated_397b --backend cpu --mode eager --filter s2048/ -o " +
                              tmp_path("declined.json"));
  EXPECT_EQ(r.code, 0) << r.output;  // declined rows are not failures
  EXPECT_NE(r.output.find("declined"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ATTNBENCH_CPU_MAX_GFLOP"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace attnbench
