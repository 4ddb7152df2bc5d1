// cuda.gated_block on the GPU against the fp32 reference, with both fusions off and on: the fused gate (the SDPA
// epilogue) and fuse_norm_rope (the K-only norm + RoPE pass and the SDPA's Q prologue), both W_qkvg layouts, head
// sizes 128 and 256, one and two sequences; out and the workspace poisoned before the call. With fuse_norm_rope
// the Q values are the same fp32 math rounded once, so the fused output matches the unfused one to the last bits
// the SDPA's ordering allows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gated_case.hpp"
#include "gated_gpu_block.hpp"

namespace attnbench {
namespace {

using gputest::gated_test_dims;
using gputest::GatedGpuRun;
using gputest::run_gated_block;

TEST(CudaGatedBlock, BothFusionsPassTheGateAndMatchTheUnfusedBlock) {
  struct Case {
    GatedDims dims;
    QGateLayout layout;
  };
  const std::vector<Case> cases = {
      {gated_test_dims(2, 256, 8, 2, 128, 32, DType::bf16), QGateLayout::flat},
      {gated_test_dims(1, 300, 8, 1, 256, 64, DType::bf16), QGateLayout::interleaved},
      {gated_test_dims(1, 300, 8, 1, 256, 64, DType::f16), QGateLayout::flat},
  };
  const KnobValues knobs = KnobValues::resolve({}, false);
  for (const Case& c : cases) {
    const GatedGeometry g(c.dims);
    const GatedHostInputs in = build_gated_inputs(g, 31);
    std::vector<int64_t> rows(g.tokens());
    std::iota(rows.begin(), rows.end(), 0);
    GatedOptions base;
    base.q_gate_layout = c.layout;
    base.norm_weight_offset = 1.f;
    std::vector<float> ref(rows.size() * g.d_model());
    reference::gated_block(g, base, in.ref(), rows, ref.data());
    const Tolerance tol = gated_tolerance(default_tolerance(g.dtype()), ref.data(), ref.size());
    const double atol = tol.atol;
    std::vector<uint16_t> unfused;
    for (bool fuse : {false, true}) {
      GatedOptions o = base;
      o.fuse_gate = o.fuse_norm_rope = fuse;
      const GatedGpuRun r = run_gated_block(*make_cuda_gated_block(), g, o, in, knobs);
      const GateResult gr =
          gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
      std::printf("  gated d%d B%d S%d %s %s fused=%d max_abs=%.3g atol=%.3g row_rel=%.3g rtol=%.3g [%s]\n",
                  g.d_head(), g.batch(), g.seqlen(), dtype_name(g.dtype()), q_gate_layout_name(c.layout), fuse,
                  gr.max_abs, atol, gr.max_row_rel, tol.rtol, r.summary.c_str());
      EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
      if (!fuse) {
        unfused = r.out;
        continue;
      }
      EXPECT_EQ(r.stages, (std::vector<std::string>{"qkvg_proj", "k_norm_rope", "q_norm_rope+sdpa+gate", "out_proj"}));
      EXPECT_NE(r.summary.find("+q-norm-rope"), std::string::npos) << r.summary;
      double diff = 0;
      for (std::size_t i = 0; i < ref.size(); ++i)
        diff = std::max(diff, std::fabs(static_cast<double>(half_to_float(r.out[i], g.dtype())) -
                                        half_to_float(unfused[i], g.dtype())));
      EXPECT_LT(diff, 0.25 * atol) << "fused vs unfused block";
    }
  }
}

// A sliding window through the block (the SDPA's window feature, so the wide kernel's features path): causal with
// a left window and two-sided without causal, fused and not, pass the gate; against the reference of a window one
// key wider the same output fails.
TEST(CudaGatedBlock, SlidingWindowPassesTheGateAndAWindowOffByOneFailsIt) {
  struct W {
    bool causal;
    int left, right;
    bool fused;
  };
  const KnobValues knobs = KnobValues::resolve({}, false);
  const GatedGeometry g(gated_test_dims(2, 256, 8, 2, 128, 32, DType::bf16));
  const GatedHostInputs in = build_gated_inputs(g, 37);
  std::vector<int64_t> rows(g.tokens());
  std::iota(rows.begin(), rows.end(), 0);
  for (const W w : {W{true, 100, -1, false}, W{true, 33, -1, true}, W{false, 40, 70, false}, W{false, 0, 90, true}}) {
    GatedOptions o;
    o.is_causal = w.causal;
    o.window_left = w.left, o.window_right = w.right;
    o.fuse_gate = o.fuse_norm_rope = w.fused;
    std::vector<float> ref(rows.size() * g.d_model());
    reference::gated_block(g, o, in.ref(), rows, ref.data());
    const Tolerance tol = gated_tolerance(default_tolerance(g.dtype()), ref.data(), ref.size());
    const GatedGpuRun r = run_gated_block(*make_cuda_gated_block(), g, o, in, knobs);
    const GateResult gr =
        gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
    std::printf("  gated window %d/%d causal=%d fused=%d max_abs=%.3g atol=%.3g [%s]\n", w.left, w.right, w.causal,
                w.fused, gr.max_abs, tol.atol, r.summary.c_str());
    EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
    GatedOptions wider = o;
    wider.window_left += 1;
    reference::gated_block(g, wider, in.ref(), rows, ref.data());
    EXPECT_FALSE(
        gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol)
            .passed)
        << "window " << w.left << "/" << w.right << " passes a window one key wider";
  }
}

// seq_lens (one sequence full, one partial, one empty) under both alignments, causal and not, fused and not, on the
// block's SDPA (the wide kernel over runtime key lengths shorter than its plan's): the gate passes; the same output
// fails against the reference without seq_lens and, causal, against the other alignment.
TEST(CudaGatedBlock, SeqLensAndTheAlignmentPassTheGateAndEachMatters) {
  const KnobValues knobs = KnobValues::resolve({}, false);
  const GatedGeometry g(gated_test_dims(3, 256, 8, 2, 128, 32, DType::bf16));
  GatedHostInputs in = build_gated_inputs(g, 41);
  in.seq_lens = {256, 100, 0};
  GatedHostInputs unpadded = in;
  unpadded.seq_lens.clear();
  std::vector<int64_t> rows(g.tokens());
  std::iota(rows.begin(), rows.end(), 0);
  auto gate_against = [&](const GatedGpuRun& r, const GatedOptions& o, const GatedHostInputs& ref_in) {
    std::vector<float> ref(rows.size() * g.d_model());
    reference::gated_block(g, o, ref_in.ref(), rows, ref.data());
    const Tolerance tol = gated_tolerance(default_tolerance(g.dtype()), ref.data(), ref.size());
    return gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
  };
  for (bool causal : {true, false})
    for (bool bottom_right : {true, false})
      for (bool fused : {false, true}) {
        GatedOptions o;
        o.is_causal = causal;
        o.causal_bottom_right = bottom_right;
        o.fuse_gate = o.fuse_norm_rope = fused;
        const GatedGpuRun r = run_gated_block(*make_cuda_gated_block(), g, o, in, knobs);
        const GateResult gr = gate_against(r, o, in);
        std::printf("  gated seq_lens causal=%d bottom_right=%d fused=%d max_abs=%.3g [%s]\n", causal, bottom_right,
                    fused, gr.max_abs, r.summary.c_str());
        EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
        EXPECT_FALSE(gate_against(r, o, unpadded).passed) << "passes without seq_lens";
        if (causal) {
          GatedOptions flipped = o;
          flipped.causal_bottom_right = !bottom_right;
          EXPECT_FALSE(gate_against(r, flipped, in).passed) << "passes the other alignment";
        }
      }
}

// return_lse through the block (fused and not, under seq_lens aligned top-left): the [B, h_q, S] LSE within the
// harness's bound of the reference's on every row and head, and in base 2 it fails.
TEST(CudaGatedBlock, ReturnLseMatchesTheReference) {
  const KnobValues knobs = KnobValues::resolve({}, false);
  const GatedGeometry g(gated_test_dims(3, 256, 8, 2, 128, 32, DType::bf16));
  GatedHostInputs in = build_gated_inputs(g, 43);
  in.seq_lens = {256, 100, 0};
  std::vector<int64_t> rows(g.tokens());
  std::iota(rows.begin(), rows.end(), 0);
  const double tol = default_rtol(g.dtype()) * kGatedRtolFactor;
  for (bool fused : {false, true}) {
    GatedOptions o;
    o.causal_bottom_right = false;
    o.return_lse = true;
    o.fuse_gate = o.fuse_norm_rope = fused;
    const GatedGpuRun r = run_gated_block(*make_cuda_gated_block(), g, o, in, knobs);
    std::vector<float> ref(rows.size() * g.d_model()), ref_lse(rows.size() * g.h_q());
    reference::gated_block(g, o, in.ref(), rows, ref.data(), ref_lse.data());
    const std::vector<int64_t> idx = gated_lse_index(g, rows);
    GateResult gr, base2;
    gate_lse(gr, r.lse.data(), static_cast<int64_t>(r.lse.size()), idx, ref_lse.data(), tol);
    std::vector<float> twice = r.lse;
    for (float& x : twice) x *= 1.4426950408889634f;
    gate_lse(base2, twice.data(), static_cast<int64_t>(twice.size()), idx, ref_lse.data(), tol);
    std::printf("  gated return_lse fused=%d lse error %.3g (bound %.3g)\n", fused, gr.lse_max_err, tol);
    EXPECT_TRUE(gr.failed.empty()) << "lse error " << gr.lse_max_err;
    EXPECT_FALSE(base2.failed.empty()) << "the LSE in base 2 passes";
  }
}

}  // namespace
}  // namespace attnbench
