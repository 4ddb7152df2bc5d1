// The backward's host inputs: packed Q, K, V and dO (seeded normal data), and what the forward of those gives: O
// (the fp32 reference's, rounded to the dtype) and the LSE (fp32), so that each backward kernel is gated on its
// own. The reference's gradients come out of the same pass.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "cases/gate.hpp"
#include "cases/inputs.hpp"
#include "device/device.hpp"

namespace attnbench {

struct BwdInputs {
  AttentionProblem problem;
  HostTensor q, k, v, o, d_o;
  std::vector<float> lse;  // [total_q, heads]
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  // Params over these host buffers (gradients and workspace left null).
  AttentionBwdParams params() const;
};

// The fp32 gradients of one case, every row: dq [total_q, heads, head_size], dk and dv [total_k, kv_heads, head_size].
struct BwdReference {
  std::vector<float> dq, dk, dv;
  double ms = 0;      // the reference pass's wall time
  std::string where;  // "gpu" or "cpu"
};

// The gradient gate: dq, dk, dv (the kernel's, in the problem's dtype, dense-packed) each against its reference over
// every row (per query for dQ, per key for dK/dV) under gradient_tolerance(base), merged (merge_tensor_gates).
GateResult gate_gradients(const AttentionProblem& p, const uint16_t* dq, const uint16_t* dk, const uint16_t* dv,
                          const BwdReference& ref, const Tolerance& base);

// Q, K, V, dO drawn (Q and K with the spread's std), then the reference pass: O, the LSE and `ref`'s gradients, on
// `gpu` (a CUDA device: reference/gpu/attention_bwd_ref.cu) or, without one, the Eigen reference.
BwdInputs build_bwd_inputs(const AttentionProblem& p, uint64_t seed, BwdReference& ref, const InputSpread& spread = {},
                           Device* gpu = nullptr);

}  // namespace attnbench
