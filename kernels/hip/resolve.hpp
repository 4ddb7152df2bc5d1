// hip.unified's one resolve step: a problem, the parsed knobs and the device in, the instance that runs it or a
// typed decline out. supports() is its support, plan() builds from its instance. Pure host C++ (built in every
// build): the built-instance table comes in as a predicate, so unit tests run it without the HIP backend.
#pragma once
#include <functional>
#include <string>

#include "attnbench/kernel.hpp"
#include "hip/heuristics.hpp"

namespace attnbench::hip {

// What resolve() knows of the device: the CU count sizes the KV splits; the gfx target must be one the kernels are
// built for.
struct DeviceInfo {
  int cu_count = kDefaultCuCount;
  std::string arch = "gfx942";  // the device's gcnArchName up to its first ':' (features like sramecc+ dropped)
};
// The gfx targets the kernels are compiled for (kernels/hip/CMakeLists.txt): CDNA3 and CDNA2.
bool arch_supported(const std::string& arch);

using InstanceBuilt = std::function<bool(const InstanceKey&)>;

struct UnifiedInstance {
  Backend backend = Backend::hip;
  std::string arch;
  AttentionTypes types;
  InstanceKey key;
  LaunchPlan launch;
  bool graph_replay = false;
};

struct Resolution {
  Support support;
  UnifiedInstance instance;
  bool ok() const { return support.ok; }
};

// Declines, first to last: a gfx target without kernels, the problem (problem_conflict), the knobs
// (knob_conflict), an instance `built` says no to (DeclineKind::no_instance).
Resolution resolve(const AttentionProblem& p, const HipKnobs& knobs, const DeviceInfo& device,
                   const InstanceBuilt& built);

}  // namespace attnbench::hip
