// The cuda.unified host-heuristics tests' problems and knob helpers (test_cuda_heuristics.cpp,
// test_cuda_wide_dispatch.cpp).
#pragma once
#include <map>
#include <string>
#include <utility>

#include "../kernels/cuda/heuristics.hpp"
#include "../kernels/cuda/resolve.hpp"

namespace attnbench::cuda::heuristics_test {

inline AttentionProblem uniform(int batch, int q, int kv, int heads, int kv_heads, int d, bool causal = true) {
  AttentionProblem p;
  p.q_lens.assign(batch, q);
  p.kv_lens.assign(batch, kv);
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = d;
  p.causal = causal;
  return p;
}

inline KnobValues values(std::map<std::string, std::string> o = {}) { return KnobValues::resolve(o, /*read_env=*/false); }
inline UnifiedKnobs knobs(std::map<std::string, std::string> o = {}) { return UnifiedKnobs::parse(values(std::move(o))); }
inline Resolution resolve_all_built(const AttentionProblem& p, const UnifiedKnobs& k) {
  return resolve(p, k, DeviceInfo{}, [](const InstanceKey&) { return true; });
}

}  // namespace attnbench::cuda::heuristics_test
