// The gated block's mask and output options on the CPU: the sliding window, seq_lens with either alignment, and
// return_lse; each passes the gate, and the same output fails against the reference without the option (or with a
// planted off-by-one).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
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

// A sliding window reaches the block's SDPA: causal with a left window, and a two-sided window without causal,
// fused and not, pass the gate; the same output fails it against the reference of a window one key wider (a
// planted off-by-one) and of no window.
TEST(CpuGatedBlock, SlidingWindowPassesTheGateAndAWindowOffByOneFailsIt) {
  struct W {
    bool causal;
    int left, right;
    bool fused;
  };
  for (const W w : {W{true, 16, -1, false}, W{true, 7, -1, true}, W{false, 20, 5, false}, W{false, 0, 30, true}}) {
    const GatedGeometry g(small_dims(96, 2));
    GatedOptions o = plain_options(w.causal);
    o.window_left = w.left, o.window_right = w.right;
    o.fuse_gate = o.fuse_norm_rope = w.fused;
    auto block = make_cpu_gated_block()->create(g, o, knobs());
    const CpuRun r = run_cpu(g, *block, QGateLayout::flat);
    const std::string what = "window " + std::to_string(w.left) + "/" + std::to_string(w.right);
    const GateResult gr = compare_with_reference(g, o, r);
    EXPECT_TRUE(gr.passed) << what << ": " << gate_failure_reason(gr);
    GatedOptions wider = o;
    wider.window_left += 1;
    EXPECT_FALSE(compare_with_reference(g, wider, r).passed) << what << ": passes a window one key wider";
    GatedOptions none = o;
    none.window_left = none.window_right = -1;
    EXPECT_FALSE(compare_with_reference(g, none, r).passed) << what << ": passes without the window";
  }
}

// seq_lens shorten each sequence's keys (one full, one partial, one empty) under both alignments, causal and not,
// fused and not: the gate passes; the same output fails against the reference without seq_lens and, causal,
// against the other alignment; the empty sequence's rows are exactly 0; out-of-range lengths are named.
TEST(CpuGatedBlock, SeqLensAndTheAlignmentPassTheGateAndEachMatters) {
  const GatedGeometry g(small_dims(96, 3));
  const std::vector<int32_t> lens = {96, 40, 0};
  for (bool causal : {true, false})
    for (bool bottom_right : {true, false})
      for (bool fused : {false, true}) {
        GatedOptions o = plain_options(causal);
        o.causal_bottom_right = bottom_right;
        o.fuse_gate = o.fuse_norm_rope = fused;
        auto block = make_cpu_gated_block()->create(g, o, knobs());
        const CpuRun r = run_cpu(g, *block, QGateLayout::flat, lens);
        const std::string what = std::string(causal ? "causal" : "full") + (bottom_right ? " bottom-right" : " top-left") +
                                 (fused ? " fused" : "");
        const GateResult gr = compare_with_reference(g, o, r);
        EXPECT_TRUE(gr.passed) << what << ": " << gate_failure_reason(gr);
        CpuRun unpadded = r;
        unpadded.in.seq_lens.clear();
        EXPECT_FALSE(compare_with_reference(g, o, unpadded).passed) << what << ": passes without seq_lens";
        if (causal) {
          GatedOptions flipped = o;
          flipped.causal_bottom_right = !bottom_right;
          EXPECT_FALSE(compare_with_reference(g, flipped, r).passed) << what << ": passes the other alignment";
        }
        const std::size_t row = static_cast<std::size_t>(g.d_model());
        for (std::size_t i = 2 * 96 * row; i < 3 * 96 * row; ++i)
          ASSERT_EQ(half_to_float(r.out[i], g.dtype()), 0.f) << what << ": a row with no key";
      }
  auto block = make_cpu_gated_block()->create(g, plain_options(), knobs());
  CpuRun r = run_cpu(g, *block, QGateLayout::flat, lens);
  r.in.seq_lens = {96, 97, 0};
  r.prm.seq_lens = r.in.seq_lens.data();
  try {
    block->execute(r.prm, nullptr);
    ADD_FAILURE() << "a length past seqlen was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("seq_lens[1] = 97 outside [0, seqlen 96]"), std::string::npos) << e.what();
  }
}

// return_lse: the block's [B, h_q, S] LSE matches the reference's on every row and head, fused and not, under
// seq_lens aligned top-left (an empty sequence's rows are -inf); a block with return_lse refuses a call without lse.
TEST(CpuGatedBlock, ReturnLseMatchesTheReference) {
  const GatedGeometry g(small_dims(96, 3));
  const std::vector<int32_t> lens = {96, 30, 0};
  std::vector<int64_t> rows(g.tokens());
  for (int64_t t = 0; t < g.tokens(); ++t) rows[t] = t;
  for (bool fused : {false, true}) {
    GatedOptions o = plain_options(true);
    o.causal_bottom_right = false;
    o.return_lse = true;
    o.fuse_gate = o.fuse_norm_rope = fused;
    auto block = make_cpu_gated_block()->create(g, o, knobs());
    CpuRun r = run_cpu(g, *block, QGateLayout::flat, lens);
    std::vector<float> ref(rows.size() * g.d_model()), ref_lse(rows.size() * g.h_q());
    reference::gated_block(g, o, r.in.ref(), rows, ref.data(), ref_lse.data());
    const double tol = default_rtol(g.dtype()) * kGatedRtolFactor;  // the harness's bound for the block
    GateResult gr;
    gate_lse(gr, r.lse.data(), static_cast<int64_t>(r.lse.size()), gated_lse_index(g, rows), ref_lse.data(), tol);
    EXPECT_TRUE(gr.failed.empty()) << (fused ? "fused" : "separate") << ": lse error " << gr.lse_max_err;
    EXPECT_LT(gr.lse_max_err, tol / 4) << (fused ? "fused" : "separate");
    std::vector<float> base2 = r.lse;
    for (float& x : base2) x *= 1.4426950408889634f;
    GateResult bad;
    gate_lse(bad, base2.data(), static_cast<int64_t>(base2.size()), gated_lse_index(g, rows), ref_lse.data(), tol);
    EXPECT_FALSE(bad.failed.empty()) << "the LSE in base 2 passes";
    EXPECT_EQ(r.lse[static_cast<std::size_t>(2 * g.h_q()) * 96], -INFINITY);  // sequence 2 has no key
    r.prm.lse = nullptr;
    EXPECT_THROW(block->execute(r.prm, nullptr), std::invalid_argument);
  }
}

}  // namespace
}  // namespace attnbench
