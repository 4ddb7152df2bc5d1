// Shared by the GPU tests and the timing executable: one problem's inputs on the device, the cuda.unified plan,
// its workspace, and a poisoned output; run() enqueues one call.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "cuda/runtime.hpp"
#include "inputs.hpp"

namespace attnbench::gputest {

struct DeviceCase {
  HostInputs host;
  cuda::DeviceBuffer q, k, v, cu, used, table, out, workspace;
  std::unique_ptr<AttentionKernel> kernel = make_cuda_unified();
  std::unique_ptr<AttentionPlan> plan;
  AttentionParams params;

  DeviceCase(const AttentionProblem& p, const std::map<std::string, std::string>& knobs, uint64_t seed,
             BlockOrder order = BlockOrder::shuffled)
      : host(build_inputs(p, seed, order)) {
    auto up = [](cuda::DeviceBuffer& b, const auto& vec) {
      const std::size_t n = vec.size() * sizeof(vec[0]);
      b = cuda::DeviceBuffer(n);
      b.upload(vec.data(), n);
    };
    up(q, host.q);
    up(k, host.k_cache);
    up(v, host.v_cache);
    up(cu, host.cu_seqlens_q);
    up(used, host.seqused_k);
    up(table, host.block_table);
    out = cuda::DeviceBuffer(out_elems() * 2);
    plan = kernel->plan(p, KnobValues::resolve(knobs, /*read_env=*/false));
    workspace = cuda::DeviceBuffer(plan->workspace_bytes);
    params = make_attention_params(p);
    params.q = q.data();
    params.k_cache = k.data();
    params.v_cache = v.data();
    params.out = out.data();
    params.cu_seqlens_q = static_cast<const int32_t*>(cu.data());
    params.seqused_k = static_cast<const int32_t*>(used.data());
    params.block_table = static_cast<const int32_t*>(table.data());
    params.workspace = workspace.data();
  }
  std::size_t out_elems() const {
    const auto& p = host.problem;
    return static_cast<std::size_t>(p.total_q()) * p.heads * p.head_size;
  }
  void poison() { out.fill_byte(0xFF); }  // 0xFFFF is NaN in fp16 and bf16
  void run(cudaStream_t s) const { kernel->run(*plan, params, s); }
};

}  // namespace attnbench::gputest
