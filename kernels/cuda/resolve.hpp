// cuda.unified's one resolve step: a problem, the parsed knobs and the device in, the instance that runs it or a
// typed decline out. supports() is its support, plan() builds from its instance. Pure host C++ like
// heuristics.cpp (compiled in every build): the built-instance table comes in as a predicate, so unit tests run
// it without the CUDA backend.
#pragma once
#include <functional>
#include <string>

#include "attnbench/kernel.hpp"
#include "cuda/heuristics.hpp"

namespace attnbench::cuda {

// What resolve() knows of the device: the SM count sizes persistent grids and KV splits.
struct DeviceInfo {
  int sm_count = kDefaultSmCount;
  int arch = 90;  // compute capability x 10
};

// Whether this build has the kernel instance of a key (unified.cpp asks the generated table).
using InstanceBuilt = std::function<bool(const InstanceKey&)>;

// Everything plan() builds from: the kernel instance (backend, arch, types, head size, variant and its warps or
// warpgroups), its launch geometry, graph replay, and the features it applies.
struct UnifiedInstance {
  Backend backend = Backend::cuda;
  int arch = 90;
  AttentionTypes types;  // Q, K/V and O storage (one 16-bit dtype today: key.dtype)
  InstanceKey key;
  UnifiedLaunchPlan launch;
  bool graph_replay = false;
  AttentionFusion fusion;  // the output gate and the Q prologue (2D wide) it applies
  std::string summary;  // launch.summary, then " +q-norm-rope" and " +gate" where the instance applies them
};

// An instance, or why not: a decline of the problem or the knobs (DeclineKind::unsupported), or of an instance
// the build leaves out (DeclineKind::no_instance, `instance` then says which).
struct Resolution {
  Support support;
  UnifiedInstance instance;
  bool ok() const { return support.ok; }
};

// Declines, first to last: the problem's shape, types and features (unified_supports), its Q prologue
// (q_prologue_conflict), knobs that force the wide kernel onto a geometry it cannot hold (wide_knob_conflict),
// more wide tiles than an int32 index, an instance `built` says no to.
Resolution resolve(const AttentionProblem& p, const UnifiedKnobs& knobs, const DeviceInfo& device,
                   const InstanceBuilt& built);

}  // namespace attnbench::cuda
