// What a kernel declares: name, backend, supports(problem, knobs) -> ok | decline{reason}, plan(problem, knobs),
// run(plan, params, stream). plan() does all host work that can be done once; run() only launches.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "attnbench/attention.hpp"
#include "attnbench/knobs.hpp"

namespace attnbench {

enum class Backend { cpu, cuda };
inline const char* backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

// ok, or a typed decline with a human reason. "No kernel for this" is not "wrong answer".
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
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
  // stream: a cudaStream_t for the CUDA backend, ignored by the CPU backend. Allocates nothing.
  virtual void run(const AttentionPlan& plan, const AttentionParams& params, void* stream) const = 0;
};

}  // namespace attnbench
