// A plugin's C kernel descriptor (attnbench/plugin.h) as the registry's AttentionKernel: the one adapter between
// the C ABI and the harness, so that nothing downstream knows a kernel came from a plugin.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnbench/kernel.hpp"
#include "attnbench/plugin.h"

namespace attnbench {

// The backend an ATTNBENCH_BACKEND_* value names; nullopt for any other value.
std::optional<Backend> plugin_backend(int32_t backend);

// `k` must stay valid while the kernel lives (plugin.h: until the process exits).
std::shared_ptr<const AttentionKernel> make_plugin_kernel(const attnbench_kernel& k, Backend backend);

// The C view of a problem: the lengths copied as int32, the feature lists pointing into `p` (which must outlive it).
struct CProblem {
  explicit CProblem(const AttentionProblem& p);
  CProblem(const CProblem&) = delete;
  CProblem& operator=(const CProblem&) = delete;
  attnbench_problem c{};

 private:
  std::vector<int32_t> q_lens_, kv_lens_;
  std::string first_feature_;
};
// The C view of a call's params: the same pointers and strides.
attnbench_params c_params(const AttentionParams& a);

}  // namespace attnbench
