// What a kernel declares: name, backend, supports(problem, knobs) -> ok | decline{reason}, plan(problem, knobs),
// run(plan, params, stream). plan() does all host work that can be done once; run() only launches.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attnbench/attention.hpp"
#include "attnbench/knobs.hpp"

namespace attnbench {

enum class Backend { cpu, cuda, hip };
inline const char* backend_name(Backend b) {
  switch (b) {
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
    case Backend::hip: return "hip";
  }
  return "?";
}
// A GPU backend: device memory, streams and graph replay (the runtime shim's backends).
inline bool is_gpu(Backend b) { return b != Backend::cpu; }
// The backend a name as backend_name() writes it stands for; nullopt for any other name.
inline std::optional<Backend> parse_backend(std::string_view name) {
  for (Backend b : {Backend::cpu, Backend::cuda, Backend::hip})
    if (name == backend_name(b)) return b;
  return std::nullopt;
}

// Why a kernel declines: the problem is outside what it implements, or it would be served by a kernel instance
// this build leaves out (a trimmed ATTNBENCH_CUDA_INSTANCES set).
enum class DeclineKind { unsupported, no_instance };

// ok, or a typed decline with a human reason. "No kernel for this" is not "wrong answer".
struct Support {
  bool ok = true;
  std::string reason;
  DeclineKind kind = DeclineKind::unsupported;  // when !ok
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  static Support no_instance(std::string why) { return {false, std::move(why), DeclineKind::no_instance}; }
};

// Everything a call needs that can be computed once. Backends derive from it.
struct AttentionPlan {
  virtual ~AttentionPlan() = default;
  std::size_t workspace_bytes = 0;  // caller allocates this in the backend's memory
  bool graph_replay = false;        // recommend_graph_replay() for this problem
  std::string summary;              // e.g. "3d splits=8 warps=4", recorded in the result row
};

class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;
  virtual std::string name() const = 0;
  virtual Backend backend() const = 0;
  // Under the given knob values (a knob may narrow what a kernel does, e.g. a CPU work limit).
  virtual Support supports(const AttentionProblem& p, const KnobValues& knobs) const = 0;
  virtual std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const = 0;
  // stream: a cudaStream_t for the CUDA backend, ignored by the CPU backend. Allocates nothing. A graph captured from
  // it must not outlive the plan (a capture may copy from the plan's page-locked memory at each replay).
  virtual void run(const AttentionPlan& plan, const AttentionParams& params, void* stream) const = 0;
};

}  // namespace attnbench
