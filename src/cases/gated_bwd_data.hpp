// The gated block backward's host side: seeded inputs, the save set from the fp32 reference (rounded to the dtype,
// so that each backward is gated on its own), the reference's gradients, and the gate over the block's gradient
// tensors. The runner's case (gated_bwd_case.cpp) and the tests share it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/gated_block_bwd_ref.hpp"
#include "cases/gate.hpp"
#include "cases/gated_case.hpp"
#include "device/device.hpp"

namespace attnbench {

// build_gated_inputs' data with each token's h row scaled by a seeded factor in [1/2, 2] (log-uniform), so that
// the norm's rstd varies by token (at unit scale a missing rstd factor would pass), and dy ~ N(0, 1). The save set
// (GatedSaved's tensors) is the reference forward's, q/k/v/gate/o/q_pre/k_pre rounded to the dtype.
struct GatedBwdHost {
  GatedHostInputs in;
  std::vector<uint16_t> dy;
  reference::GatedBwdRef ref;
  std::vector<uint16_t> q, k, v, gate, o, q_pre, k_pre;
  double ref_ms = 0;
  std::string where = "cpu";  // where the reference ran: "cpu" (Eigen) or "gpu"
};
// gpu: a CUDA device the reference runs on (reference/gpu/gated_block_bwd_ref.cu), or null for the host's.
GatedBwdHost build_gated_bwd_host(const GatedGeometry& g, const GatedOptions& o, uint64_t seed, Device* gpu = nullptr);
// The GPU reference on `dev` for host.in and host.dy, into host.ref (sized here).
void gated_bwd_reference_on_device(Device& dev, const GatedGeometry& g, const GatedOptions& o, GatedBwdHost& host);

// The reference dW_qkvg [N, d_model] in a layout's row order (gated_columns).
std::vector<float> reference_dw_qkvg(const GatedGeometry& g, QGateLayout layout, const reference::GatedBwdRef& r);

// A kernel's gradients (dtype halves, null where not asked for).
struct GatedBwdGrads {
  const uint16_t *dh = nullptr, *dw_qkvg = nullptr, *dw_o = nullptr, *dw_q_norm = nullptr, *dw_k_norm = nullptr;
};

// Each gradient asked for (dh per token, dW_qkvg per weight row, dW_o per d_model row, each norm weight as one row)
// against the reference under gated_bwd_tolerance, a row's error against at least gradient_row_floor; merged
// (merge_tensor_gates: "dw_o.row_rel_l2" names tensor and bound).
GateResult gate_gated_gradients(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b,
                                const GatedBwdGrads& got, const GatedBwdHost& host, const Tolerance& base);

// The bounds of one gradient tensor (rows of row_len): gradient_tolerance's (twice the forward's) with the gated
// block's factor on rtol, and atol scaled by max(1, the largest row RMS of ref), as the block's forward scales it by
// its output's RMS (gated_tolerance): the rows of a weight gradient differ in scale.
Tolerance gated_bwd_tolerance(DType dt, const Tolerance& base, const std::vector<float>& ref, int row_len);

}  // namespace attnbench
