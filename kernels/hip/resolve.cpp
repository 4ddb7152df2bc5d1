#include "hip/resolve.hpp"

namespace attnbench::hip {

bool arch_supported(const std::string& arch) { return arch == "gfx942" || arch == "gfx90a"; }

Resolution resolve(const AttentionProblem& p, const HipKnobs& knobs, const DeviceInfo& device,
                   const InstanceBuilt& built) {
  Resolution r;
  if (!arch_supported(device.arch)) {
    r.support = Support::no("device " + device.arch + ": hip.unified is built for gfx942 and gfx90a");
    return r;
  }
  if (const std::string why = problem_conflict(p); !why.empty()) {
    r.support = Support::no(why);
    return r;
  }
  if (const std::string why = knob_conflict(p, knobs); !why.empty()) {
    r.support = Support::no(why);
    return r;
  }
  UnifiedInstance& in = r.instance;
  in.arch = device.arch;
  in.types = p.types;
  in.launch = make_launch_plan(p, knobs, device.cu_count);
  in.key = instance_key(p, in.launch);
  in.graph_replay = recommend_graph_replay(p, knobs, /*caller_capturing=*/false);
  if (!built(in.key)) r.support = Support::no_instance("no instance for " + instance_name(in.key) + " in this build");
  return r;
}

}  // namespace attnbench::hip
