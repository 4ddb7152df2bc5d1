// One call of a CPU gated block on host buffers for the host tests: the inputs built, out and the workspace
// poisoned (0xFF: NaN in fp16 and bf16), the workspace prepared, one execute().
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "gated_case.hpp"

namespace attnbench::gatedtest {

// Host buffers of one CPU call.
struct CpuRun {
  GatedHostInputs in;
  std::vector<uint16_t> w_qkvg, out;
  std::vector<unsigned char> ws;
  GatedBlockParams prm;
};

// seq_lens: the call's GatedBlockParams::seq_lens (empty: none), kept in r.in for the reference.
inline CpuRun run_cpu(const GatedGeometry& g, GatedBlock& block, QGateLayout weight_layout,
                      const std::vector<int32_t>& seq_lens = {}) {
  CpuRun r;
  r.in = build_gated_inputs(g, 11);
  r.in.seq_lens = seq_lens;
  r.w_qkvg = build_w_qkvg(g, weight_layout, r.in.wq.data(), r.in.wgate.data(), r.in.wk.data(), r.in.wv.data());
  r.out.assign(static_cast<std::size_t>(g.tokens()) * g.d_model(), 0xFFFF);  // NaN: every element must be written
  r.ws.assign(block.workspace_size(), 0xFF);
  r.prm = make_gated_params(g);
  r.prm.h = r.in.h.data();
  r.prm.w_qkvg = r.w_qkvg.data();
  r.prm.q_norm_weight = r.in.q_norm_weight.data();
  r.prm.k_norm_weight = r.in.k_norm_weight.data();
  r.prm.cos = r.in.cos.data();
  r.prm.sin = r.in.sin.data();
  r.prm.w_o = r.in.w_o.data();
  r.prm.out = r.out.data();
  r.prm.workspace = r.ws.data();
  r.prm.seq_lens = seq_lens.empty() ? nullptr : r.in.seq_lens.data();
  EXPECT_THROW(block.execute(r.prm, nullptr), std::invalid_argument);  // workspace not prepared yet
  block.prepare_workspace(r.ws.data(), nullptr);
  block.execute(r.prm, nullptr);
  return r;
}

}  // namespace attnbench::gatedtest
