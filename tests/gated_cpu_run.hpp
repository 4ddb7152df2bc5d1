// One call of a CPU gated block on host buffers for the host tests: the inputs built, out and the workspace
// poisoned (0xFF: NaN in fp16 and bf16), the workspace prepared, one execute(); and its gate over every row.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gate.hpp"
#include "cases/gated_case.hpp"

namespace attnbench::gatedtest {

// Host buffers of one CPU call.
struct CpuRun {
  GatedHostInputs in;
  GatedKernelWeights w;
  std::vector<uint16_t> out;
  std::vector<unsigned char> ws;
  std::vector<float> lse;  // [B, h_q, S] when the block has return_lse
  GatedBlockParams prm;
};

// seq_lens: the call's GatedBlockParams::seq_lens (empty: none), kept in r.in for the reference.
inline CpuRun run_cpu(const GatedGeometry& g, GatedBlock& block, QGateLayout weight_layout,
                      const std::vector<int32_t>& seq_lens = {}) {
  CpuRun r;
  r.in = build_gated_inputs(g, 11);
  r.in.seq_lens = seq_lens;
  GatedOptions wo = block.options();  // the weights' layout may differ from the block's, to test that it matters
  wo.q_gate_layout = weight_layout;
  if (wo.mx) apply_mx_weights(g, *wo.mx, r.in);
  if (wo.fp8) apply_fp8_inputs(g, *wo.fp8, r.in);
  r.w = gated_kernel_weights(g, wo, r.in);
  const bool coded = wo.mx || wo.fp8;
  r.out.assign(static_cast<std::size_t>(g.tokens()) * g.d_model(), 0xFFFF);  // NaN: every element must be written
  r.ws.assign(block.workspace_size(), 0xFF);
  r.prm = make_gated_params(g);
  r.prm.h = wo.fp8 ? static_cast<const void*>(r.w.h_codes.data()) : r.in.h.data();
  r.prm.w_qkvg = coded ? static_cast<const void*>(r.w.qkvg_codes.data()) : r.w.w_qkvg.data();
  r.prm.q_norm_weight = r.in.q_norm_weight.data();
  r.prm.k_norm_weight = r.in.k_norm_weight.data();
  r.prm.cos = r.in.cos.data();
  r.prm.sin = r.in.sin.data();
  r.prm.w_o = coded ? static_cast<const void*>(r.w.o_codes.data()) : r.in.w_o.data();
  if (wo.mx) {
    r.prm.w_qkvg_scales = r.w.qkvg_scales.data();
    r.prm.w_o_scales = r.w.o_scales.data();
  }
  r.prm.out = r.out.data();
  r.prm.workspace = r.ws.data();
  r.prm.seq_lens = seq_lens.empty() ? nullptr : r.in.seq_lens.data();
  if (block.options().return_lse) {
    r.lse.assign(static_cast<std::size_t>(g.tokens()) * g.h_q(), NAN);
    r.prm.lse = r.lse.data();
  }
  EXPECT_THROW(block.execute(r.prm, nullptr), std::invalid_argument);  // workspace not prepared yet
  block.prepare_workspace(r.ws.data(), nullptr);
  block.execute(r.prm, nullptr);
  return r;
}

// The harness's gate of a CPU run over every row against the reference of `o` (its inputs, seq_lens included, from
// r.in), with the gated block's tolerance rule.
inline GateResult compare_with_reference(const GatedGeometry& g, const GatedOptions& o, const CpuRun& r) {
  std::vector<int64_t> rows(g.tokens());
  for (int64_t t = 0; t < g.tokens(); ++t) rows[t] = t;
  std::vector<float> ref(rows.size() * g.d_model());
  reference::gated_block(g, o, r.in.ref(), rows, ref.data());
  const Tolerance tol = gated_tolerance(default_tolerance(g.dtype()), ref.data(), ref.size(), o.mx, o.fp8.has_value());
  return gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
}

}  // namespace attnbench::gatedtest
