#include "cases/bwd_inputs.hpp"

#include <chrono>
#include <string>
#include <tuple>
#include <utility>

#include "attnbench/reference_bwd.hpp"
#include "cases/gpu_reference.hpp"

namespace attnbench {

AttentionBwdParams BwdInputs::params() const {
  AttentionBwdParams a = make_attention_bwd_params(problem);
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.o = o.data();
  a.d_o = d_o.data();
  a.lse = lse.data();
  a.cu_seqlens_q = cu_seqlens_q.data();
  a.cu_seqlens_k = cu_seqlens_k.data();
  return a;
}

GateResult gate_gradients(const AttentionProblem& p, const uint16_t* dq, const uint16_t* dk, const uint16_t* dv,
                          const BwdReference& ref, const Tolerance& base) {
  const Tolerance tol = gradient_tolerance(p.types.o, base);
  std::vector<std::pair<std::string, GateResult>> parts;
  for (const auto& [name, got, want] : {std::tuple{"dq", dq, &ref.dq}, {"dk", dk, &ref.dk}, {"dv", dv, &ref.dv}}) {
    const int64_t n = static_cast<int64_t>(want->size()), rows = n / p.head_size;
    std::vector<int64_t> every(rows);
    for (int64_t r = 0; r < rows; ++r) every[r] = r;
    const double floor = gradient_row_floor(want->data(), rows, p.head_size);
    parts.emplace_back(name, gate_rows(got, n, p.types.o, p.head_size, every, want->data(), tol, floor));
  }
  GateResult g = merge_tensor_gates(parts);
  g.reference = ref.where;
  g.reference_ms = ref.ms;
  return g;
}

BwdInputs build_bwd_inputs(const AttentionProblem& p, uint64_t seed, BwdReference& ref, const InputSpread& spread,
                           Device* gpu) {
  p.validate();
  BwdInputs in;
  in.problem = p;
  const int n = p.num_seqs();
  in.cu_seqlens_q.assign(n + 1, 0);
  in.cu_seqlens_k.assign(n + 1, 0);
  for (int s = 0; s < n; ++s) {
    in.cu_seqlens_q[s + 1] = in.cu_seqlens_q[s] + p.q_lens[s];
    in.cu_seqlens_k[s + 1] = in.cu_seqlens_k[s] + p.kv_lens[s];
  }
  const DType dt = p.types.o;
  const std::size_t hd = p.head_size, nq = static_cast<std::size_t>(p.total_q()) * p.heads * hd;
  const std::size_t nk = static_cast<std::size_t>(total_k(p)) * p.kv_heads * hd;
  in.q = random_tensor(nq, dt, seed, 11, 0.f, spread.qk_std);
  in.k = random_tensor(nk, dt, seed, 12, 0.f, spread.qk_std);
  in.v = random_tensor(nk, dt, seed, 13);
  in.d_o = random_tensor(nq, dt, seed, 14);
  in.o = HostTensor(dt, nq);
  in.lse.assign(static_cast<std::size_t>(p.total_q()) * p.heads, 0.f);
  std::vector<float> o(nq);
  ref.dq.assign(nq, 0.f);
  ref.dk.assign(nk, 0.f);
  ref.dv.assign(nk, 0.f);
  const auto t0 = std::chrono::steady_clock::now();
  if (gpu) {
    reference_bwd_on_device(*gpu, in, o.data(), ref);
  } else {
    reference::attention_backward(in.params(), o.data(), in.lse.data(), ref.dq.data(), ref.dk.data(), ref.dv.data());
  }
  ref.where = gpu ? "gpu" : "cpu";
  ref.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (std::size_t i = 0; i < nq; ++i) in.o.set(i, o[i]);
  return in;
}

}  // namespace attnbench
